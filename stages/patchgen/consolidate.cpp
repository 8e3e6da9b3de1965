#include "stages/patchgen/consolidate.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>

#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/stage/marker.h"
#include "common/store/index.h"
#include "common/core/version.h"
#include "common/store/store.h"

namespace tessera::patchgen {

namespace fs = std::filesystem;

namespace {

struct IndexRow {
  int64_t patch_id;
  int32_t slide;
  int64_t x, y;
  float tissue;
  int32_t shard;
  int64_t row;
};

void write_index(const std::string& path, const std::vector<IndexRow>& rows,
                 const Manifest& manifest, const std::vector<SlidePlan>& plans,
                 const std::map<int, std::string>& failures, const Config& config,
                 int world_size, const std::string& fingerprint) {
  const std::string tmp = path + ".tmp";
  {
    h5::File file = h5::File::open(tmp, h5::Mode::kCreateTruncate);
    const size_t n = rows.size();
    std::vector<int64_t> ids(n), coords(2 * n), row(n);
    std::vector<int32_t> slide(n), shard(n);
    std::vector<float> tissue(n);
    for (size_t i = 0; i < n; ++i) {
      ids[i] = rows[i].patch_id;
      slide[i] = rows[i].slide;
      coords[2 * i] = rows[i].x;
      coords[2 * i + 1] = rows[i].y;
      tissue[i] = rows[i].tissue;
      shard[i] = rows[i].shard;
      row[i] = rows[i].row;
    }
    h5::DatasetOptions opts;
    if (n > 0) opts.chunk = {std::min<hsize_t>(n, 65536)};
    h5::DatasetOptions opts2 = opts;
    if (n > 0) opts2.chunk.push_back(2);
    file.write_vector("patch_id", ids, opts);
    file.write_vector("slide", slide, opts);
    file.write_dataset("coords", h5::Type::kInt64, {n, 2}, coords.data(), opts2);
    file.write_vector("tissue", tissue, opts);
    file.write_vector("shard", shard, opts);
    file.write_vector("row", row, opts);
    file.set_attr("format_version", kIndexFormatVersion);
    file.set_attr("patch_size", static_cast<int64_t>(config.patch_size));
    file.set_attr("mpp", config.mpp);
    file.set_attr("encoding", config.layout.encoding);
    file.set_attr("num_shards", static_cast<int64_t>(world_size));
    file.set_attr("shard_pattern", std::string("shards/rank-%05d.h5"));
    file.set_attr("config_fingerprint", fingerprint);

    h5::Group slides = file.create_group("slides");
    std::vector<std::string> ids_s, paths, patients, sources, vendors, status, reasons;
    std::vector<int64_t> widths, heights, counts;
    std::vector<int32_t> levels, read_sizes;
    std::vector<double> mpp_x, mpp_y, downsample;
    std::vector<int64_t> per_slide(plans.size(), 0);
    for (const auto& r : rows) ++per_slide[r.slide];
    for (const auto& s : manifest.slides) {
      const SlidePlan& p = plans[s.index];
      auto failure = failures.find(s.index);
      bool ok = p.ok && failure == failures.end();
      ids_s.push_back(s.slide_id);
      paths.push_back(s.path);
      patients.push_back(s.patient_id);
      sources.push_back(p.mpp_source);
      vendors.push_back(p.vendor);
      status.push_back(ok ? "ok" : "failed");
      reasons.push_back(!p.ok ? p.reason : failure != failures.end() ? failure->second : "");
      widths.push_back(p.width);
      heights.push_back(p.height);
      counts.push_back(per_slide[s.index]);
      levels.push_back(p.ok ? p.level.level : -1);
      read_sizes.push_back(p.ok ? p.level.read_size : 0);
      mpp_x.push_back(p.mpp_x);
      mpp_y.push_back(p.mpp_y);
      downsample.push_back(p.ok ? p.level.footprint / config.patch_size : 0.0);
    }
    slides.write_strings("slide_id", ids_s);
    slides.write_strings("path", paths);
    slides.write_strings("patient_id", patients);
    slides.write_vector("width", widths);
    slides.write_vector("height", heights);
    slides.write_vector("mpp_x", mpp_x);
    slides.write_vector("mpp_y", mpp_y);
    slides.write_strings("mpp_source", sources);
    slides.write_strings("vendor", vendors);
    slides.write_vector("level", levels);
    slides.write_vector("read_size", read_sizes);
    slides.write_vector("downsample", downsample);
    slides.write_vector("patch_count", counts);
    slides.write_strings("status", status);
    slides.write_strings("reason", reasons);
    h5::Group meta = slides.create_group("metadata");
    for (size_t c = 0; c < manifest.metadata_columns.size(); ++c) {
      std::vector<std::string> values;
      for (const auto& s : manifest.slides) values.push_back(s.metadata[c]);
      meta.write_strings(manifest.metadata_columns[c], values);
    }
    slides.write_strings("metadata_columns", manifest.metadata_columns);
    file.close();
  }
  commit_file(tmp, path);
}

}  // namespace

nlohmann::json consolidate(const Manifest& manifest, const std::vector<SlidePlan>& plans,
                           const Config& config, int world_size, const std::string& stage_dir,
                           const std::string& fingerprint, const std::string& start_time,
                           double wait_s) {
  const auto t0 = std::chrono::steady_clock::now();
  std::map<int, std::string> failures;  // slides that failed while extracting, any rank
  std::vector<IndexRow> rows;
  nlohmann::json totals = {{"read_s", 0.0},  {"resize_s", 0.0}, {"encode_s", 0.0},
                           {"write_s", 0.0}, {"hash_s", 0.0},   {"total_s", 0.0}};
  uint64_t bytes = 0;
  for (int r = 0; r < world_size; ++r) {
    const std::string marker_path =
        (fs::path(stage_dir) / "markers" / rank_file_name(r, ".json")).string();
    // Each shard's hash was computed by its rank in this job, or verified by it when resuming;
    // rank 0 checks marker, fingerprint and size without reading every shard a second time.
    MarkerCheck check = check_marker(marker_path, stage_dir, fingerprint, world_size,
                                     /*verify_hash=*/false);
    if (!check.valid) fail<IoError>("rank {} output is not complete: {}", r, check.reason);
    const auto& m = check.marker;
    for (const auto& f : m["stats"]["failed_slides"]) {
      failures.emplace(f["slide"].get<int>(), f["reason"].get<std::string>());
    }
    for (auto& [key, value] : totals.items()) value = value.get<double>() + m["stats"][key].get<double>();
    bytes += m["file_bytes"].get<uint64_t>();
    ShardReader shard((fs::path(stage_dir) / m["file"].get<std::string>()).string());
    ShardColumns c = shard.read_columns();
    if (static_cast<int64_t>(c.patch_id.size()) != m["rows"].get<int64_t>()) {
      fail<IoError>("shard '{}' holds {} patches, its marker records {}", shard.path(),
                    c.patch_id.size(), m["rows"].get<int64_t>());
    }
    for (size_t i = 0; i < c.patch_id.size(); ++i) {
      rows.push_back({c.patch_id[i], c.slide[i], c.coords[2 * i], c.coords[2 * i + 1], c.tissue[i],
                      r, static_cast<int64_t>(i)});
    }
  }
  rows.erase(std::remove_if(rows.begin(), rows.end(),
                            [&](const IndexRow& row) { return failures.count(row.slide) > 0; }),
             rows.end());
  std::sort(rows.begin(), rows.end(),
            [](const IndexRow& a, const IndexRow& b) { return a.patch_id < b.patch_id; });
  // The shards together must hold exactly the planned patches of every successful slide.
  int64_t expected = 0;
  for (const auto& p : plans) {
    if (p.ok && !failures.count(p.index)) expected += static_cast<int64_t>(p.patches.size());
  }
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].patch_id == rows[i - 1].patch_id) {
      fail<IoError>("patch id {} appears twice (shards {} and {})", rows[i].patch_id,
                    rows[i - 1].shard, rows[i].shard);
    }
  }
  if (static_cast<int64_t>(rows.size()) != expected) {
    fail<IoError>("the shards hold {} patches of successful slides, the plan has {}", rows.size(),
                  expected);
  }
  write_index((fs::path(stage_dir) / "index.h5").string(), rows, manifest, plans, failures,
              config, world_size, fingerprint);

  int slides_failed = 0;
  nlohmann::json failed = nlohmann::json::array();
  for (const auto& s : manifest.slides) {
    const SlidePlan& p = plans[s.index];
    auto f = failures.find(s.index);
    if (!p.ok || f != failures.end()) {
      ++slides_failed;
      failed.push_back({{"slide_id", s.slide_id}, {"reason", !p.ok ? p.reason : f->second}});
    }
  }
  const int exit_code = slides_failed > 0 ? 3 : 0;
  double consolidate_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json summary = summary_base("patchgen", world_size, fingerprint, start_time);
  summary.update({{"status", slides_failed > 0 ? "completed_with_failures" : "completed"},
                  {"exit_code", exit_code},
                  {"slides", manifest.slides.size()},
                  {"slides_ok", static_cast<int>(manifest.slides.size()) - slides_failed},
                  {"slides_failed", slides_failed},
                  {"failed", failed},
                  {"patches", rows.size()},
                  {"shard_bytes", bytes},
                  {"seconds_summed_over_ranks", totals},
                  {"wait_s_rank0", wait_s},
                  {"consolidate_s", consolidate_s}});
  atomic_write_file((fs::path(stage_dir) / "_SUCCESS").string(), summary.dump(2) + "\n");
  return summary;
}

}  // namespace tessera::patchgen
