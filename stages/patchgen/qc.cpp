#include "stages/patchgen/qc.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "common/core/error.h"
#include "common/core/fs.h"

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

// Writes `text` in black on one line inside `box` (left-aligned, or centred), as large as the box's
// height allows and scaled down to fit its width.
void draw_label(cv::Mat& canvas, const cv::Rect& box, const std::string& text, bool centred) {
  constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;
  int baseline = 0;
  const cv::Size unit = cv::getTextSize(text, kFont, 1.0, 1, &baseline);
  double scale = 0.6 * box.height / std::max(1, unit.height);
  const int margin = std::max(2, box.height / 6);
  if (unit.width * scale > box.width - 2 * margin) {
    scale = std::max(0.1, static_cast<double>(box.width - 2 * margin) / std::max(1, unit.width));
  }
  const int thickness = std::max(1, static_cast<int>(std::lround(scale * 1.2)));
  const cv::Size size = cv::getTextSize(text, kFont, scale, thickness, &baseline);
  const int x = centred ? box.x + std::max(0, (box.width - size.width) / 2) : box.x + margin;
  const int y = box.y + (box.height + size.height) / 2;
  cv::putText(canvas, text, cv::Point(x, y), kFont, scale, cv::Scalar(0, 0, 0), thickness,
              cv::LINE_AA);
}

}  // namespace

Image8 render_qc(const Image8& thumbnail, double dsx, double dsy, const TissueMask& mask,
                 const std::vector<std::array<int64_t, 4>>& patch_rects, const std::string& legend) {
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
  if (legend.empty()) return out;
  const int band = std::clamp(out.width / 40, 16, 48);
  Image8 framed{out.width, out.height + band, 3,
                std::vector<uint8_t>(static_cast<size_t>(out.width) * (out.height + band) * 3, 255)};
  std::copy(out.pixels.begin(), out.pixels.end(), framed.pixels.begin());
  cv::Mat framed_mat(framed.height, framed.width, CV_8UC3, framed.pixels.data());
  draw_label(framed_mat, cv::Rect(0, out.height, out.width, band), legend, false);
  return framed;
}

std::string qc_legend(const std::string& slide_id, int64_t patches_kept, double tissue_mm2) {
  return fmt::format("{} | {} patches kept | tissue {:.2f} mm2", slide_id, patches_kept, tissue_mm2);
}

void write_qc_png(const std::string& path, const Image8& thumbnail, double dsx, double dsy,
                  const TissueMask& mask, const std::vector<std::array<int64_t, 4>>& patch_rects,
                  const std::string& legend) {
  write_png(path, render_qc(thumbnail, dsx, dsy, mask, patch_rects, legend));
}

nlohmann::json qc_geojson(const TissueMask& mask,
                          const std::vector<std::array<int64_t, 4>>& patch_rects) {
  using nlohmann::json;
  const auto properties = [](const char* name, const std::array<uint8_t, 3>& rgb) {
    return json{{"objectType", "annotation"},
                {"classification", {{"name", name}, {"color", {rgb[0], rgb[1], rgb[2]}}}}};
  };
  const auto feature = [](json geometry, json props) {
    return json{{"type", "Feature"}, {"geometry", std::move(geometry)}, {"properties", std::move(props)}};
  };
  const auto square = [](double x0, double y0, double x1, double y1) {
    return json::array({json::array({x0, y0}), json::array({x1, y0}), json::array({x1, y1}),
                        json::array({x0, y1}), json::array({x0, y0})});
  };
  json features = json::array();
  if (!mask.empty() && mask.tissue_pixels() > 0) {
    cv::Mat bin(mask.height, mask.width, CV_8UC1);
    for (int y = 0; y < mask.height; ++y) {
      for (int x = 0; x < mask.width; ++x) bin.at<uint8_t>(y, x) = mask.at(x, y) ? 255 : 0;
    }
    std::vector<std::vector<cv::Point>> contours;
    std::vector<cv::Vec4i> hierarchy;  // next, previous, first child, parent
    cv::findContours(bin, contours, hierarchy, cv::RETR_CCOMP, cv::CHAIN_APPROX_SIMPLE);
    const double dsx = mask.downsample_x, dsy = mask.downsample_y;
    const auto level0 = [](double v) { return std::round(v * 100) / 100; };
    // A ring through the level-0 centres of the contour's pixels; nullopt when it has no area.
    const auto ring = [&](const std::vector<cv::Point>& c) -> json {
      if (c.size() < 3 || cv::contourArea(c) <= 0) return nullptr;
      json r = json::array();
      for (const auto& p : c) r.push_back({level0((p.x + 0.5) * dsx), level0((p.y + 0.5) * dsy)});
      r.push_back(r.front());
      return r;
    };
    for (size_t i = 0; i < contours.size(); ++i) {
      if (hierarchy[i][3] >= 0) continue;  // a hole, written with its region
      json outer = ring(contours[i]);
      if (outer.is_null()) {
        const cv::Rect b = cv::boundingRect(contours[i]);
        outer = square(level0(b.x * dsx), level0(b.y * dsy), level0((b.x + b.width) * dsx),
                       level0((b.y + b.height) * dsy));
      }
      json rings = json::array({std::move(outer)});
      for (int h = hierarchy[i][2]; h >= 0; h = hierarchy[h][0]) {
        json hole = ring(contours[h]);
        if (!hole.is_null()) rings.push_back(std::move(hole));
      }
      features.push_back(feature({{"type", "Polygon"}, {"coordinates", std::move(rings)}},
                                 properties("Tissue", kQcContourRgb)));
    }
  }
  const auto patch_ring = [&](const std::array<int64_t, 4>& r) {
    return square(static_cast<double>(r[0]), static_cast<double>(r[1]),
                  static_cast<double>(r[0] + r[2]), static_cast<double>(r[1] + r[3]));
  };
  if (patch_rects.size() <= kGeoJsonMaxPatchFeatures) {
    for (const auto& r : patch_rects) {
      features.push_back(feature({{"type", "Polygon"}, {"coordinates", json::array({patch_ring(r)})}},
                                 properties("Patch", kQcPatchRgb)));
    }
  } else {
    json polygons = json::array();
    for (const auto& r : patch_rects) polygons.push_back(json::array({patch_ring(r)}));
    features.push_back(feature({{"type", "MultiPolygon"}, {"coordinates", std::move(polygons)}},
                               properties("Patch", kQcPatchRgb)));
  }
  return json{{"type", "FeatureCollection"}, {"features", std::move(features)}};
}

void write_qc_geojson(const std::string& path, const TissueMask& mask,
                      const std::vector<std::array<int64_t, 4>>& patch_rects) {
  atomic_write_file(path, qc_geojson(mask, patch_rects).dump() + "\n");
}

void write_qc_overview(const std::string& path, const std::string& qc_dir,
                       const std::vector<std::string>& slide_ids) {
  const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(slide_ids.size()));
  const int cols = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n))));
  const int rows = static_cast<int>((n + cols - 1) / cols);
  const int cell = std::clamp(
      static_cast<int>(std::floor(std::sqrt(static_cast<double>(kOverviewMaxPixels) / (cols * rows)))),
      kOverviewMinCell, kOverviewMaxCell);
  const int label = std::max(12, cell / 8);
  const int pad = 2;
  Image8 sheet{cols * cell, rows * cell, 3,
               std::vector<uint8_t>(static_cast<size_t>(cols) * cell * rows * cell * 3, 255)};
  cv::Mat canvas(sheet.height, sheet.width, CV_8UC3, sheet.pixels.data());
  for (size_t k = 0; k < slide_ids.size(); ++k) {
    const int cx = static_cast<int>(k % cols) * cell;
    const int cy = static_cast<int>(k / cols) * cell;
    const cv::Rect area(cx + pad, cy + pad, cell - 2 * pad, cell - label - 2 * pad);
    const std::string file = (std::filesystem::path(qc_dir) / (slide_ids[k] + ".png")).string();
    if (path_exists(file)) {
      Image8 qc = read_png(file);
      cv::Mat src(qc.height, qc.width, qc.channels == 3 ? CV_8UC3 : CV_8UC1, qc.pixels.data());
      cv::Mat rgb;
      if (qc.channels == 3) {
        rgb = src;
      } else {
        cv::cvtColor(src, rgb, cv::COLOR_GRAY2RGB);
      }
      const double scale = std::min(static_cast<double>(area.width) / qc.width,
                                    static_cast<double>(area.height) / qc.height);
      const int w = std::clamp(static_cast<int>(std::lround(qc.width * scale)), 1, area.width);
      const int h = std::clamp(static_cast<int>(std::lround(qc.height * scale)), 1, area.height);
      cv::Mat roi = canvas(cv::Rect(area.x + (area.width - w) / 2, area.y + area.height - h, w, h));
      cv::resize(rgb, roi, roi.size(), 0, 0, scale < 1 ? cv::INTER_AREA : cv::INTER_LINEAR);
    } else {
      cv::rectangle(canvas, area, cv::Scalar(200, 200, 200), cv::FILLED);
      draw_label(canvas, cv::Rect(area.x, area.y + area.height / 2 - label / 2, area.width, label),
                 "no QC image", true);
    }
    draw_label(canvas, cv::Rect(cx + pad, cy + cell - label - pad, cell - 2 * pad, label),
               slide_ids[k], true);
  }
  write_png(path, sheet);
}

}  // namespace tessera::patchgen
