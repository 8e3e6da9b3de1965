#include "stages/embed/merge.h"

#include <algorithm>
#include <filesystem>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/store/embeddings.h"
#include "common/store/files.h"
#include "common/store/pt_tensor.h"

namespace tessera::embed {

namespace fs = std::filesystem;
namespace names = embedding_names;

namespace {

constexpr int64_t kBlockRows = 4096;  // rows per read and write of a feature file

std::vector<h5::VirtualSource> sources_of(const Partition& partition, const std::string& dataset) {
  std::vector<h5::VirtualSource> sources;
  for (int r = 0; r < partition.size(); ++r) {
    const std::string file = "shards/" + rank_file_name(r, ".h5");
    const int64_t count = partition.count(r);
    if (count == 0) continue;
    if (partition.spec().kind == PartitionKind::kContiguous) {
      sources.push_back({file, dataset, static_cast<hsize_t>(partition.global_index(r, 0)), 1,
                         static_cast<hsize_t>(count), 1, 0});
      continue;
    }
    const int64_t b = partition.spec().block;
    const int64_t full = count / b;
    const int64_t tail = count % b;
    if (full > 0) {
      sources.push_back({file, dataset, static_cast<hsize_t>(r * b),
                         static_cast<hsize_t>(b * partition.size()), static_cast<hsize_t>(b),
                         static_cast<hsize_t>(full), 0});
    }
    if (tail > 0) {
      sources.push_back({file, dataset, static_cast<hsize_t>(partition.global_index(r, full * b)),
                         1, static_cast<hsize_t>(tail), 1, static_cast<hsize_t>(full * b)});
    }
  }
  return sources;
}

}  // namespace

void write_embeddings_file(const IndexInfo& info, const Partition& partition, int output_dim,
                           const Config& config, const nlohmann::json& model_fingerprint,
                           const std::string& stage_dir, const std::string& fingerprint) {
  const auto n = static_cast<hsize_t>(info.rows);
  const auto d = static_cast<hsize_t>(output_dim);
  for (int r = 0; r < partition.size(); ++r) {
    const std::string path = (fs::path(stage_dir) / "shards" / rank_file_name(r, ".h5")).string();
    h5::File shard = h5::File::open(path, h5::Mode::kRead);
    const auto dims = shard.open_dataset(names::kEmbeddings).dims();
    if (static_cast<int64_t>(dims[0]) != partition.count(r) || dims[1] != d) {
      fail<IoError>("embed shard '{}' holds {} rows of dimension {}, the partition gives its rank "
                    "{} of {}",
                    path, dims[0], dims[1], partition.count(r), d);
    }
  }
  const std::string path = (fs::path(stage_dir) / kEmbeddingsFile).string();
  {
    h5::File f = h5::File::open(path + ".tmp", h5::Mode::kCreateTruncate);
    const h5::Type values = config.store_dtype == "fp16" ? h5::Type::kFloat16 : h5::Type::kFloat32;
    f.create_virtual(names::kPatchId, h5::Type::kInt64, {n}, sources_of(partition, names::kPatchId));
    f.create_virtual(names::kSlide, h5::Type::kInt32, {n}, sources_of(partition, names::kSlide));
    f.create_virtual(names::kCoords, h5::Type::kInt64, {n, 2}, sources_of(partition, names::kCoords));
    f.create_virtual(names::kEmbeddings, values, {n, d}, sources_of(partition, names::kEmbeddings));
    f.set_attr("format_version", kEmbedFormatVersion);
    f.set_attr("output_dim", static_cast<int64_t>(output_dim));
    f.set_attr("store_dtype", config.store_dtype);
    f.set_attr("model_fingerprint", model_fingerprint.dump());
    f.set_attr("config_fingerprint", fingerprint);
    f.set_attr("patchgen_fingerprint", info.config_fingerprint);
    f.set_attr("patch_size", static_cast<int64_t>(info.patch_size));
    f.set_attr("mpp", info.mpp);
    f.set_attr("partition", partition.spec().to_string());
    f.set_attr("num_shards", static_cast<int64_t>(partition.size()));
    f.close();
  }
  commit_file(path + ".tmp", path);
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
  const std::string features_dir = make_dir(stage_dir, "features");
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
  h5::File merged =
      h5::File::open((fs::path(stage_dir) / kEmbeddingsFile).string(), h5::Mode::kRead);
  h5::Dataset m_ids = merged.open_dataset(names::kPatchId);
  h5::Dataset m_emb = merged.open_dataset(names::kEmbeddings);
  const hsize_t d = m_emb.dims()[1];
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
    const std::string path = (fs::path(features_dir) / (slide_id + ".h5")).string();
    xy.clear();
    slide_values.clear();
    {
      h5::File f = h5::File::open(path + ".tmp", h5::Mode::kCreateTruncate);
      h5::DatasetOptions fo;
      fo.chunk = {256, d};
      h5::Dataset features = f.create_appendable(names::kFeatures, h5::Type::kFloat32, {d}, fo);
      h5::DatasetOptions co;
      co.chunk = {256, 2};
      h5::Dataset coords = f.create_appendable(names::kCoords, h5::Type::kInt64, {2}, co);
      f.set_attr("slide_id", slide_id);
      f.set_attr("patch_size", static_cast<int64_t>(info.patch_size));
      f.set_attr("patch_level", g.patch_level);
      f.set_attr("read_size", g.read_size);
      f.set_attr("mpp", info.mpp);
      f.set_attr("downsample", g.downsample);
      f.set_attr("model_fingerprint", model_json);
      features.set_attr("encoder", spec.encoder);
      features.set_attr("name", slide_id);
      set_trident_coords_attrs(coords, g);
      for (int64_t first = info.slide_offset[s]; first < info.slide_offset[s] + count;
           first += kBlockRows) {
        const int64_t len = std::min(kBlockRows, info.slide_offset[s] + count - first);
        IndexRows rows = index.read_range(first, len);
        ids.resize(static_cast<size_t>(len));
        values.resize(static_cast<size_t>(len) * d);
        m_ids.read_rows(ids.data(), static_cast<hsize_t>(first), static_cast<hsize_t>(len));
        for (int64_t k = 0; k < len; ++k) {
          if (ids[k] != rows.patch_id[k] || rows.slide[k] != static_cast<int32_t>(s)) {
            fail<IoError>("embed shards disagree with the patch index at row {}: patch id {} "
                          "where the index has {}",
                          first + k, ids[k], rows.patch_id[k]);
          }
        }
        m_emb.read_rows_as_floats(values.data(), static_cast<hsize_t>(first),
                                  static_cast<hsize_t>(len));
        features.append(values.data(), static_cast<hsize_t>(len));
        coords.append(rows.coords.data(), static_cast<hsize_t>(len));
        xy.insert(xy.end(), rows.coords.begin(), rows.coords.end());
        if (spec.peers.clam) slide_values.insert(slide_values.end(), values.begin(), values.end());
      }
      features.close();
      coords.close();
      f.close();
    }
    commit_file(path + ".tmp", path);
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
