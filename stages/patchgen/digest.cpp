#include "stages/patchgen/digest.h"

#include <filesystem>
#include <map>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/stage/layout.h"
#include "common/stage/marker.h"
#include "common/store/index.h"
#include "common/store/store.h"

namespace tessera::patchgen {

namespace fs = std::filesystem;

namespace {

template <typename T>
void hash_vector(Sha256& h, const std::vector<T>& v) {
  h.update(v.data(), v.size() * sizeof(T));
}

}  // namespace

RunDigest digest_run(const std::string& stage_dir) {
  if (!path_exists(stage_file(stage_dir, kSuccessFile))) {
    fail<IoError>("'{}' is not a completed patchgen run (no _SUCCESS)", stage_dir);
  }
  const IndexInfo info = load_index_info(stage_dir);
  const IndexRows rows_all = IndexReader(info.path).read_range(0, info.rows);
  const auto& ids = rows_all.patch_id;
  const auto& shard = rows_all.shard;
  const auto& row = rows_all.row;

  Sha256 ih;
  hash_vector(ih, ids);
  hash_vector(ih, rows_all.slide);
  hash_vector(ih, rows_all.coords);
  hash_vector(ih, rows_all.tissue);
  for (const auto* column : {&info.slides.slide_id, &info.slides.status, &info.slides.reason}) {
    for (const auto& s : *column) ih.update(s + '\n');
  }
  hash_vector(ih, info.slides.patch_count);

  // Read patches shard by shard in row order, then hash them in patch_id order.
  std::map<int, std::vector<std::pair<uint64_t, size_t>>> by_shard;  // row, position in index
  for (size_t i = 0; i < ids.size(); ++i) by_shard[shard[i]].push_back({static_cast<uint64_t>(row[i]), i});
  const int patch_size = info.patch_size;
  const size_t patch_bytes = static_cast<size_t>(patch_size) * patch_size * 3;
  std::vector<std::string> patch_hash(ids.size());
  for (auto& [s, rows] : by_shard) {
    std::sort(rows.begin(), rows.end());
    ShardReader reader(info.shard_path(s));
    const size_t batch = 256;
    std::vector<uint8_t> pixels;
    for (size_t b = 0; b < rows.size(); b += batch) {
      std::vector<uint64_t> list;
      for (size_t k = b; k < std::min(rows.size(), b + batch); ++k) list.push_back(rows[k].first);
      pixels.resize(list.size() * patch_bytes);
      reader.read_patches(list, pixels.data());
      for (size_t k = 0; k < list.size(); ++k) {
        patch_hash[rows[b + k].second] = sha256_hex(
            std::string_view(reinterpret_cast<const char*>(pixels.data() + k * patch_bytes), patch_bytes));
      }
    }
  }
  Sha256 ph;
  for (const auto& h : patch_hash) ph.update(h);
  return {ih.hex_digest(), ph.hex_digest(), static_cast<int64_t>(ids.size())};
}

}  // namespace tessera::patchgen
