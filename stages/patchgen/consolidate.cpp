#include "stages/patchgen/consolidate.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <queue>

#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/store/files.h"
#include "common/store/index_writer.h"
#include "common/store/store.h"

namespace tessera::patchgen {

namespace fs = std::filesystem;

namespace {

// One shard's columns, read a block at a time.
class ShardCursor {
 public:
  ShardCursor(const std::string& path, int shard)
      : reader_(path), shard_(shard), rows_(reader_.rows()) {
    fill();
  }
  bool done() const { return pos_ == ids.size() && next_ == rows_; }
  int64_t id() const { return ids[pos_]; }
  int shard() const { return shard_; }
  int64_t rows() const { return rows_; }
  int64_t row() const { return base_ + static_cast<int64_t>(pos_); }
  void advance() {
    if (++pos_ == ids.size()) fill();
  }
  size_t pos() const { return pos_; }

  std::vector<int64_t> ids, coords;
  std::vector<int32_t> slide;
  std::vector<float> tissue;

 private:
  void fill() {
    base_ = next_;
    pos_ = 0;
    const int64_t n = std::min<int64_t>(kMergeBlockRows, rows_ - next_);
    ShardColumns c = reader_.read_columns(next_, n);
    ids = std::move(c.patch_id);
    slide = std::move(c.slide);
    coords = std::move(c.coords);
    tissue = std::move(c.tissue);
    next_ += n;
  }
  ShardReader reader_;
  int shard_;
  int64_t rows_;
  int64_t base_ = 0, next_ = 0;
  size_t pos_ = 0;
};

struct MergeResult {
  int64_t rows = 0;
  std::vector<int64_t> per_slide;  // rows per manifest index
};

// The k-way merge: every shard is sorted by patch_id, so the smallest head is the next row.
MergeResult merge_shards(IndexWriter& index, const std::string& stage_dir,
                         const std::vector<nlohmann::json>& markers,
                         const std::map<int, std::string>& failures, size_t slides) {
  std::vector<std::unique_ptr<ShardCursor>> cursors;
  for (size_t r = 0; r < markers.size(); ++r) {
    const std::string file = markers[r].at("outputs").at(0).at("file").get<std::string>();
    cursors.push_back(
        std::make_unique<ShardCursor>((fs::path(stage_dir) / file).string(), static_cast<int>(r)));
    if (static_cast<int64_t>(cursors.back()->rows()) != markers[r].at("rows").get<int64_t>()) {
      fail<IoError>("shard '{}' holds {} patches, its marker records {}", file,
                    cursors.back()->rows(), markers[r].at("rows").get<int64_t>());
    }
  }
  using Head = std::pair<int64_t, int>;  // patch id, cursor
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heap;
  for (size_t r = 0; r < cursors.size(); ++r) {
    if (!cursors[r]->done()) heap.push({cursors[r]->id(), static_cast<int>(r)});
  }
  MergeResult result;
  result.per_slide.assign(slides, 0);
  int64_t last_id = -1;
  int last_shard = -1;
  while (!heap.empty()) {
    const auto [id, r] = heap.top();
    heap.pop();
    ShardCursor& c = *cursors[r];
    if (id == last_id) {
      fail<IoError>("patch id {} appears twice (shards {} and {})", id, last_shard, r);
    }
    if (id < last_id) fail<IoError>("shard {} is not sorted by patch id at row {}", r, c.row());
    last_id = id;
    last_shard = r;
    const int slide = c.slide[c.pos()];
    if (!failures.count(slide)) {
      const size_t p = c.pos();
      index.add(c.ids[p], c.slide[p], c.coords[2 * p], c.coords[2 * p + 1], c.tissue[p],
                c.shard(), c.row());
      ++result.per_slide.at(static_cast<size_t>(slide));
    }
    c.advance();
    if (!c.done()) heap.push({c.id(), r});
  }
  result.rows = index.rows();
  return result;
}

// The slide table of index.h5: every slide of the manifest, with the plan of those of this part.
SlideTable slide_table(const Manifest& manifest, const PartPlan& part,
                       const std::vector<SlidePlan>& summaries,
                       const std::map<int, std::string>& failures,
                       const std::vector<int64_t>& per_slide, const Config& config) {
  std::vector<int> position(manifest.slides.size(), -1);
  for (size_t k = 0; k < part.slides.size(); ++k) position[part.slides[k]] = static_cast<int>(k);
  SlideTable t;
  for (const auto& s : manifest.slides) {
    t.slide_id.push_back(s.slide_id);
    t.path.push_back(s.path);
    t.path_as_written.push_back(s.path_as_written);
    t.patient_id.push_back(s.patient_id);
    t.patch_count.push_back(per_slide[s.index]);
    const int k = position[s.index];
    const SlidePlan empty;
    const SlidePlan& p = k >= 0 ? summaries[k] : empty;
    auto failure = failures.find(s.index);
    if (k < 0) {
      t.status.push_back(kOtherPartStatus);
      t.reason.push_back("");
    } else if (!p.ok || failure != failures.end()) {
      t.status.push_back("failed");
      t.reason.push_back(!p.ok ? p.reason : failure->second);
    } else {
      t.status.push_back("ok");
      t.reason.push_back("");
    }
    t.mpp_source.push_back(p.mpp_source);
    t.vendor.push_back(p.vendor);
    t.width.push_back(p.width);
    t.height.push_back(p.height);
    t.level.push_back(p.ok ? p.level.level : -1);
    t.read_size.push_back(p.ok ? p.level.read_size : 0);
    t.mpp_x.push_back(p.mpp_x);
    t.mpp_y.push_back(p.mpp_y);
    t.downsample.push_back(p.ok ? p.level.footprint / config.patch_size : 0.0);
  }
  t.metadata_columns = manifest.metadata_columns;
  for (size_t c = 0; c < manifest.metadata_columns.size(); ++c) {
    std::vector<std::string>& values = t.metadata.emplace_back();
    for (const auto& s : manifest.slides) values.push_back(s.metadata[c]);
  }
  return t;
}

}  // namespace

nlohmann::json consolidate(const Manifest& manifest, const PartPlan& part, const Config& config,
                           const std::string& stage_dir, const std::string& fingerprint,
                           const std::vector<nlohmann::json>& markers) {
  const auto t0 = std::chrono::steady_clock::now();
  std::map<int, std::string> failures;  // slides that failed while extracting, any rank
  nlohmann::json totals = {{"read_s", 0.0},        {"resize_s", 0.0},      {"encode_s", 0.0},
                           {"write_s", 0.0},       {"seal_s", 0.0},        {"total_s", 0.0},
                           {"tiles_decoded", 0.0}, {"tile_hits", 0.0},     {"tile_decode_s", 0.0},
                           {"openslide_fallbacks", 0.0}};
  uint64_t bytes = 0;
  for (const auto& m : markers) {
    for (const auto& f : m.at("stats").at("failed_slides")) {
      failures.emplace(f.at("slide").get<int>(), f.at("reason").get<std::string>());
    }
    for (auto& [key, value] : totals.items()) {
      const nlohmann::json& stats = m.at("stats");
      // Only the direct reader's counters may be absent: markers written before it lack them.
      const bool reader_counter = key.rfind("tile", 0) == 0 || key == "openslide_fallbacks";
      const double v = key == "seal_s"     ? m.at("seal_s").get<double>()
                       : reader_counter ? stats.value(key, 0.0)
                                        : stats.at(key).get<double>();
      value = value.get<double>() + v;
    }
    for (const auto& o : m.at("outputs")) bytes += o.at("bytes").get<uint64_t>();
  }
  std::vector<SlidePlan> summaries;
  for (int s : part.slides) {
    const std::string path = plan_path(stage_dir, manifest.slides[s].slide_id);
    auto p = read_plan(path, fingerprint, /*with_patches=*/false);
    if (!p) fail<IoError>("the plan '{}' is missing or from another configuration", path);
    summaries.push_back(std::move(*p));
  }

  const std::string path = (fs::path(stage_dir) / kIndexFile).string();
  const std::string tmp = path + ".tmp";
  MergeResult merged;
  {
    IndexWriter index(tmp);
    merged = merge_shards(index, stage_dir, markers, failures, manifest.slides.size());
    IndexAttributes attributes;
    attributes.patch_size = config.patch_size;
    attributes.mpp = config.mpp;
    attributes.encoding = config.layout.encoding;
    attributes.num_shards = static_cast<int>(markers.size());
    attributes.config_fingerprint = fingerprint;
    attributes.part = config.stage.part;
    attributes.parts = config.stage.parts;
    attributes.overlap = patch_overlap(config.patch_size, config.stride);
    index.finish(slide_table(manifest, part, summaries, failures, merged.per_slide, config),
                 attributes);
  }
  // The shards together must hold exactly the planned patches of every successful slide.
  int64_t expected = 0;
  for (size_t k = 0; k < part.slides.size(); ++k) {
    if (!failures.count(part.slides[k])) expected += part.counts[k];
  }
  if (merged.rows != expected) {
    fail<IoError>("the shards hold {} patches of successful slides, the plan has {}", merged.rows,
                  expected);
  }
  commit_file(tmp, path);

  int slides_failed = 0;
  nlohmann::json failed = nlohmann::json::array();
  for (size_t k = 0; k < part.slides.size(); ++k) {
    const int s = part.slides[k];
    auto f = failures.find(s);
    if (!summaries[k].ok || f != failures.end()) {
      ++slides_failed;
      failed.push_back({{"slide_id", manifest.slides[s].slide_id},
                        {"reason", !summaries[k].ok ? summaries[k].reason : f->second}});
    }
  }
  const int slides = static_cast<int>(part.slides.size());
  return {{"status", slides_failed > 0 ? "completed_with_failures" : "completed"},
          {"exit_code", slides_failed > 0 ? kExitSlidesFailed : kExitOk},
          {"slides", slides},
          {"slides_ok", slides - slides_failed},
          {"slides_failed", slides_failed},
          {"failed", failed},
          {"patches", merged.rows},
          {"shard_bytes", bytes},
          {"seconds_summed_over_ranks", totals},
          {"consolidate_s",
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}};
}

}  // namespace tessera::patchgen
