// Reading the small files of a stage directory without ever failing: tessera-status reports what
// it cannot read instead of stopping. Not collective; thread-compatible.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tessera::status {

// The JSON document at `path`, or nullopt when it does not exist or does not parse; then, if
// `problem` is still empty, the parser's message (bytes that are not UTF-8 escaped as \xNN) is
// put there.
std::optional<nlohmann::json> read_json_noted(const std::string& path, std::string& problem);

// `key` of object `j` as a T, or nullopt when `j` is absent, not an object, lacks `key`, or holds
// another type there.
template <typename T>
std::optional<T> json_get(const std::optional<nlohmann::json>& j, const char* key) {
  if (!j || !j->is_object() || !j->contains(key)) return std::nullopt;
  try {
    return j->at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// The last line of progress.jsonl at `path` that parses as an object (a line may be half-written
// while a job runs), reading at most its last 64 KiB; nullopt when there is none.
std::optional<nlohmann::json> last_progress(const std::string& path);

}  // namespace tessera::status
