#include "common/slide/strip_tiff.h"

#include <tiffio.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>

#include <fmt/format.h>

#include "common/core/error.h"
#include "common/slide/tiff_handle.h"

namespace tessera {

namespace {

// libtiff's handle is not thread-safe: strips are decoded one at a time under `mutex` (the cache
// keeps them, so each is decoded once while it stays there).
class StripSource : public TileSource {
 public:
  StripSource(std::string path, tiff::Handle tif, std::unique_ptr<std::string> message,
              int64_t width, int64_t height, int rows_per_strip)
      : path_(std::move(path)), message_(std::move(message)), tif_(std::move(tif)),
        width_(width), height_(height), rows_per_strip_(rows_per_strip) {}

  void decode(int64_t strip, uint8_t* rgb) override {
    const int64_t rows = std::min<int64_t>(rows_per_strip_, height_ - strip * rows_per_strip_);
    const tmsize_t bytes = static_cast<tmsize_t>(rows * width_ * 3);
    std::lock_guard<std::mutex> lock(mutex_);
    message_->clear();
    if (TIFFReadEncodedStrip(tif_.get(), static_cast<uint32_t>(strip), rgb, bytes) != bytes) {
      fail<IoError>("slide '{}': cannot decode strip {}: {}", path_, strip,
                    message_->empty() ? "short strip" : *message_);
    }
  }

 private:
  std::string path_;
  std::unique_ptr<std::string> message_;  // libtiff reports into it; outlives tif_
  tiff::Handle tif_;
  int64_t width_, height_;
  int rows_per_strip_;
  std::mutex mutex_;
};

}  // namespace

std::unique_ptr<StripSlide> open_strip_tiff(const std::string& path, size_t cache_bytes,
                                            std::string* why_not) {
  auto refuse = [&](std::string reason) -> std::unique_ptr<StripSlide> {
    if (why_not != nullptr) *why_not = std::move(reason);
    return nullptr;
  };
  auto message = std::make_unique<std::string>();
  TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
  TIFFOpenOptionsSetErrorHandlerExtR(options, tiff::keep_message, message.get());
  TIFFOpenOptionsSetWarningHandlerExtR(options, tiff::keep_message, message.get());
  tiff::Handle tif(TIFFOpenExt(path.c_str(), "r", options));
  TIFFOpenOptionsFree(options);
  if (!tif) return refuse(fmt::format("libtiff cannot open it ({})", *message));
  if (TIFFIsTiled(tif.get())) return refuse("tiled, not stripped");
  uint16_t spp = 0, bps = 0, planar = PLANARCONFIG_CONTIG, photometric = 0, compression = 1;
  uint16_t orientation = ORIENTATION_TOPLEFT;
  uint32_t w = 0, h = 0, rows_per_strip = 0;
  TIFFGetFieldDefaulted(tif.get(), TIFFTAG_SAMPLESPERPIXEL, &spp);
  TIFFGetFieldDefaulted(tif.get(), TIFFTAG_BITSPERSAMPLE, &bps);
  TIFFGetFieldDefaulted(tif.get(), TIFFTAG_PLANARCONFIG, &planar);
  TIFFGetFieldDefaulted(tif.get(), TIFFTAG_COMPRESSION, &compression);
  TIFFGetFieldDefaulted(tif.get(), TIFFTAG_ORIENTATION, &orientation);
  TIFFGetField(tif.get(), TIFFTAG_PHOTOMETRIC, &photometric);
  TIFFGetField(tif.get(), TIFFTAG_IMAGEWIDTH, &w);
  TIFFGetField(tif.get(), TIFFTAG_IMAGELENGTH, &h);
  TIFFGetFieldDefaulted(tif.get(), TIFFTAG_ROWSPERSTRIP, &rows_per_strip);
  if (spp != 3 || bps != 8 || planar != PLANARCONFIG_CONTIG) {
    return refuse(fmt::format("{} samples of {} bits, planar config {}", spp, bps, planar));
  }
  const bool jpeg_ycbcr = photometric == PHOTOMETRIC_YCBCR && compression == COMPRESSION_JPEG;
  if (photometric != PHOTOMETRIC_RGB && !jpeg_ycbcr) {
    return refuse(fmt::format("photometric {} is not RGB", photometric));
  }
  if (jpeg_ycbcr) TIFFSetField(tif.get(), TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
  if (orientation != ORIENTATION_TOPLEFT) return refuse(fmt::format("orientation {}", orientation));
  if (w == 0 || h == 0) return refuse("no pixels");
  rows_per_strip = std::min(rows_per_strip, h);
  const uint64_t strip_bytes = uint64_t{w} * rows_per_strip * 3;
  if (strip_bytes > kMaxStripBytes) {
    return refuse(fmt::format("strips of {} MiB decoded (at most {} MiB are read); re-save it with "
                              "smaller strips or tiled",
                              strip_bytes >> 20, kMaxStripBytes >> 20));
  }
  if (static_cast<uint64_t>(TIFFScanlineSize(tif.get())) != uint64_t{w} * 3) {
    return refuse("scanlines are not 3 bytes per pixel");
  }
  const uint32_t strips = TIFFNumberOfStrips(tif.get());
  const uint32_t expected = (h + rows_per_strip - 1) / rows_per_strip;
  uint64_t* offsets = nullptr;
  uint64_t* counts = nullptr;
  if (strips != expected || !TIFFGetField(tif.get(), TIFFTAG_STRIPOFFSETS, &offsets) ||
      !TIFFGetField(tif.get(), TIFFTAG_STRIPBYTECOUNTS, &counts) || !offsets || !counts) {
    return refuse("strip offsets missing or inconsistent");
  }

  auto slide = std::make_unique<StripSlide>();
  slide->dims.emplace_back(w, h);
  slide->properties["openslide.vendor"] = "stripped-tiff";
  float xres = 0, yres = 0;
  uint16_t unit = RESUNIT_NONE;
  if (TIFFGetField(tif.get(), TIFFTAG_XRESOLUTION, &xres) &&
      TIFFGetField(tif.get(), TIFFTAG_YRESOLUTION, &yres) &&
      TIFFGetFieldDefaulted(tif.get(), TIFFTAG_RESOLUTIONUNIT, &unit)) {
    slide->properties["tiff.XResolution"] = fmt::format("{}", xres);
    slide->properties["tiff.YResolution"] = fmt::format("{}", yres);
    slide->properties["tiff.ResolutionUnit"] =
        unit == RESUNIT_CENTIMETER ? "centimeter" : unit == RESUNIT_INCH ? "inch" : "none";
  }
  TileLevel level;
  level.width = w;
  level.height = h;
  level.tile_w = static_cast<int>(w);
  level.tile_h = static_cast<int>(rows_per_strip);
  level.cols = 1;
  level.rows = strips;
  level.codec = TileCodec::kSource;
  level.offsets.assign(offsets, offsets + strips);
  level.sizes.assign(counts, counts + strips);
  for (uint64_t& s : level.sizes) s = std::max<uint64_t>(s, 1);  // every strip is stored
  level.source = std::make_shared<StripSource>(path, std::move(tif), std::move(message), w, h,
                                               static_cast<int>(rows_per_strip));
  std::vector<TileLevel> levels;
  levels.push_back(std::move(level));
  if (cache_bytes == 0) {
    // Strips are short: keep 2048 image rows and four strips (patches read row by row then decode
    // each strip once), at most kMaxDefaultTileCache bytes.
    cache_bytes = std::min<uint64_t>(kMaxDefaultTileCache,
                                     uint64_t{w} * 3 * (2048 + 4 * uint64_t{rows_per_strip}));
  }
  std::string why;
  slide->reader = TileReader::from_levels(path, {path}, std::move(levels), cache_bytes, &why);
  if (!slide->reader) return refuse(why);
  return slide;
}

}  // namespace tessera
