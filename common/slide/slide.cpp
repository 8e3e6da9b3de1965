#include "common/slide/slide.h"

#include <openslide/openslide.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include <opencv2/imgproc.hpp>

#include "common/core/error.h"
#include "common/slide/dicom_slide.h"
#include "common/slide/sniff.h"
#include "common/slide/strip_tiff.h"

namespace tessera {

namespace {

// A slide's header is input: what its parsing throws besides tessera's own errors (a
// std::length_error or std::bad_alloc from a size it claims) is that slide's failure, an IoError
// naming it, not the run's.
template <typename Open>
Slide open_or_refuse(const std::string& path, Open open) {
  try {
    return open();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail<IoError>("cannot open slide '{}': {}", path, e.what());
  }
}

}  // namespace

std::optional<Slide> Slide::try_open(const std::string& path, std::string* error) {
  openslide_t* osr = openslide_open(path.c_str());
  if (osr == nullptr) return std::nullopt;
  if (const char* err = openslide_get_error(osr)) {
    if (error != nullptr) *error = err;
    openslide_close(osr);
    return std::nullopt;
  }
  return Slide(osr, path);
}

Slide Slide::open(const std::string& path) {
  return open_or_refuse(path, [&] { return open_base(path, 0); });
}

Slide Slide::open_base(const std::string& path, size_t tile_cache_bytes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    fail<IoError>("cannot open slide '{}': no such file (paths are taken as recorded; run from "
                  "any directory with absolute paths)",
                  path);
  }
  if (is_dicom_path(path)) return open_dicom(path, tile_cache_bytes);
  const char* vendor = openslide_detect_vendor(path.c_str());
  openslide_t* osr = openslide_open(path.c_str());
  if (osr == nullptr && vendor == nullptr) {
    // OpenSlide 3.4 takes tiled TIFF only: an untiled 8-bit RGB TIFF is read by strips.
    std::string not_strips;
    if (auto strips = open_strip_tiff(path, tile_cache_bytes, &not_strips)) {
      Slide slide(nullptr, path);
      slide.dims_ = std::move(strips->dims);
      slide.downsamples_ = {1.0};
      slide.properties_ = std::move(strips->properties);
      slide.direct_ = std::move(strips->reader);
      return slide;
    }
  }
  if (osr == nullptr) {
    fail<IoError>("cannot open slide '{}': {}", path,
                  vendor ? fmt::format("unsupported or missing format (detected vendor '{}')", vendor)
                         : unreadable_reason(path));
  }
  if (const char* err = openslide_get_error(osr)) {
    std::string message = err;
    openslide_close(osr);
    fail<IoError>("cannot open slide '{}': {}", path, message);
  }
  return Slide(osr, path);
}

Slide Slide::open_dicom(const std::string& path, size_t tile_cache_bytes) {
  DicomSlide dicom = open_dicom_slide(path, tile_cache_bytes);
  Slide slide(nullptr, path);
  slide.dims_ = std::move(dicom.dims);
  slide.downsamples_ = std::move(dicom.downsamples);
  slide.properties_ = std::move(dicom.properties);
  slide.direct_ = std::move(dicom.reader);
  return slide;
}

Slide::Slide(openslide_t* osr, std::string path) : osr_(osr), path_(std::move(path)) {
  if (osr_ == nullptr) return;
  int levels = openslide_get_level_count(osr_);
  check_error("reading the level count");
  for (int l = 0; l < levels; ++l) {
    int64_t w = 0, h = 0;
    openslide_get_level_dimensions(osr_, l, &w, &h);
    dims_.emplace_back(w, h);
    downsamples_.push_back(openslide_get_level_downsample(osr_, l));
  }
  check_error("reading level dimensions");
}

SlideReader parse_slide_reader(const std::string& text, const std::string& option) {
  if (text == "openslide") return SlideReader::kOpenSlide;
  if (text == "direct") return SlideReader::kDirect;
  if (text == "auto") return SlideReader::kAuto;
  fail<InvalidInput>("invalid --{}: '{}' (expected openslide, direct or auto)", option, text);
}

const char* to_string(SlideReader reader) {
  switch (reader) {
    case SlideReader::kOpenSlide: return "openslide";
    case SlideReader::kDirect: return "direct";
    case SlideReader::kAuto: break;
  }
  return "auto";
}

Slide Slide::open(const std::string& path, SlideReader reader, size_t tile_cache_bytes) {
  return open_or_refuse(path, [&] { return open_with(path, reader, tile_cache_bytes); });
}

Slide Slide::open_with(const std::string& path, SlideReader reader, size_t tile_cache_bytes) {
  Slide slide = open_base(path, tile_cache_bytes);
  if (reader == SlideReader::kOpenSlide || slide.osr_ == nullptr) return slide;
  const std::string vendor = slide.vendor();
  std::string why;
  if (vendor != "generic-tiff" && vendor != "aperio") {
    why = fmt::format("vendor '{}' (the direct reader takes generic-tiff and aperio)", vendor);
  } else {
    slide.direct_ = TileReader::open(path, slide.dims_, tile_cache_bytes, &why);
  }
  if (!slide.direct_) {
    if (reader == SlideReader::kDirect) {
      fail<IoError>("cannot read slide '{}' with --reader direct: {} (use --reader auto or "
                    "openslide)",
                    path, why);
    }
    slide.direct_refusal_ = why;
  }
  return slide;
}

TileReaderStats Slide::direct_stats() const { return direct_ ? direct_->stats() : TileReaderStats{}; }

Slide::Slide(Slide&& other) noexcept
    : osr_(other.osr_), path_(std::move(other.path_)), dims_(std::move(other.dims_)),
      downsamples_(std::move(other.downsamples_)), direct_(std::move(other.direct_)),
      direct_refusal_(std::move(other.direct_refusal_)),
      properties_(std::move(other.properties_)), fallbacks_(other.fallbacks_.load()) {
  other.osr_ = nullptr;
}

Slide& Slide::operator=(Slide&& other) noexcept {
  if (this != &other) {
    if (osr_ != nullptr) openslide_close(osr_);
    osr_ = other.osr_;
    other.osr_ = nullptr;
    path_ = std::move(other.path_);
    dims_ = std::move(other.dims_);
    downsamples_ = std::move(other.downsamples_);
    direct_ = std::move(other.direct_);
    direct_refusal_ = std::move(other.direct_refusal_);
    properties_ = std::move(other.properties_);
    fallbacks_ = other.fallbacks_.load();
  }
  return *this;
}

Slide::~Slide() {
  if (osr_ != nullptr) openslide_close(osr_);
}

void Slide::check_error(const char* what) const {
  if (osr_ == nullptr) return;
  if (const char* err = openslide_get_error(osr_)) {
    fail<IoError>("slide '{}': OpenSlide error while {}: {}", path_, what, err);
  }
}

std::optional<std::string> Slide::property(const std::string& name) const {
  if (osr_ == nullptr) {
    const auto it = properties_.find(name);
    if (it == properties_.end()) return std::nullopt;
    return it->second;
  }
  const char* value = openslide_get_property_value(osr_, name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string Slide::vendor() const { return property("openslide.vendor").value_or("unknown"); }

void Slide::read_argb(int64_t x, int64_t y, int level, int w, int h, uint32_t* argb) const {
  if (osr_ == nullptr) {
    std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
    read_rgb(x, y, level, w, h, rgb.data());
    for (size_t i = 0; i < static_cast<size_t>(w) * h; ++i) {
      argb[i] = 0xff000000u | static_cast<uint32_t>(rgb[3 * i]) << 16 |
                static_cast<uint32_t>(rgb[3 * i + 1]) << 8 | rgb[3 * i + 2];
    }
    return;
  }
  openslide_read_region(osr_, argb, x, y, level, w, h);
  if (const char* err = openslide_get_error(osr_)) {
    fail<IoError>("slide '{}': cannot read region x={} y={} level={} {}x{}: {}", path_, x, y,
                  level, w, h, err);
  }
}

std::vector<uint32_t>& Slide::argb_buffer() {
  thread_local std::vector<uint32_t> argb;
  return argb;
}

void Slide::read_rgb(int64_t x, int64_t y, int level, int w, int h, uint8_t* rgb) const {
  if (direct_) {
    // OpenSlide paints level `level` from (x / downsample, y / downsample): a whole pixel is a
    // plain copy, which the direct reader reproduces; a fraction is interpolated, left to it.
    const double lx = static_cast<double>(x) / downsamples_[level];
    const double ly = static_cast<double>(y) / downsamples_[level];
    if (lx == std::floor(lx) && ly == std::floor(ly)) {
      direct_->read_rgb(level, static_cast<int64_t>(lx), static_cast<int64_t>(ly), w, h, rgb);
      return;
    }
    fallbacks_.fetch_add(1, std::memory_order_relaxed);
    if (osr_ == nullptr) {  // no OpenSlide to interpolate: the nearest whole pixel
      direct_->read_rgb(level, std::llround(lx), std::llround(ly), w, h, rgb);
      return;
    }
  }
  std::vector<uint32_t>& argb = argb_buffer();
  argb.resize(static_cast<size_t>(w) * h);
  read_argb(x, y, level, w, h, argb.data());
  argb_to_rgb(argb.data(), argb.size(), rgb);
}

Image8 Slide::read_level(int level) const {
  Image8 image;
  image.width = static_cast<int>(width(level));
  image.height = static_cast<int>(height(level));
  image.channels = 3;
  image.pixels.resize(static_cast<size_t>(image.width) * image.height * 3);
  // Row bands bound the temporary ARGB buffer for large levels.
  const int band = std::max(1, static_cast<int>((64 << 20) / (4 * std::max(1, image.width))));
  for (int y = 0; y < image.height; y += band) {
    int rows = std::min(band, image.height - y);
    int64_t y0 = static_cast<int64_t>(std::llround(y * downsample(level)));
    read_rgb(0, y0, level, image.width, rows,
             image.pixels.data() + static_cast<size_t>(y) * image.width * 3);
  }
  argb_buffer() = {};  // up to 64 MB for a level; patch reads need far less
  return image;
}

void argb_to_rgb(const uint32_t* argb, size_t pixels, uint8_t* rgb) {
  // Tissue regions are opaque: one AND over the alpha bytes, then OpenCV's vectorised swizzle
  // (little-endian ARGB words are B, G, R, A in memory). Otherwise pixel by pixel.
  uint32_t all = 0xffffffffu;
  for (size_t i = 0; i < pixels; ++i) all &= argb[i];
  if ((all >> 24) == 0xff && pixels <= static_cast<size_t>(std::numeric_limits<int>::max())) {
    const cv::Mat in(1, static_cast<int>(pixels), CV_8UC4, const_cast<uint32_t*>(argb));
    cv::Mat out(1, static_cast<int>(pixels), CV_8UC3, rgb);
    cv::cvtColor(in, out, cv::COLOR_BGRA2RGB);
    return;
  }
  for (size_t i = 0; i < pixels; ++i) {
    uint32_t p = argb[i];
    uint32_t a = p >> 24;
    uint8_t* out = rgb + 3 * i;
    if (a == 255) {
      out[0] = static_cast<uint8_t>(p >> 16);
      out[1] = static_cast<uint8_t>(p >> 8);
      out[2] = static_cast<uint8_t>(p);
    } else if (a == 0) {
      out[0] = out[1] = out[2] = 255;
    } else {
      for (int c = 0; c < 3; ++c) {
        uint32_t v = (p >> (16 - 8 * c)) & 0xff;
        out[c] = static_cast<uint8_t>(std::min<uint32_t>(255, (v * 255 + a / 2) / a));
      }
    }
  }
}

namespace {

std::optional<double> parse_positive(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(text->c_str(), &end);
  if (end == text->c_str() || !std::isfinite(v) || v <= 0) return std::nullopt;
  return v;
}

}  // namespace

std::optional<SlideMpp> slide_mpp(const Slide& slide, double default_mpp) {
  auto mx = parse_positive(slide.property("openslide.mpp-x"));
  auto my = parse_positive(slide.property("openslide.mpp-y"));
  if (mx && my) return SlideMpp{*mx, *my, "openslide.mpp"};
  auto rx = parse_positive(slide.property("tiff.XResolution"));
  auto ry = parse_positive(slide.property("tiff.YResolution"));
  auto unit = slide.property("tiff.ResolutionUnit");
  if (rx && ry && unit) {
    double um_per_unit = *unit == "centimeter" ? 1e4 : *unit == "inch" ? 25400.0 : 0;
    if (um_per_unit > 0) return SlideMpp{um_per_unit / *rx, um_per_unit / *ry, "tiff.resolution"};
  }
  if (default_mpp > 0) return SlideMpp{default_mpp, default_mpp, "default"};
  return std::nullopt;
}

void resize_patch(const uint8_t* src, int src_size, uint8_t* dst, int dst_size) {
  cv::Mat in(src_size, src_size, CV_8UC3, const_cast<uint8_t*>(src));
  cv::Mat out(dst_size, dst_size, CV_8UC3, dst);
  cv::resize(in, out, cv::Size(dst_size, dst_size), 0, 0,
             dst_size < src_size ? cv::INTER_AREA : cv::INTER_LINEAR);
}

}  // namespace tessera
