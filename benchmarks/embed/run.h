// embed_bench's run (main.cpp): the patchgen run it reads, the fixed set of patches in memory,
// and one repetition of the four modes (model-only, cached, store, wsi), each timed between
// barriers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "benchmarks/embed/options.h"
#include "common/mpi/comm.h"
#include "common/store/index.h"
#include "stages/embed/config.h"
#include "stages/embed/model.h"

namespace tessera::embed::driver {

const std::vector<std::string> kModes = {"model-only", "cached", "store", "wsi"};

// Collective. Makes RUN/patchgen (default patchgen options) from the slide, generating the slide
// first, unless RUN/patchgen/_SUCCESS exists.
nlohmann::json ensure_run(const BenchOptions& o, Comm& comm);

// patchgen's chunk-patches of the run (from RUN/patchgen/config.ini); throws InvalidInput when
// it is not `expected`.
int run_chunk_patches(const std::string& run, int expected);

// The files a stage-path mode reads: the index, the shards and the slides.
std::vector<std::string> input_files(const IndexInfo& index);

// This rank's share of the fixed set, cut into batches, with its pixels in memory: batch b holds
// batch_size patches at pixels[b * batch_size * patch_bytes], the padding of the last one zero.
// As in embed_rows, the padding goes through the model only on CUDA (`pad`); on the CPU a short
// last batch costs less.
struct PatchSet {
  int64_t total = 0;  // patches over all ranks
  int batch_size = 0;
  bool pad = false;
  int patch_size = 0;
  size_t patch_bytes = 0;
  std::vector<int64_t> rows;
  std::vector<std::vector<int64_t>> batches;
  std::vector<uint8_t> pixels;
  const uint8_t* batch_pixels(size_t b) const {
    return pixels.data() + b * static_cast<size_t>(batch_size) * patch_bytes;
  }
  // Rows batch b sends through the model.
  int forward_rows(size_t b) const { return pad ? batch_size : static_cast<int>(batches[b].size()); }
};

// Collective. This rank's share of the first `total` rows of the index, read into memory.
PatchSet load_patch_set(const IndexInfo& index, const IndexReader& reader, int64_t total,
                        int batch_size, bool pad, Comm& comm);

// The inputs of the stage-path modes under a --cache policy. warm: the index and its reader opened
// at start-up, kept open (shards and slide are opened by each run's source, inside the timer, as
// in the stage). fresh and drop: no handle kept; every store/wsi run opens the index anew, outside
// the timer, drop first advising the kernel to drop the input files' cached pages.
struct Inputs {
  std::string policy;
  std::string stage_dir;
  std::vector<std::string> files;
  const IndexInfo* index = nullptr;    // warm only
  const IndexReader* reader = nullptr;  // warm only
};

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);

struct Context {
  const Model& model;
  const Inputs& inputs;
  const PatchSet& set;
  const std::vector<PreparedBatch>& prepared;
  const Config& config;
  std::string scratch;
  Comm& comm;
};

// Collective. One repetition: every mode once, in kModes order rotated by `offset` so that no
// mode always runs first. `last` receives each mode's embeddings (this rank's).
nlohmann::json repetition(int index, size_t offset, const Context& c,
                          std::map<std::string, std::vector<float>>* last);

}  // namespace tessera::embed::driver
