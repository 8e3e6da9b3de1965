#include "stages/patchgen/plan.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "stages/patchgen/qc.h"
#include "common/slide/slide.h"

namespace tessera::patchgen {

namespace {

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
    slide.emplace(Slide::open(entry.path));
  } catch (const IoError& e) {
    return failed(plan, e.what());
  }
  plan.width = slide->width();
  plan.height = slide->height();
  plan.vendor = slide->vendor();
  auto mpp = slide_mpp(*slide, config.default_mpp);
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
  } catch (const IoError& e) {
    return failed(plan, e.what());
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
    write_qc_png((std::filesystem::path(qc_dir) / (entry.slide_id + ".png")).string(), thumbnail,
                 thumb_dx, thumb_dy, mask, rects);
  }
  if (plan.tissue_pixels == 0) return failed(plan, "no tissue detected");
  if (plan.patches.empty()) {
    return failed(plan, fmt::format("tissue found, but no patch reaches --min-tissue {}",
                                    config.min_tissue));
  }
  plan.ok = true;
  return plan;
}

std::string encode_plans(const std::vector<SlidePlan>& plans) {
  nlohmann::json all = nlohmann::json::array();
  for (const auto& p : plans) {
    std::vector<int64_t> xs, ys;
    std::vector<float> tissue;
    for (const auto& g : p.patches) {
      xs.push_back(g.x);
      ys.push_back(g.y);
      tissue.push_back(g.tissue);
    }
    all.push_back({{"index", p.index},       {"ok", p.ok},
                   {"reason", p.reason},     {"width", p.width},
                   {"height", p.height},     {"mpp_x", p.mpp_x},
                   {"mpp_y", p.mpp_y},       {"mpp_source", p.mpp_source},
                   {"vendor", p.vendor},     {"level", p.level.level},
                   {"level_downsample", p.level.level_downsample},
                   {"level_mpp", p.level.level_mpp},
                   {"read_size", p.level.read_size},
                   {"resample", p.level.resample},
                   {"footprint", p.level.footprint},
                   {"tissue_pixels", p.tissue_pixels},
                   {"x", xs},                {"y", ys},
                   {"tissue", tissue}});
  }
  auto bytes = nlohmann::json::to_cbor(all);
  return std::string(bytes.begin(), bytes.end());
}

std::vector<SlidePlan> decode_plans(const std::string& bytes) {
  auto all = nlohmann::json::from_cbor(bytes);
  std::vector<SlidePlan> plans;
  for (const auto& j : all) {
    SlidePlan p;
    p.index = j.at("index");
    p.ok = j.at("ok");
    p.reason = j.at("reason");
    p.width = j.at("width");
    p.height = j.at("height");
    p.mpp_x = j.at("mpp_x");
    p.mpp_y = j.at("mpp_y");
    p.mpp_source = j.at("mpp_source");
    p.vendor = j.at("vendor");
    p.level.level = j.at("level");
    p.level.level_downsample = j.at("level_downsample");
    p.level.level_mpp = j.at("level_mpp");
    p.level.read_size = j.at("read_size");
    p.level.resample = j.at("resample");
    p.level.footprint = j.at("footprint");
    p.tissue_pixels = j.at("tissue_pixels");
    auto xs = j.at("x").get<std::vector<int64_t>>();
    auto ys = j.at("y").get<std::vector<int64_t>>();
    auto tissue = j.at("tissue").get<std::vector<float>>();
    for (size_t i = 0; i < xs.size(); ++i) p.patches.push_back({xs[i], ys[i], tissue[i]});
    plans.push_back(std::move(p));
  }
  return plans;
}

PatchOrder::PatchOrder(const std::vector<SlidePlan>& plans) {
  offsets_.push_back(0);
  for (const auto& p : plans) {
    offsets_.push_back(offsets_.back() + (p.ok ? static_cast<int64_t>(p.patches.size()) : 0));
  }
}

std::pair<int, int64_t> PatchOrder::locate(int64_t i) const {
  auto it = std::upper_bound(offsets_.begin(), offsets_.end(), i);
  int slide = static_cast<int>(it - offsets_.begin()) - 1;
  return {slide, i - offsets_[slide]};
}

}  // namespace tessera::patchgen
