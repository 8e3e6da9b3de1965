#include "stages/embed/source.h"

#include <cstring>

#include "common/core/error.h"
#include "stages/embed/work.h"

namespace tessera::embed {

void StoreSource::read(const IndexRows& rows, uint8_t* rgb) {
  const size_t patch_bytes = static_cast<size_t>(index_.patch_size) * index_.patch_size * 3;
  for (const ShardRead& r : group_by_shard(rows.shard, rows.row)) {
    auto it = shards_.find(r.shard);
    if (it == shards_.end()) {
      it = shards_.emplace(r.shard, ShardReader(index_.shard_path(r.shard))).first;
    }
    buffer_.resize(r.shard_rows.size() * patch_bytes);
    it->second.read_patches(r.shard_rows, buffer_.data());
    for (size_t k = 0; k < r.positions.size(); ++k) {
      std::memcpy(rgb + r.positions[k] * patch_bytes, buffer_.data() + k * patch_bytes, patch_bytes);
    }
  }
}

void WsiSource::read(const IndexRows& rows, uint8_t* rgb) {
  const int ps = index_.patch_size;
  const size_t patch_bytes = static_cast<size_t>(ps) * ps * 3;
  for (size_t k = 0; k < rows.size(); ++k) {
    const int s = rows.slide[k];
    if (s != open_slide_) {
      slide_.reset();
      open_slide_ = -1;
      slide_.emplace(Slide::open(index_.slides.path[s], reader_));
      open_slide_ = s;
    }
    const int level = index_.slides.level[s];
    const int rs = index_.slides.read_size[s];
    const int64_t x = rows.coords[2 * k], y = rows.coords[2 * k + 1];
    uint8_t* out = rgb + k * patch_bytes;
    if (rs == ps) {
      slide_->read_rgb(x, y, level, ps, ps, out);
    } else {
      buffer_.resize(static_cast<size_t>(rs) * rs * 3);
      slide_->read_rgb(x, y, level, rs, rs, buffer_.data());
      resize_patch(buffer_.data(), rs, out, ps);
    }
  }
}

std::unique_ptr<PatchSource> make_source(const std::string& kind, const IndexInfo& index,
                                         SlideReader reader) {
  if (kind == "store") return std::make_unique<StoreSource>(index);
  if (kind == "wsi") return std::make_unique<WsiSource>(index, reader);
  fail<InvalidInput>("invalid --source '{}': expected store or wsi", kind);
}

}  // namespace tessera::embed
