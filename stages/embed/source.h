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

#include "common/slide/slide.h"
#include "common/store/index.h"
#include "common/store/store.h"

namespace tessera::embed {

class PatchSource {
 public:
  virtual ~PatchSource() = default;
  // Writes the RGB pixels of the given index rows ([n, S, S, 3]) to `rgb`.
  virtual void read(const IndexRows& rows, uint8_t* rgb) = 0;
};

class StoreSource final : public PatchSource {
 public:
  explicit StoreSource(const IndexInfo& index) : index_(index) {}
  void read(const IndexRows& rows, uint8_t* rgb) override;

 private:
  const IndexInfo& index_;
  std::map<int, ShardReader> shards_;  // opened on first use
  std::vector<uint8_t> buffer_;
};

class WsiSource final : public PatchSource {
 public:
  // Reads slides with `reader` (--reader; the pixels are the same either way).
  explicit WsiSource(const IndexInfo& index, SlideReader reader = SlideReader::kAuto)
      : index_(index), reader_(reader) {}
  void read(const IndexRows& rows, uint8_t* rgb) override;

 private:
  const IndexInfo& index_;
  SlideReader reader_;
  int open_slide_ = -1;
  std::optional<Slide> slide_;
  std::vector<uint8_t> buffer_;
};

// "store" or "wsi" (read with `reader`); throws InvalidInput naming --source otherwise.
std::unique_ptr<PatchSource> make_source(const std::string& kind, const IndexInfo& index,
                                         SlideReader reader = SlideReader::kAuto);

}  // namespace tessera::embed
