#include "stages/embed/merge.h"

#include <algorithm>
#include <filesystem>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/store/embeddings.h"
#include "common/store/files.h"
#include "common/store/pt_tensor.h"
#include "common/store/slide_features.h"

namespace tessera::embed {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kBlockRows = 4096;  // rows per read and write of a feature file

// Where each rank's rows go in embeddings.h5: one mapping for the contiguous layout, a regular
// hyperslab of full blocks and one for a short last block for the (block-)cyclic ones.
std::vector<ShardRows> shard_rows_of(const Partition& partition) {
  std::vector<ShardRows> mappings;
  for (int r = 0; r < partition.size(); ++r) {
    const int64_t count = partition.count(r);
    if (count == 0) continue;
    if (partition.spec().kind == PartitionKind::kContiguous) {
      mappings.push_back({r, partition.global_index(r, 0), 1, count, 1, 0});
      continue;
    }
    const int64_t b = partition.spec().block;
    const int64_t full = count / b;
    const int64_t tail = count % b;
    if (full > 0) mappings.push_back({r, r * b, b * partition.size(), b, full, 0});
    if (tail > 0) {
      mappings.push_back({r, partition.global_index(r, full * b), 1, tail, 1, full * b});
    }
  }
  return mappings;
}

}  // namespace

void write_embeddings_file(const IndexInfo& info, const Partition& partition, int output_dim,
                           const Config& config, const nlohmann::json& model_fingerprint,
                           const std::string& stage_dir, const std::string& fingerprint) {
  std::vector<int64_t> shard_rows;
  for (int r = 0; r < partition.size(); ++r) shard_rows.push_back(partition.count(r));
  EmbeddingsAttributes a;
  a.output_dim = output_dim;
  a.store_dtype = config.store_dtype;
  a.model_fingerprint = model_fingerprint.dump();
  a.config_fingerprint = fingerprint;
  a.patchgen_fingerprint = info.config_fingerprint;
  a.patch_size = info.patch_size;
  a.mpp = info.mpp;
  a.partition = partition.spec().to_string();
  a.num_shards = partition.size();
  tessera::write_embeddings_file(stage_dir, info.rows, shard_rows, shard_rows_of(partition), a);
}

namespace {

std::string make_dir(const std::string& stage_dir, const std::string& name) {
  const std::string dir = (fs::path(stage_dir) / name).string();
  make_directories(dir);
  return dir;
}

}  // namespace

int64_t write_slide_features(const IndexInfo& info, const IndexReader& index, int rank,
                             int world_size, const nlohmann::json& model_fingerprint,
                             const SlideFilesSpec& spec, const std::string& stage_dir,
                             std::vector<std::string>* written_files) {
  make_directories(slide_features_dir(stage_dir));
  std::string pt_dir, clam_h5_dir, clam_patches_dir, trident_dir, trident_patches_dir;
  if (spec.peers.clam) {
    pt_dir = make_dir(stage_dir, "clam/pt_files");
    clam_h5_dir = make_dir(stage_dir, "clam/h5_files");
    clam_patches_dir = make_dir(stage_dir, "clam/patches");
  }
  if (spec.peers.trident) {
    trident_dir = make_dir(stage_dir, "features_" + spec.encoder);
    trident_patches_dir = make_dir(stage_dir, "patches");
  }
  const EmbeddingsReader merged(embeddings_path(stage_dir));
  const int d = merged.dim();
  const std::string model_json = model_fingerprint.dump();
  std::vector<int64_t> ids, xy;
  std::vector<float> values, slide_values;
  int64_t position = -1, written = 0;
  for (size_t s = 0; s < info.slides.size(); ++s) {
    const SlideOutcome outcome = slide_outcome(info.slides, s);
    if (outcome != SlideOutcome::kPatches && outcome != SlideOutcome::kEmpty) continue;
    if (++position % world_size != rank) continue;
    const int64_t count = info.slides.patch_count[s];
    const std::string& slide_id = info.slides.slide_id[s];
    const SlideGeometry g = slide_geometry(info, s, spec.overlap);
    const std::string path = slide_features_path(stage_dir, slide_id);
    xy.clear();
    slide_values.clear();
    {
      SlideFeaturesHeader header;
      header.slide_id = slide_id;
      header.patch_size = info.patch_size;
      header.patch_level = g.patch_level;
      header.read_size = g.read_size;
      header.mpp = info.mpp;
      header.downsample = g.downsample;
      header.model_fingerprint = model_json;
      header.encoder = spec.encoder;
      header.coords = trident_coords(g);
      SlideFeaturesWriter features(path, d, header);
      for (int64_t first = info.slide_offset[s]; first < info.slide_offset[s] + count;
           first += kBlockRows) {
        const int64_t len = std::min(kBlockRows, info.slide_offset[s] + count - first);
        IndexRows rows = index.read_range(first, len);
        ids.resize(static_cast<size_t>(len));
        values.resize(static_cast<size_t>(len) * d);
        merged.read_ids(ids.data(), first, len);
        for (int64_t k = 0; k < len; ++k) {
          if (ids[k] != rows.patch_id[k] || rows.slide[k] != static_cast<int32_t>(s)) {
            fail<IoError>("embed shards disagree with the patch index at row {}: patch id {} "
                          "where the index has {}",
                          first + k, ids[k], rows.patch_id[k]);
          }
        }
        merged.read_values(values.data(), first, len);
        features.append(values.data(), rows.coords.data(), len);
        xy.insert(xy.end(), rows.coords.begin(), rows.coords.end());
        if (spec.peers.clam) slide_values.insert(slide_values.end(), values.begin(), values.end());
      }
      features.commit();
    }
    std::vector<std::string> files = {path};
    if (spec.peers.clam) {
      files.push_back((fs::path(pt_dir) / (slide_id + ".pt")).string());
      write_pt_tensor(files.back(), slide_values, count, static_cast<int64_t>(d));
      files.push_back((fs::path(clam_h5_dir) / (slide_id + ".h5")).string());
      link_or_copy(path, files.back());
      files.push_back((fs::path(clam_patches_dir) / (slide_id + ".h5")).string());
      write_clam_patch_file(files.back(), xy, g);
    }
    if (spec.peers.trident) {
      files.push_back((fs::path(trident_dir) / (slide_id + ".h5")).string());
      link_or_copy(path, files.back());
      files.push_back((fs::path(trident_patches_dir) / (slide_id + "_patches.h5")).string());
      write_trident_patch_file(files.back(), xy, g);
    }
    if (written_files) {
      for (const auto& file : files) {
        written_files->push_back(fs::path(file).lexically_relative(stage_dir).string());
      }
    }
    ++written;
  }
  return written;
}

void write_status_table(const IndexInfo& info, const std::string& stage_dir) {
  atomic_write_file((fs::path(stage_dir) / kSlideStatusFile).string(),
                    status_table_csv(info.slides));
}

}  // namespace tessera::embed
