#include "stages/embed/source.h"

#include <cstring>

#include "common/core/error.h"
#include "stages/embed/work.h"
#include "stages/patchgen/extract.h"

namespace tessera::embed {

void StoreSource::read(const std::vector<int64_t>& index_rows, uint8_t* rgb) {
  const size_t patch_bytes = static_cast<size_t>(index_.patch_size) * index_.patch_size * 3;
  for (const ShardRead& r : group_by_shard(index_rows, index_.shard, index_.row)) {
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

void WsiSource::read(const std::vector<int64_t>& index_rows, uint8_t* rgb) {
  const int ps = index_.patch_size;
  const size_t patch_bytes = static_cast<size_t>(ps) * ps * 3;
  for (size_t k = 0; k < index_rows.size(); ++k) {
    const int64_t i = index_rows[k];
    const int s = index_.slide[i];
    if (s != open_slide_) {
      slide_.reset();
      open_slide_ = -1;
      slide_.emplace(Slide::open(index_.slides.path[s]));
      open_slide_ = s;
    }
    const int level = index_.slides.level[s];
    const int rs = index_.slides.read_size[s];
    const int64_t x = index_.coords[2 * i], y = index_.coords[2 * i + 1];
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

std::unique_ptr<PatchSource> make_source(const std::string& kind, const PatchIndex& index) {
  if (kind == "store") return std::make_unique<StoreSource>(index);
  if (kind == "wsi") return std::make_unique<WsiSource>(index);
  fail<InvalidInput>("invalid --source '{}': expected store or wsi", kind);
}

}  // namespace tessera::embed
