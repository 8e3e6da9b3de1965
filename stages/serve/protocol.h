// The collective command protocol of serve: rank 0 broadcasts one Command per round and every
// rank acts on it (searches its shards, reloads a new generation, or stops). Commands are bytes so
// that they travel through Comm::broadcast.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/search/search_job.h"

namespace tessera::serve {

using search::SearchJob;  // common/search/search_job.h

// kSearchNext: a round of the generation being swapped in (every rank searches the shards it
// loaded beside the current ones), while the current generation still answers its own searches.
enum class CommandKind : uint8_t { kSearch = 1, kReload = 2, kStop = 3, kSearchNext = 4 };

struct Command {
  CommandKind kind = CommandKind::kSearch;
  std::vector<SearchJob> jobs;  // kSearch, kSearchNext
};

std::string encode_command(const Command& command);
// Throws Error for bytes that encode_command did not make (truncated, unknown kind).
Command decode_command(const std::string& bytes);

}  // namespace tessera::serve
