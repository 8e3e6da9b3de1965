// The collective command protocol of serve: rank 0 broadcasts one Command per round and every
// rank acts on it (searches its shards, reloads a new generation, or stops). Commands are bytes so
// that they travel through Comm::broadcast.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::serve {

// One search as every rank runs it: the query vector is resolved (and normalised as the catalog
// says) by rank 0 already.
struct SearchJob {
  std::vector<float> vector;
  int k = 10;
  int nprobe = 0;               // 0: the catalog's default
  std::string filter;           // "" or an expression already parsed by rank 0
  int32_t exclude_slide = -1;   // leave out this slide's patches (-1: none)
  int32_t exclude_patient_of = -1;  // leave out every slide of this slide's patient (-1: none)
};

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
