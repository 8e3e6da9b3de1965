// Where embed gets patch pixels: patchgen's shards (the decoupled path) or the slides themselves
// at the index coordinates (the coupled baseline). Both give byte-identical pixels for raw
// stores. Not thread-safe: all HDF5 calls of a process stay on the thread that owns the source.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stages/patchgen/index.h"
#include "stages/patchgen/slide.h"
#include "stages/patchgen/store.h"

namespace tessera::embed {

class PatchSource {
 public:
  virtual ~PatchSource() = default;
  // Writes the RGB pixels of the given index rows ([n, S, S, 3]) to `rgb`.
  virtual void read(const std::vector<int64_t>& index_rows, uint8_t* rgb) = 0;
};

class StoreSource final : public PatchSource {
 public:
  explicit StoreSource(const patchgen::PatchIndex& index) : index_(index) {}
  void read(const std::vector<int64_t>& index_rows, uint8_t* rgb) override;

 private:
  const patchgen::PatchIndex& index_;
  std::map<int, patchgen::ShardReader> shards_;  // opened on first use
  std::vector<uint8_t> buffer_;
};

class WsiSource final : public PatchSource {
 public:
  explicit WsiSource(const patchgen::PatchIndex& index) : index_(index) {}
  void read(const std::vector<int64_t>& index_rows, uint8_t* rgb) override;

 private:
  const patchgen::PatchIndex& index_;
  int open_slide_ = -1;
  std::optional<patchgen::Slide> slide_;
  std::vector<uint8_t> buffer_;
};

std::unique_ptr<PatchSource> make_source(const std::string& kind, const patchgen::PatchIndex& index);

}  // namespace tessera::embed
