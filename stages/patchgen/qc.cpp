#include "stages/patchgen/qc.h"

#include <algorithm>
#include <cmath>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "common/core/error.h"

namespace tessera::patchgen {
namespace {

cv::Scalar to_scalar(const std::array<uint8_t, 3>& rgb) { return {double(rgb[0]), double(rgb[1]), double(rgb[2])}; }

// The mask resampled onto a width x height grid of downsample (dsx, dsy), as 0/255.
cv::Mat mask_on_grid(const TissueMask& mask, int width, int height, double dsx, double dsy) {
  cv::Mat out(height, width, CV_8UC1, cv::Scalar(0));
  for (int y = 0; y < height; ++y) {
    int my = static_cast<int>(std::floor((y + 0.5) * dsy / mask.downsample_y));
    if (my < 0 || my >= mask.height) continue;
    uint8_t* row = out.ptr<uint8_t>(y);
    for (int x = 0; x < width; ++x) {
      int mx = static_cast<int>(std::floor((x + 0.5) * dsx / mask.downsample_x));
      if (mx >= 0 && mx < mask.width && mask.at(mx, my)) row[x] = 255;
    }
  }
  return out;
}

}  // namespace

Image8 render_qc(const Image8& thumbnail, double dsx, double dsy, const TissueMask& mask,
                 const std::vector<std::array<int64_t, 4>>& patch_rects) {
  const int c = thumbnail.channels;
  if (thumbnail.width <= 0 || thumbnail.height <= 0 || (c != 1 && c != 3) ||
      thumbnail.pixels.size() != static_cast<size_t>(thumbnail.width) * thumbnail.height * c) {
    fail<InvalidInput>("QC image needs a non-empty gray or RGB thumbnail, got {}x{}x{}",
                       thumbnail.width, thumbnail.height, c);
  }
  if (!(dsx > 0) || !(dsy > 0) || !std::isfinite(dsx) || !std::isfinite(dsy)) {
    fail<InvalidInput>("QC image: downsample must be positive, got {} x {}", dsx, dsy);
  }
  cv::Mat src(thumbnail.height, thumbnail.width, c == 3 ? CV_8UC3 : CV_8UC1,
              const_cast<uint8_t*>(thumbnail.pixels.data()));
  Image8 out;
  out.width = thumbnail.width;
  out.height = thumbnail.height;
  out.channels = 3;
  out.pixels.resize(static_cast<size_t>(out.width) * out.height * 3);
  cv::Mat canvas(out.height, out.width, CV_8UC3, out.pixels.data());
  if (c == 3) {
    src.copyTo(canvas);
  } else {
    cv::cvtColor(src, canvas, cv::COLOR_GRAY2RGB);
  }

  const cv::Scalar patch_colour = to_scalar(kQcPatchRgb);
  for (const auto& r : patch_rects) {
    cv::Point p0(static_cast<int>(std::lround(r[0] / dsx)), static_cast<int>(std::lround(r[1] / dsy)));
    cv::Point p1(static_cast<int>(std::lround((r[0] + r[2]) / dsx)) - 1,
                 static_cast<int>(std::lround((r[1] + r[3]) / dsy)) - 1);
    cv::rectangle(canvas, p0, cv::Point(std::max(p0.x, p1.x), std::max(p0.y, p1.y)), patch_colour, 1);
  }

  if (!mask.empty()) {
    cv::Mat bin = mask_on_grid(mask, out.width, out.height, dsx, dsy);
    std::vector<std::vector<cv::Point>> contours;
    cv::findContours(bin, contours, cv::RETR_LIST, cv::CHAIN_APPROX_SIMPLE);
    int thickness = std::max(out.width, out.height) > 1000 ? 2 : 1;
    cv::drawContours(canvas, contours, -1, to_scalar(kQcContourRgb), thickness);
  }
  return out;
}

void write_qc_png(const std::string& path, const Image8& thumbnail, double dsx, double dsy,
                  const TissueMask& mask, const std::vector<std::array<int64_t, 4>>& patch_rects) {
  write_png(path, render_qc(thumbnail, dsx, dsy, mask, patch_rects));
}

}  // namespace tessera::patchgen
