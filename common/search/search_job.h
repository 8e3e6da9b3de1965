// What one search asks of every rank, as serve broadcasts it (stages/serve/protocol.h) and
// RankShards::search answers it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::search {

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

}  // namespace tessera::search
