#include "stages/patchgen/digest.h"

#include <filesystem>
#include <map>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/h5/h5.h"
#include "common/stage/marker.h"
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
  if (!fs::exists(fs::path(stage_dir) / "_SUCCESS")) {
    fail<IoError>("'{}' is not a completed patchgen run (no _SUCCESS)", stage_dir);
  }
  h5::File index = h5::File::open((fs::path(stage_dir) / "index.h5").string(), h5::Mode::kRead);
  auto ids = index.open_dataset("patch_id").read_all<int64_t>();
  auto slide = index.open_dataset("slide").read_all<int32_t>();
  auto coords = index.open_dataset("coords").read_all<int64_t>();
  auto tissue = index.open_dataset("tissue").read_all<float>();
  auto shard = index.open_dataset("shard").read_all<int32_t>();
  auto row = index.open_dataset("row").read_all<int64_t>();
  h5::Group slides = index.open_group("slides");

  Sha256 ih;
  hash_vector(ih, ids);
  hash_vector(ih, slide);
  hash_vector(ih, coords);
  hash_vector(ih, tissue);
  for (const char* name : {"slide_id", "status", "reason"}) {
    for (const auto& s : slides.open_dataset(name).read_strings()) ih.update(s + '\n');
  }
  hash_vector(ih, slides.open_dataset("patch_count").read_all<int64_t>());

  // Read patches shard by shard in row order, then hash them in patch_id order.
  std::map<int, std::vector<std::pair<uint64_t, size_t>>> by_shard;  // row, position in index
  for (size_t i = 0; i < ids.size(); ++i) by_shard[shard[i]].push_back({static_cast<uint64_t>(row[i]), i});
  const int patch_size = static_cast<int>(index.attr_int("patch_size"));
  const size_t patch_bytes = static_cast<size_t>(patch_size) * patch_size * 3;
  std::vector<std::string> patch_hash(ids.size());
  for (auto& [s, rows] : by_shard) {
    std::sort(rows.begin(), rows.end());
    ShardReader reader((fs::path(stage_dir) / "shards" / rank_file_name(s, ".h5")).string());
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
