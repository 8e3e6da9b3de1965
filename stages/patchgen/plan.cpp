#include "stages/patchgen/plan.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/store/files.h"
#include "stages/patchgen/qc.h"
#include "common/slide/slide.h"

namespace tessera::patchgen {

namespace {

// A plan file is patchgen's own (not read by other stages): its names live here.
constexpr const char* kPlanCoords = "coords";
constexpr const char* kPlanTissue = "tissue";

// Opening or reading a slide that fails is that slide's failure, whatever threw: tessera's errors
// name the file; another (std::bad_alloc for a level the slide claims) is named here.
std::string slide_failure(const SlideEntry& entry, const std::exception& e) {
  if (dynamic_cast<const Error*>(&e) != nullptr) return e.what();
  return fmt::format("slide '{}': {}", entry.path, e.what());
}

SlidePlan failed(SlidePlan plan, std::string reason) {
  plan.ok = false;
  plan.reason = std::move(reason);
  plan.patches.clear();
  return plan;
}

// The slide area-shrunk to ceil(width / seg_downsample) x ceil(height / seg_downsample) pixels,
// so that detect_tissue's kernels act at the requested scale whatever the pyramid offers. The
// level read (segmentation_level) is never coarser than that unless the pyramid lacks a level
// within kMaxSegReadRatio of it, and then it is used as is: no upscaling. Memory: the level read
// is at most kMaxSegReadRatio times the thumbnail per side (64x its area); typical 2x or 4x
// pyramids read at most 4x per side. Worst case: a slide with no level coarser than the target
// (e.g. a single-level TIFF) is read whole at level 0, as before.
Image8 segmentation_thumbnail(const Slide& slide, double seg_downsample) {
  const int level = segmentation_level(slide.downsamples(), seg_downsample);
  Image8 full = slide.read_level(level);
  const auto target_side = [&](int64_t extent0, int level_extent) {
    const auto side = static_cast<int64_t>(std::ceil(static_cast<double>(extent0) / seg_downsample));
    return static_cast<int>(std::clamp<int64_t>(side, 1, level_extent));
  };
  const int tw = target_side(slide.width(), full.width);
  const int th = target_side(slide.height(), full.height);
  if (tw == full.width && th == full.height) return full;
  Image8 thumb{tw, th, 3, std::vector<uint8_t>(static_cast<size_t>(tw) * th * 3)};
  const cv::Mat src(full.height, full.width, CV_8UC3, full.pixels.data());
  cv::Mat dst(th, tw, CV_8UC3, thumb.pixels.data());
  cv::resize(src, dst, dst.size(), 0, 0, cv::INTER_AREA);
  return thumb;
}

}  // namespace

SlidePlan plan_slide(const SlideEntry& entry, const Config& config, const std::string& qc_dir) {
  SlidePlan plan;
  plan.index = entry.index;
  std::optional<Slide> slide;
  try {
    slide.emplace(Slide::open(entry.path, config.reader));  // same pixels with either reader
  } catch (const std::exception& e) {
    return failed(plan, slide_failure(entry, e));
  }
  plan.width = slide->width();
  plan.height = slide->height();
  plan.vendor = slide->vendor();
  std::optional<SlideMpp> mpp;
  if (entry.mpp > 0) {
    mpp = SlideMpp{entry.mpp, entry.mpp, "manifest"};
  } else {
    mpp = slide_mpp(*slide, config.default_mpp);
  }
  if (!mpp) {
    return failed(plan, fmt::format("slide '{}' has no resolution (no openslide.mpp-x/y, no TIFF "
                                    "resolution tags); set --default-mpp to use it anyway",
                                    entry.path));
  }
  plan.mpp_x = mpp->x;
  plan.mpp_y = mpp->y;
  plan.mpp_source = mpp->source;
  if (std::abs(mpp->x - mpp->y) > 0.01 * mpp->x) {
    spdlog::warn("slide '{}' has non-square pixels ({} x {} um); the grid uses mpp-x",
                 entry.slide_id, mpp->x, mpp->y);
  }
  plan.level = choose_level(slide->downsamples(), mpp->x, config.mpp, config.patch_size,
                            config.mpp_tolerance);
  if (mpp->x > kMaxUpsample * config.mpp) {
    // Typically a 72 or 96 dpi tag of a non-microscopy TIFF: enlarging single pixels into patches
    // would invent detail.
    return failed(plan, fmt::format("slide resolution {:.4g} um/px ({}) is more than {}x coarser "
                                    "than --mpp {}; refusing to upsample",
                                    mpp->x, mpp->source, kMaxUpsample, config.mpp));
  }

  Image8 thumbnail;
  double thumb_dx = 1, thumb_dy = 1;
  TissueMask mask;
  try {
    thumbnail = segmentation_thumbnail(*slide, config.tissue.seg_downsample);
    thumb_dx = static_cast<double>(plan.width) / thumbnail.width;
    thumb_dy = static_cast<double>(plan.height) / thumbnail.height;
  } catch (const std::exception& e) {
    return failed(plan, slide_failure(entry, e));
  }
  try {
    mask = entry.mask_path.empty()
               ? detect_tissue(thumbnail, thumb_dx, thumb_dy, mpp->x, config.tissue)
               : load_mask(entry.mask_path, plan.width, plan.height);
  } catch (const Error& e) {
    return failed(plan, e.what());
  }
  plan.tissue_pixels = mask.tissue_pixels();
  TissueIntegral integral(mask);
  plan.patches = make_grid(plan.width, plan.height, plan.level, config.patch_size, config.stride,
                           config.min_tissue, &integral);
  if (config.qc) {
    std::vector<std::array<int64_t, 4>> rects;
    rects.reserve(plan.patches.size());
    const auto side = static_cast<int64_t>(std::llround(plan.level.footprint));
    for (const auto& p : plan.patches) rects.push_back({p.x, p.y, side, side});
    // The QC image's scale is its own (kQcLongSide), whatever --seg-downsample is.
    const double qc_ds = std::max(1.0, static_cast<double>(std::max(plan.width, plan.height)) /
                                           kQcLongSide);
    Image8 qc_thumb;
    const auto qc_side = [&](int64_t extent) {
      return static_cast<int>(std::ceil(static_cast<double>(extent) / qc_ds));
    };
    try {
      qc_thumb = qc_side(plan.width) == thumbnail.width && qc_side(plan.height) == thumbnail.height
                     ? thumbnail
                     : segmentation_thumbnail(*slide, qc_ds);
    } catch (const std::exception& e) {
      spdlog::warn("slide '{}': QC thumbnail unreadable, using the detection one: {}",
                   entry.slide_id, e.what());
      qc_thumb = thumbnail;
    }
    const double tissue_mm2 = static_cast<double>(plan.tissue_pixels) * mask.downsample_x *
                              mask.downsample_y * mpp->x * mpp->y * 1e-6;
    const std::filesystem::path base = std::filesystem::path(qc_dir) / entry.slide_id;
    write_qc_png(base.string() + ".png", qc_thumb,
                 static_cast<double>(plan.width) / qc_thumb.width,
                 static_cast<double>(plan.height) / qc_thumb.height, mask, rects,
                 qc_legend(entry.slide_id, static_cast<int64_t>(plan.patches.size()), tissue_mm2));
    write_qc_geojson(base.string() + ".geojson", mask, rects);
  }
  if (plan.tissue_pixels == 0) return failed(plan, "no tissue detected");
  if (plan.patches.empty()) {
    return failed(plan, fmt::format("tissue found, but no patch reaches --min-tissue {}",
                                    config.min_tissue));
  }
  plan.ok = true;
  plan.patch_count = static_cast<int64_t>(plan.patches.size());
  return plan;
}

std::string plan_path(const std::string& stage_dir, const std::string& slide_id) {
  return (std::filesystem::path(stage_dir) / kPlansDir / (slide_id + ".h5")).string();
}

void write_plan(const std::string& path, const SlidePlan& plan, const SlideEntry& entry,
                const std::string& fingerprint) {
  const std::string tmp = path + ".tmp";
  {
    h5::File f = h5::File::open(tmp, h5::Mode::kCreateTruncate);
    f.set_attr("format_version", kPlanFormatVersion);
    f.set_attr("config_fingerprint", fingerprint);
    f.set_attr("slide_index", static_cast<int64_t>(plan.index));
    f.set_attr("slide_id", entry.slide_id);
    f.set_attr("ok", static_cast<int64_t>(plan.ok));
    f.set_attr("reason", plan.reason);
    f.set_attr("width", plan.width);
    f.set_attr("height", plan.height);
    f.set_attr("mpp_x", plan.mpp_x);
    f.set_attr("mpp_y", plan.mpp_y);
    f.set_attr("mpp_source", plan.mpp_source);
    f.set_attr("vendor", plan.vendor);
    f.set_attr("level", static_cast<int64_t>(plan.level.level));
    f.set_attr("level_downsample", plan.level.level_downsample);
    f.set_attr("level_mpp", plan.level.level_mpp);
    f.set_attr("read_size", static_cast<int64_t>(plan.level.read_size));
    f.set_attr("resample", static_cast<int64_t>(plan.level.resample));
    f.set_attr("footprint", plan.level.footprint);
    f.set_attr("tissue_pixels", plan.tissue_pixels);
    const size_t n = plan.patches.size();
    std::vector<int64_t> coords(2 * n);
    std::vector<float> tissue(n);
    for (size_t i = 0; i < n; ++i) {
      coords[2 * i] = plan.patches[i].x;
      coords[2 * i + 1] = plan.patches[i].y;
      tissue[i] = plan.patches[i].tissue;
    }
    h5::DatasetOptions opts;
    opts.chunk = {16384};
    f.write_dataset(kPlanCoords, h5::Type::kInt64, {n, 2}, coords.data(), opts);
    f.write_dataset(kPlanTissue, h5::Type::kFloat32, {n}, tissue.data(), opts);
    f.close();
  }
  commit_file(tmp, path);
}

std::optional<SlidePlan> read_plan(const std::string& path, const std::string& fingerprint,
                                   bool with_patches) {
  if (!file_size(path)) return std::nullopt;
  h5::File f = h5::File::open(path, h5::Mode::kRead);
  if (f.attr_int("format_version") != kPlanFormatVersion ||
      f.attr_string("config_fingerprint") != fingerprint) {
    return std::nullopt;
  }
  SlidePlan p;
  p.index = static_cast<int>(f.attr_int("slide_index"));
  p.ok = f.attr_int("ok") != 0;
  p.reason = f.attr_string("reason");
  p.width = f.attr_int("width");
  p.height = f.attr_int("height");
  p.mpp_x = f.attr_double("mpp_x");
  p.mpp_y = f.attr_double("mpp_y");
  p.mpp_source = f.attr_string("mpp_source");
  p.vendor = f.attr_string("vendor");
  p.level.level = static_cast<int>(f.attr_int("level"));
  p.level.level_downsample = f.attr_double("level_downsample");
  p.level.level_mpp = f.attr_double("level_mpp");
  p.level.read_size = static_cast<int>(f.attr_int("read_size"));
  p.level.resample = f.attr_int("resample") != 0;
  p.level.footprint = f.attr_double("footprint");
  p.tissue_pixels = f.attr_int("tissue_pixels");
  h5::Dataset coords_ds = f.open_dataset(kPlanCoords);
  p.patch_count = static_cast<int64_t>(coords_ds.dims()[0]);
  if (with_patches) {
    const auto coords = coords_ds.read_all<int64_t>();
    const auto tissue = f.open_dataset(kPlanTissue).read_all<float>();
    if (tissue.size() != static_cast<size_t>(p.patch_count)) {
      fail<IoError>("plan '{}' is inconsistent: {} coordinates, {} tissue values", path,
                    p.patch_count, tissue.size());
    }
    p.patches.resize(tissue.size());
    for (size_t i = 0; i < tissue.size(); ++i) {
      p.patches[i] = {coords[2 * i], coords[2 * i + 1], tissue[i]};
    }
  }
  return p;
}

void share_plan_counts(Comm& comm, PartPlan& part) {
  const size_t n = part.slides.size();
  TESSERA_CHECK(part.counts.size() == n && part.failed.size() == n,
                "share_plan_counts: {} slides, {} counts, {} failed flags", n, part.counts.size(),
                part.failed.size());
  std::vector<int64_t> exchange(part.counts);  // counts, then failed flags
  exchange.insert(exchange.end(), part.failed.begin(), part.failed.end());
  comm.allreduce_sum(exchange);
  part.counts.assign(exchange.begin(), exchange.begin() + static_cast<std::ptrdiff_t>(n));
  part.failed.assign(exchange.begin() + static_cast<std::ptrdiff_t>(n), exchange.end());
}

PatchOrder::PatchOrder(const std::vector<int64_t>& counts) {
  offsets_.push_back(0);
  for (int64_t c : counts) offsets_.push_back(offsets_.back() + c);
}

std::pair<int, int64_t> PatchOrder::locate(int64_t i) const {
  auto it = std::upper_bound(offsets_.begin(), offsets_.end(), i);
  int position = static_cast<int>(it - offsets_.begin()) - 1;
  return {position, i - offsets_[position]};
}

}  // namespace tessera::patchgen
