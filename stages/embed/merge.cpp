#include "stages/embed/merge.h"

#include <filesystem>
#include <optional>

#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/stage/marker.h"
#include "common/core/version.h"

namespace tessera::embed {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kBlockRows = 4096;  // index rows merged per step

// The per-slide feature file being written; files are created under a temporary name and renamed
// when the slide is complete.
struct SlideFeatures {
  int slide = -1;
  std::string path;
  std::optional<h5::File> file;
  std::optional<h5::Dataset> features, coords;
};

void finish_slide(SlideFeatures& s) {
  if (s.slide < 0) return;
  s.features->close();
  s.coords->close();
  s.file->close();
  commit_file(s.path + ".tmp", s.path);
  s = SlideFeatures{};
}

}  // namespace

nlohmann::json merge(const PatchIndex& index, const Config& config,
                     const nlohmann::json& model_fingerprint, int output_dim, int world_size,
                     const std::string& stage_dir, const std::string& fingerprint,
                     const std::string& start_time, double wait_s) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n = static_cast<int64_t>(index.size());
  const hsize_t d = static_cast<hsize_t>(output_dim);
  std::vector<h5::File> shard_files;
  std::vector<h5::Dataset> shard_ids, shard_emb;
  nlohmann::json totals = {{"read_s", 0.0},  {"prepare_s", 0.0}, {"forward_s", 0.0},
                           {"write_s", 0.0}, {"wait_s", 0.0},    {"total_s", 0.0}};
  for (int r = 0; r < world_size; ++r) {
    const std::string marker = (fs::path(stage_dir) / "markers" / rank_file_name(r, ".json")).string();
    MarkerCheck check = check_marker(marker, stage_dir, fingerprint, world_size,
                                     /*verify_hash=*/false);  // hashed or verified by its rank
    if (!check.valid) fail<IoError>("embed rank {} output is not complete: {}", r, check.reason);
    for (auto& [key, value] : totals.items()) {
      value = value.get<double>() + check.marker["stats"][key].get<double>();
    }
    shard_files.push_back(h5::File::open(
        (fs::path(stage_dir) / check.marker["file"].get<std::string>()).string(), h5::Mode::kRead));
    shard_ids.push_back(shard_files.back().open_dataset("patch_id"));
    shard_emb.push_back(shard_files.back().open_dataset("embeddings"));
    const int64_t expected = n > r ? (n - r + world_size - 1) / world_size : 0;
    if (static_cast<int64_t>(shard_ids.back().dims()[0]) != expected ||
        static_cast<int64_t>(shard_emb.back().dims()[0]) != expected ||
        shard_emb.back().dims()[1] != d) {
      fail<IoError>("embed shard of rank {} holds {} rows of dimension {}, expected {} of {}", r,
                    shard_ids.back().dims()[0], shard_emb.back().dims()[1], expected, d);
    }
  }

  const std::string merged_path = (fs::path(stage_dir) / "embeddings.h5").string();
  const std::string features_dir = (fs::path(stage_dir) / "features").string();
  fs::create_directories(features_dir);
  h5::File merged = h5::File::open(merged_path + ".tmp", h5::Mode::kCreateTruncate);
  h5::DatasetOptions opts;
  opts.chunk = {4096};
  h5::DatasetOptions eopts;
  eopts.chunk = {256, d};
  h5::DatasetOptions copts;
  copts.chunk = {4096, 2};
  const h5::Type store_type = config.store_dtype == "fp16" ? h5::Type::kFloat16 : h5::Type::kFloat32;
  h5::Dataset m_ids = merged.create_appendable("patch_id", h5::Type::kInt64, {}, opts);
  h5::Dataset m_emb = merged.create_appendable("embeddings", store_type, {d}, eopts);
  h5::Dataset m_slide = merged.create_appendable("slide", h5::Type::kInt32, {}, opts);
  h5::Dataset m_coords = merged.create_appendable("coords", h5::Type::kInt64, {2}, copts);
  const std::string model_json = model_fingerprint.dump();
  merged.set_attr("format_version", kEmbedFormatVersion);
  merged.set_attr("output_dim", static_cast<int64_t>(output_dim));
  merged.set_attr("store_dtype", config.store_dtype);
  merged.set_attr("model_fingerprint", model_json);
  merged.set_attr("config_fingerprint", fingerprint);
  merged.set_attr("patchgen_fingerprint", index.config_fingerprint);
  merged.set_attr("patch_size", static_cast<int64_t>(index.patch_size));
  merged.set_attr("mpp", index.mpp);

  SlideFeatures current;
  std::vector<int64_t> block_ids, rank_ids;
  std::vector<float> block_emb, rank_emb;
  int64_t slides_written = 0;
  for (int64_t start = 0; start < n; start += kBlockRows) {
    const int64_t stop = std::min(n, start + kBlockRows);
    const int64_t len = stop - start;
    block_ids.assign(static_cast<size_t>(len), 0);
    block_emb.assign(static_cast<size_t>(len) * d, 0.f);
    for (int r = 0; r < world_size; ++r) {
      // Index rows i in [start, stop) with i % R == r sit at shard rows i / R, contiguous.
      const int64_t first = start + ((r - start % world_size) + world_size) % world_size;
      if (first >= stop) continue;
      const int64_t count = (stop - first + world_size - 1) / world_size;
      rank_ids.resize(static_cast<size_t>(count));
      rank_emb.resize(static_cast<size_t>(count) * d);
      shard_ids[r].read_rows(rank_ids.data(), static_cast<hsize_t>(first / world_size),
                             static_cast<hsize_t>(count));
      shard_emb[r].read_rows_as_floats(rank_emb.data(), static_cast<hsize_t>(first / world_size),
                                       static_cast<hsize_t>(count));
      for (int64_t k = 0; k < count; ++k) {
        const int64_t pos = first + k * world_size - start;
        block_ids[pos] = rank_ids[k];
        std::copy_n(rank_emb.data() + k * d, d, block_emb.data() + pos * d);
      }
    }
    for (int64_t k = 0; k < len; ++k) {
      if (block_ids[k] != index.patch_id[start + k]) {
        fail<IoError>("embed shards disagree with the patch index at row {}: patch id {} where "
                      "the index has {}",
                      start + k, block_ids[k], index.patch_id[start + k]);
      }
    }
    m_ids.append(block_ids.data(), static_cast<hsize_t>(len));
    m_emb.append_floats(block_emb.data(), static_cast<hsize_t>(len));
    m_slide.append(index.slide.data() + start, static_cast<hsize_t>(len));
    m_coords.append(index.coords.data() + 2 * start, static_cast<hsize_t>(len));

    // Per-slide files: a slide's rows are contiguous in patch_id order.
    int64_t k = 0;
    while (k < len) {
      const int s = index.slide[start + k];
      int64_t run = k;
      while (run < len && index.slide[start + run] == s) ++run;
      if (current.slide != s) {
        finish_slide(current);
        current.slide = s;
        current.path = (fs::path(features_dir) / (index.slides.slide_id[s] + ".h5")).string();
        current.file.emplace(h5::File::open(current.path + ".tmp", h5::Mode::kCreateTruncate));
        h5::DatasetOptions fo;
        fo.chunk = {256, d};
        current.features.emplace(current.file->create_appendable("features", h5::Type::kFloat32, {d}, fo));
        h5::DatasetOptions co;
        co.chunk = {256, 2};
        current.coords.emplace(current.file->create_appendable("coords", h5::Type::kInt64, {2}, co));
        h5::File& f = *current.file;
        f.set_attr("slide_id", index.slides.slide_id[s]);
        f.set_attr("patch_size", static_cast<int64_t>(index.patch_size));
        f.set_attr("patch_level", static_cast<int64_t>(index.slides.level[s]));
        f.set_attr("mpp", index.mpp);
        f.set_attr("downsample", index.slides.downsample[s]);
        f.set_attr("model_fingerprint", model_json);
        ++slides_written;
      }
      current.features->append(block_emb.data() + k * d, static_cast<hsize_t>(run - k));
      current.coords->append(index.coords.data() + 2 * (start + k), static_cast<hsize_t>(run - k));
      k = run;
    }
  }
  finish_slide(current);
  m_ids.close();
  m_emb.close();
  m_slide.close();
  m_coords.close();
  merged.close();
  commit_file(merged_path + ".tmp", merged_path);

  const double merge_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json summary = summary_base("embed", world_size, fingerprint, start_time);
  summary.update({{"tag", config.tag},
                  {"status", "completed"},
                  {"exit_code", 0},
                  {"patches", n},
                  {"slides", slides_written},
                  {"output_dim", output_dim},
                  {"store_dtype", config.store_dtype},
                  {"source", config.source},
                  {"model", model_fingerprint},
                  {"patchgen_fingerprint", index.config_fingerprint},
                  {"seconds_summed_over_ranks", totals},
                  {"wait_s_rank0", wait_s},
                  {"merge_s", merge_s}});
  atomic_write_file((fs::path(stage_dir) / "_SUCCESS").string(), summary.dump(2) + "\n");
  return summary;
}

}  // namespace tessera::embed
