#include "stages/patchgen/tissue.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>

#include <tiffio.h>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "common/core/error.h"
#include "common/slide/slide.h"

namespace tessera::patchgen {
namespace {

constexpr int kMaxMaskSide = 16384;
constexpr double kMaxAspectMismatch = 0.02;
constexpr int kBandRows = 256;  // rows of the source mask decoded at a time

bool positive_finite(double v) { return std::isfinite(v) && v > 0; }

void validate(const Image8& thumb, double dsx, double dsy, double mpp, const TissueParams& p) {
  if (thumb.width <= 0 || thumb.height <= 0 || thumb.channels != 3 ||
      thumb.pixels.size() != static_cast<size_t>(thumb.width) * thumb.height * 3) {
    fail<InvalidInput>("tissue detection needs a non-empty RGB thumbnail, got {}x{}x{} ({} bytes)",
                       thumb.width, thumb.height, thumb.channels, thumb.pixels.size());
  }
  if (!positive_finite(dsx) || !positive_finite(dsy)) {
    fail<InvalidInput>("tissue detection: downsample must be positive, got {} x {}", dsx, dsy);
  }
  if (!positive_finite(mpp)) {
    fail<InvalidInput>("tissue detection: microns per pixel must be positive, got {}", mpp);
  }
  if (p.median_blur < 1 || p.median_blur % 2 == 0) {
    fail<InvalidInput>("tissue median blur kernel must be odd and >= 1, got {}", p.median_blur);
  }
  if (p.threshold > 255 || p.threshold < -1) {
    fail<InvalidInput>("tissue threshold must be -1 (Otsu) or 0..255, got {}", p.threshold);
  }
  if (p.min_saturation < 0 || p.min_saturation > 255) {
    fail<InvalidInput>("tissue minimum saturation must be 0..255, got {}", p.min_saturation);
  }
  if (p.close_kernel < 0) {
    fail<InvalidInput>("tissue closing kernel must be >= 0, got {}", p.close_kernel);
  }
  if (!(p.min_area_um2 >= 0) || !(p.min_hole_area_um2 >= 0)) {
    fail<InvalidInput>("tissue area thresholds must be >= 0, got {} and {}", p.min_area_um2,
                       p.min_hole_area_um2);
  }
}

// Morphological closing with an elliptical k x k element. cv::morphologyEx dilates and erodes with
// the same anchored element, which for even k moves edges right and down by one pixel; eroding
// with the point-reflected element and anchor keeps edges in place for every k.
void close_unshifted(cv::Mat& bin, int k) {
  cv::Mat kernel = cv::getStructuringElement(cv::MORPH_ELLIPSE, {k, k});
  cv::Mat reflected;
  cv::flip(kernel, reflected, -1);
  const int a = k / 2;
  cv::Mat dilated;
  cv::dilate(bin, dilated, kernel, {a, a});
  cv::erode(dilated, bin, reflected, {k - 1 - a, k - 1 - a});
}

// Fills background regions of `bin` (values 0/1) that are not 4-connected to the image border,
// except those larger than max_hole_px pixels (a negative limit fills all).
void fill_holes(cv::Mat& bin, double max_hole_px) {
  cv::Mat padded;
  cv::copyMakeBorder(bin, padded, 1, 1, 1, 1, cv::BORDER_CONSTANT, cv::Scalar(0));
  cv::floodFill(padded, cv::Point(0, 0), cv::Scalar(2), nullptr, cv::Scalar(0), cv::Scalar(0), 4);
  cv::Mat holes = padded(cv::Rect(1, 1, bin.cols, bin.rows)) == 0;
  if (max_hole_px < 0) {
    bin.setTo(1, holes);
    return;
  }
  cv::Mat labels, stats, centroids;
  int n = cv::connectedComponentsWithStats(holes, labels, stats, centroids, 4, CV_32S);
  std::vector<uint8_t> fill(n, 0);
  for (int i = 1; i < n; ++i) fill[i] = stats.at<int>(i, cv::CC_STAT_AREA) <= max_hole_px;
  for (int y = 0; y < bin.rows; ++y) {
    const int* l = labels.ptr<int>(y);
    uint8_t* b = bin.ptr<uint8_t>(y);
    for (int x = 0; x < bin.cols; ++x) b[x] |= fill[l[x]];
  }
}

// Clears 8-connected components of `bin` with fewer than min_px pixels.
void drop_small_components(cv::Mat& bin, double min_px) {
  cv::Mat labels, stats, centroids;
  int n = cv::connectedComponentsWithStats(bin, labels, stats, centroids, 8, CV_32S);
  std::vector<uint8_t> keep(n, 0);
  for (int i = 1; i < n; ++i) keep[i] = stats.at<int>(i, cv::CC_STAT_AREA) >= min_px;
  for (int y = 0; y < bin.rows; ++y) {
    const int* l = labels.ptr<int>(y);
    uint8_t* b = bin.ptr<uint8_t>(y);
    for (int x = 0; x < bin.cols; ++x) b[x] = keep[l[x]];
  }
}

// ---- External masks -------------------------------------------------------------------------

// Fills `tissue` (width * rows values, 0/1) with rows [y0, y0 + rows) of the source mask.
using RowReader = std::function<void(int y0, int rows, std::vector<uint8_t>& tissue)>;

void check_aspect(const std::string& path, int64_t mw, int64_t mh, int64_t sw, int64_t sh) {
  if (mw <= 0 || mh <= 0) fail<InvalidInput>("mask {} is empty ({}x{})", path, mw, mh);
  double sx = static_cast<double>(sw) / static_cast<double>(mw);
  double sy = static_cast<double>(sh) / static_cast<double>(mh);
  double mismatch = std::abs(sx / sy - 1.0);
  // The height the mask would have at the width's scale, compared with its real height: a mask
  // rounded to whole pixels may be off by one pixel however small it is.
  double off_px = std::abs(static_cast<double>(sh) / sx - static_cast<double>(mh));
  if (mismatch > kMaxAspectMismatch && off_px > 1.0) {
    fail<InvalidInput>(
        "mask {} is {}x{}, whose aspect ratio does not match the slide's {}x{} (off by {:.1f}%)",
        path, mw, mh, sw, sh, mismatch * 100.0);
  }
}

// Reads a width x height source through `read`, in bands of whole blocks, reducing it by an
// integer factor so that neither side exceeds kMaxMaskSide (majority vote over each block).
TissueMask pool_mask(int width, int height, int64_t slide_w, int64_t slide_h,
                     const RowReader& read) {
  const int factor = std::max(1, (std::max(width, height) + kMaxMaskSide - 1) / kMaxMaskSide);
  const int band_rows = factor * std::max(1, kBandRows / factor);
  TissueMask mask;
  mask.width = (width + factor - 1) / factor;
  mask.height = (height + factor - 1) / factor;
  mask.downsample_x = static_cast<double>(slide_w) / mask.width;
  mask.downsample_y = static_cast<double>(slide_h) / mask.height;
  mask.data.assign(static_cast<size_t>(mask.width) * mask.height, 0);
  std::vector<uint8_t> band;
  std::vector<int> counts(mask.width);
  for (int y0 = 0; y0 < height; y0 += band_rows) {
    const int rows = std::min(band_rows, height - y0);
    band.assign(static_cast<size_t>(width) * rows, 0);
    read(y0, rows, band);
    for (int by = 0; by < rows; by += factor) {
      const int block_rows = std::min(factor, rows - by);
      std::fill(counts.begin(), counts.end(), 0);
      for (int r = by; r < by + block_rows; ++r) {
        const uint8_t* row = band.data() + static_cast<size_t>(r) * width;
        for (int x = 0; x < width; ++x) counts[x / factor] += row[x];
      }
      uint8_t* out = mask.data.data() + static_cast<size_t>((y0 + by) / factor) * mask.width;
      for (int ox = 0; ox < mask.width; ++ox) {
        const int block_cols = std::min(factor, width - ox * factor);
        out[ox] = 2 * counts[ox] >= block_rows * block_cols;
      }
    }
  }
  return mask;
}

TissueMask load_png_mask(const std::string& path, int64_t sw, int64_t sh) {
  Image8 image;
  try {
    image = read_png(path);
  } catch (const Error& e) {
    throw InvalidInput(fmt::format("tissue mask: {}", e.what()));  // names the path already
  }
  check_aspect(path, image.width, image.height, sw, sh);
  const int c = image.channels;
  return pool_mask(image.width, image.height, sw, sh,
                   [&](int y0, int /*rows*/, std::vector<uint8_t>& tissue) {
                     const uint8_t* src = image.pixels.data() + static_cast<size_t>(y0) * image.width * c;
                     for (size_t i = 0; i < tissue.size(); ++i) {
                       uint8_t any = 0;
                       for (int k = 0; k < c; ++k) any |= src[i * c + k];
                       tissue[i] = any != 0;
                     }
                   });
}

// Returns false when OpenSlide does not recognise the file.
bool load_openslide_mask(const std::string& path, int64_t sw, int64_t sh, TissueMask& out,
                         std::string& error) {
  std::optional<Slide> slide = Slide::try_open(path, &error);
  if (!slide) return false;
  const int level = slide->level_count() - 1;
  const int64_t lw = slide->width(level);
  const int64_t lh = slide->height(level);
  const double ds = slide->downsample(level);
  check_aspect(path, lw, lh, sw, sh);
  if (lw > INT32_MAX / 2 || lh > INT32_MAX / 2) fail<InvalidInput>("mask {} is too large", path);
  std::vector<uint32_t> argb;
  out = pool_mask(static_cast<int>(lw), static_cast<int>(lh), sw, sh,
                  [&](int y0, int rows, std::vector<uint8_t>& tissue) {
                    argb.resize(tissue.size());
                    auto y_level0 = static_cast<int64_t>(std::llround(y0 * ds));
                    try {
                      slide->read_argb(0, y_level0, level, static_cast<int>(lw), rows, argb.data());
                    } catch (const IoError& e) {
                      fail<InvalidInput>("cannot read mask {}: {}", path, e.what());
                    }
                    // Premultiplied ARGB: transparent pixels are 0, so any colour bit is tissue.
                    for (size_t i = 0; i < tissue.size(); ++i) tissue[i] = (argb[i] & 0xFFFFFFu) != 0;
                  });
  return true;
}

struct TiffCloser {
  void operator()(TIFF* tif) const noexcept { TIFFClose(tif); }
};
using TiffPtr = std::unique_ptr<TIFF, TiffCloser>;

struct TiffOptionsFree {
  void operator()(TIFFOpenOptions* o) const noexcept { TIFFOpenOptionsFree(o); }
};

int collect_tiff_error(TIFF*, void* user_data, const char* module, const char* fmt, va_list ap) {
  std::array<char, 512> buf{};
  std::vsnprintf(buf.data(), buf.size(), fmt, ap);
  auto* message = static_cast<std::string*>(user_data);
  if (message->empty()) *message = module ? fmt::format("{}: {}", module, buf.data()) : buf.data();
  return 1;
}

int ignore_tiff_warning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

TissueMask load_tiff_mask(const std::string& path, int64_t sw, int64_t sh) {
  std::string tiff_error;
  std::unique_ptr<TIFFOpenOptions, TiffOptionsFree> opts(TIFFOpenOptionsAlloc());
  TIFFOpenOptionsSetErrorHandlerExtR(opts.get(), collect_tiff_error, &tiff_error);
  TIFFOpenOptionsSetWarningHandlerExtR(opts.get(), ignore_tiff_warning, nullptr);
  TiffPtr tif(TIFFOpenExt(path.c_str(), "r", opts.get()));
  if (!tif) fail<InvalidInput>("cannot read mask {}: {}", path, tiff_error);

  // The smallest directory with the main image's aspect ratio (skips labels and macro images).
  uint32_t w0 = 0, h0 = 0;
  TIFFGetField(tif.get(), TIFFTAG_IMAGEWIDTH, &w0);
  TIFFGetField(tif.get(), TIFFTAG_IMAGELENGTH, &h0);
  tdir_t best = 0;
  uint32_t best_w = w0;
  for (tdir_t dir = 1; dir < TIFFNumberOfDirectories(tif.get()); ++dir) {
    uint32_t w = 0, h = 0;
    if (!TIFFSetDirectory(tif.get(), dir) || !TIFFGetField(tif.get(), TIFFTAG_IMAGEWIDTH, &w) ||
        !TIFFGetField(tif.get(), TIFFTAG_IMAGELENGTH, &h) || w == 0 || h == 0) {
      continue;
    }
    double mismatch = std::abs((static_cast<double>(w) / h) / (static_cast<double>(w0) / h0) - 1);
    if (w < best_w && mismatch <= kMaxAspectMismatch) {
      best = dir;
      best_w = w;
    }
  }
  uint32_t w = 0, h = 0;
  if (!TIFFSetDirectory(tif.get(), best) || !TIFFGetField(tif.get(), TIFFTAG_IMAGEWIDTH, &w) ||
      !TIFFGetField(tif.get(), TIFFTAG_IMAGELENGTH, &h)) {
    fail<InvalidInput>("cannot read mask {}: {}", path, tiff_error);
  }
  check_aspect(path, w, h, sw, sh);
  if (w > INT32_MAX / 2 || h > INT32_MAX / 2) fail<InvalidInput>("mask {} is too large", path);

  char emsg[1024] = {};
  TIFFRGBAImage img{};
  if (!TIFFRGBAImageOK(tif.get(), emsg) || !TIFFRGBAImageBegin(&img, tif.get(), 0, emsg)) {
    fail<InvalidInput>("cannot read mask {}: {}", path, emsg);
  }
  std::unique_ptr<TIFFRGBAImage, void (*)(TIFFRGBAImage*)> guard(&img, TIFFRGBAImageEnd);
  img.req_orientation = ORIENTATION_TOPLEFT;
  std::vector<uint32_t> abgr;
  return pool_mask(static_cast<int>(w), static_cast<int>(h), sw, sh,
                   [&](int y0, int rows, std::vector<uint8_t>& tissue) {
                     abgr.assign(tissue.size(), 0);
                     img.row_offset = y0;
                     img.col_offset = 0;
                     if (!TIFFRGBAImageGet(&img, abgr.data(), w, static_cast<uint32_t>(rows))) {
                       fail<InvalidInput>("cannot read mask {}: {}", path, tiff_error);
                     }
                     for (size_t i = 0; i < tissue.size(); ++i) tissue[i] = (abgr[i] & 0xFFFFFFu) != 0;
                   });
}

enum class MaskFormat { kPng, kTiff, kOther };

MaskFormat sniff(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail<InvalidInput>("mask {} does not exist or cannot be opened", path);
  std::array<unsigned char, 8> magic{};
  in.read(reinterpret_cast<char*>(magic.data()), magic.size());
  static constexpr std::array<unsigned char, 8> kPngMagic = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (in.gcount() == 8 && magic == kPngMagic) return MaskFormat::kPng;
  if (in.gcount() >= 4 && ((magic[0] == 'I' && magic[1] == 'I' && magic[3] == 0 &&
                            (magic[2] == 42 || magic[2] == 43)) ||
                           (magic[0] == 'M' && magic[1] == 'M' && magic[2] == 0 &&
                            (magic[3] == 42 || magic[3] == 43)))) {
    return MaskFormat::kTiff;
  }
  return MaskFormat::kOther;
}

}  // namespace

int64_t TissueMask::tissue_pixels() const {
  return std::count(data.begin(), data.end(), uint8_t{1});
}

TissueMask detect_tissue(const Image8& thumb, double dsx, double dsy, double mpp,
                         const TissueParams& p) {
  validate(thumb, dsx, dsy, mpp, p);
  cv::Mat rgb(thumb.height, thumb.width, CV_8UC3, const_cast<uint8_t*>(thumb.pixels.data()));
  cv::Mat hsv, sat, blurred;
  cv::cvtColor(rgb, hsv, cv::COLOR_RGB2HSV);
  cv::extractChannel(hsv, sat, 1);
  if (p.median_blur > 1) {
    cv::medianBlur(sat, blurred, p.median_blur);
  } else {
    blurred = sat;
  }
  double threshold = p.threshold;
  if (p.threshold < 0) {
    cv::Mat unused;
    double otsu = cv::threshold(blurred, unused, 0, 1, cv::THRESH_BINARY | cv::THRESH_OTSU);
    threshold = std::max(otsu, static_cast<double>(p.min_saturation));
  }
  cv::Mat bin;
  cv::threshold(blurred, bin, threshold, 1, cv::THRESH_BINARY);
  if (p.close_kernel > 1) close_unshifted(bin, p.close_kernel);
  const double um2_per_px = dsx * dsy * mpp * mpp;
  if (p.fill_holes) fill_holes(bin, p.min_hole_area_um2 > 0 ? p.min_hole_area_um2 / um2_per_px : -1);
  if (p.min_area_um2 > 0) drop_small_components(bin, p.min_area_um2 / um2_per_px);

  TissueMask mask;
  mask.width = thumb.width;
  mask.height = thumb.height;
  mask.downsample_x = dsx;
  mask.downsample_y = dsy;
  mask.data.assign(bin.datastart, bin.dataend);
  return mask;
}

TissueMask load_mask(const std::string& path, int64_t slide_width, int64_t slide_height) {
  if (slide_width <= 0 || slide_height <= 0) {
    fail<InvalidInput>("mask {}: slide dimensions {}x{} are invalid", path, slide_width,
                       slide_height);
  }
  MaskFormat format = sniff(path);
  if (format == MaskFormat::kPng) return load_png_mask(path, slide_width, slide_height);
  TissueMask mask;
  std::string openslide_error;
  if (load_openslide_mask(path, slide_width, slide_height, mask, openslide_error)) return mask;
  if (format == MaskFormat::kTiff) return load_tiff_mask(path, slide_width, slide_height);
  if (!openslide_error.empty()) fail<InvalidInput>("cannot read mask {}: {}", path, openslide_error);
  fail<InvalidInput>("mask {} is neither a PNG, a TIFF nor a slide OpenSlide can open", path);
}

Image8 mask_to_image(const TissueMask& mask) {
  Image8 image;
  image.width = mask.width;
  image.height = mask.height;
  image.channels = 1;
  image.pixels.resize(mask.data.size());
  std::transform(mask.data.begin(), mask.data.end(), image.pixels.begin(),
                 [](uint8_t v) { return v ? uint8_t{255} : uint8_t{0}; });
  return image;
}

double iou(const TissueMask& a, const TissueMask& b) {
  int64_t inter = 0, uni = 0;
  const bool same_grid = a.width == b.width && a.height == b.height;
  for (int y = 0; y < a.height; ++y) {
    int by = same_grid ? y : static_cast<int>(std::floor((y + 0.5) * a.downsample_y / b.downsample_y));
    for (int x = 0; x < a.width; ++x) {
      int bx = same_grid ? x : static_cast<int>(std::floor((x + 0.5) * a.downsample_x / b.downsample_x));
      bool in_b = bx >= 0 && by >= 0 && bx < b.width && by < b.height && b.at(bx, by);
      bool in_a = a.at(x, y);
      inter += in_a && in_b;
      uni += in_a || in_b;
    }
  }
  return uni == 0 ? 1.0 : static_cast<double>(inter) / static_cast<double>(uni);
}

void TissueIntegral::build(const TissueMask& mask) {
  width_ = mask.width;
  height_ = mask.height;
  downsample_x_ = mask.downsample_x;
  downsample_y_ = mask.downsample_y;
  sums_.assign(static_cast<size_t>(width_ + 1) * (height_ + 1), 0.0);
  if (mask.empty()) return;
  cv::Mat src(height_, width_, CV_8UC1, const_cast<uint8_t*>(mask.data.data()));
  cv::Mat sums(height_ + 1, width_ + 1, CV_64F, sums_.data());
  cv::integral(src, sums, CV_64F);
}

double TissueIntegral::integral_at(double mx, double my) const {
  mx = std::clamp(mx, 0.0, static_cast<double>(width_));
  my = std::clamp(my, 0.0, static_cast<double>(height_));
  int ix = std::min(static_cast<int>(mx), width_ - 1);
  int iy = std::min(static_cast<int>(my), height_ - 1);
  double fx = mx - ix, fy = my - iy;
  const size_t stride = static_cast<size_t>(width_) + 1;
  auto s = [&](int x, int y) { return sums_[static_cast<size_t>(y) * stride + x]; };
  // The integral of a piecewise-constant function is bilinear inside each cell.
  double s00 = s(ix, iy), s10 = s(ix + 1, iy), s01 = s(ix, iy + 1), s11 = s(ix + 1, iy + 1);
  return s00 + fx * (s10 - s00) + fy * (s01 - s00) + fx * fy * (s11 - s10 - s01 + s00);
}

double TissueIntegral::fraction(double x, double y, double w, double h) const {
  if (!(w > 0) || !(h > 0) || width_ == 0 || height_ == 0) return 0.0;
  double x0 = x / downsample_x_, x1 = (x + w) / downsample_x_;
  double y0 = y / downsample_y_, y1 = (y + h) / downsample_y_;
  double area = integral_at(x1, y1) - integral_at(x0, y1) - integral_at(x1, y0) + integral_at(x0, y0);
  double total = (x1 - x0) * (y1 - y0);
  return std::clamp(area / total, 0.0, 1.0);
}

}  // namespace tessera::patchgen
