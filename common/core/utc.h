// UTC times as tessera writes them in run.json, markers, _SUCCESS and progress.jsonl
// (utc_timestamp() in fs.h: "2026-11-30T02:54:48.378Z"), read back.
#pragma once

#include <optional>
#include <string>

namespace tessera {

// Seconds since the epoch of a UTC ISO 8601 time "YYYY-MM-DDTHH:MM:SS[.fff...]Z" (the fraction
// optional, any number of its digits); nullopt when `text` is anything else. The inverse of
// utc_timestamp() to the millisecond. Pure, thread-safe.
std::optional<double> parse_utc_timestamp(const std::string& text);

}  // namespace tessera
