#include "tests/synthslide/synthslide.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <tiffio.h>
#include <unistd.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <system_error>

#include "common/core/error.h"
#include "common/slide/png_io.h"
#include "tests/synthslide/tile_renderer.h"
#include "tests/synthslide/tissue_classes.h"
#include "tests/synthslide/tissue_layout.h"

namespace tessera::synth {
namespace {

constexpr int64_t kMaxSide = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxMaskPixels = int64_t{1} << 28;
constexpr int64_t kSmallestLevelSide = 1024;
constexpr double kClassicTiffLimit = 2.0 * 1024 * 1024 * 1024;

void validate(const SlideSpec& s) {
  if (s.path.empty()) fail<InvalidInput>("invalid slide spec: output path is empty");
  if (s.width < 1 || s.height < 1 || s.width > kMaxSide || s.height > kMaxSide) {
    fail<InvalidInput>("invalid slide spec for '{}': size {}x{} out of range 1..{}", s.path,
                       s.width, s.height, kMaxSide);
  }
  if (s.tile_size < 16 || s.tile_size > 4096 || s.tile_size % 16 != 0) {
    fail<InvalidInput>(
        "invalid slide spec for '{}': tile size {} is not a multiple of 16 in 16..4096", s.path,
        s.tile_size);
  }
  if (s.jpeg_quality < 1 || s.jpeg_quality > 100) {
    fail<InvalidInput>("invalid slide spec for '{}': JPEG quality {} outside 1..100", s.path,
                       s.jpeg_quality);
  }
  if (!(s.mpp > 0.0) || !std::isfinite(s.mpp)) {
    fail<InvalidInput>("invalid slide spec for '{}': mpp {} is not a positive number", s.path,
                       s.mpp);
  }
  if (!(s.tissue_fraction >= 0.0 && s.tissue_fraction <= 1.0)) {
    fail<InvalidInput>("invalid slide spec for '{}': tissue fraction {} outside [0, 1]", s.path,
                       s.tissue_fraction);
  }
  if (s.mask_downsample < 1) {
    fail<InvalidInput>("invalid slide spec for '{}': mask downsample {} < 1", s.path,
                       s.mask_downsample);
  }
  for (const int c : s.region_classes) {
    if (c < 1 || c > kTissueClasses) {
      fail<InvalidInput>("invalid slide spec for '{}': tissue class {} outside 1..{}", s.path, c,
                         kTissueClasses);
    }
  }
  if (!s.class_mask_path.empty() && s.region_classes.empty()) {
    fail<InvalidInput>("invalid slide spec for '{}': a class mask needs tissue classes", s.path);
  }
  for (const int v : s.stain_offset) {
    if (v < -64 || v > 64) {
      fail<InvalidInput>("invalid slide spec for '{}': stain offset {} outside -64..64", s.path, v);
    }
  }
  const int64_t cells = ((s.width + s.mask_downsample - 1) / s.mask_downsample) *
                        ((s.height + s.mask_downsample - 1) / s.mask_downsample);
  if (cells > kMaxMaskPixels) {
    fail<InvalidInput>("invalid slide spec for '{}': mask grid of {} pixels is too large; raise "
                       "the mask downsample above {}",
                       s.path, cells, s.mask_downsample);
  }
}

// Collects libtiff's error messages for one handle, so exceptions can carry them.
int collect_tiff_error(TIFF*, void* user_data, const char* module, const char* format,
                       va_list args) {
  char buffer[512];
  std::vsnprintf(buffer, sizeof buffer, format, args);
  auto* errors = static_cast<std::string*>(user_data);
  if (!errors->empty()) *errors += "; ";
  *errors += module != nullptr ? fmt::format("{}: {}", module, buffer) : std::string(buffer);
  return 1;
}

int ignore_tiff_warning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

struct TiffCloser {
  void operator()(TIFF* tif) const noexcept { TIFFClose(tif); }
};

// Removes the temporary file unless released; never throws.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (!path_.empty()) {
      std::error_code ignored;
      std::filesystem::remove(path_, ignored);
    }
  }
  const std::string& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

class TiffWriter {
 public:
  TiffWriter(const std::string& path, const std::string& display_path, bool bigtiff)
      : display_path_(display_path) {
    std::unique_ptr<TIFFOpenOptions, void (*)(TIFFOpenOptions*)> options(TIFFOpenOptionsAlloc(),
                                                                         TIFFOpenOptionsFree);
    TIFFOpenOptionsSetErrorHandlerExtR(options.get(), collect_tiff_error, &errors_);
    TIFFOpenOptionsSetWarningHandlerExtR(options.get(), ignore_tiff_warning, nullptr);
    tif_.reset(TIFFOpenExt(path.c_str(), bigtiff ? "w8l" : "wl", options.get()));
    if (!tif_) fail<IoError>("cannot create TIFF '{}': {}", display_path_, errors_);
  }
  // Not movable: libtiff holds the address of errors_.
  TiffWriter(const TiffWriter&) = delete;
  TiffWriter& operator=(const TiffWriter&) = delete;

  TIFF* get() const { return tif_.get(); }

  void check(bool ok, const char* what) const {
    if (!ok) fail<IoError>("cannot write TIFF '{}': {} failed: {}", display_path_, what, errors_);
  }

  // Closes the file; TIFFClose reports no status, so errors collected while flushing are checked.
  void close() {
    tif_.reset();
    if (!errors_.empty()) fail<IoError>("cannot write TIFF '{}': {}", display_path_, errors_);
  }

 private:
  std::string display_path_;
  std::string errors_;  // must outlive tif_, which reports into it
  std::unique_ptr<TIFF, TiffCloser> tif_;
};

void set_level_tags(const TiffWriter& writer, const SlideSpec& spec, int level, int64_t width,
                    int64_t height) {
  TIFF* tif = writer.get();
  bool ok = TIFFSetField(tif, TIFFTAG_SUBFILETYPE, level == 0 ? 0 : FILETYPE_REDUCEDIMAGE) &&
            TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, static_cast<uint32_t>(width)) &&
            TIFFSetField(tif, TIFFTAG_IMAGELENGTH, static_cast<uint32_t>(height)) &&
            TIFFSetField(tif, TIFFTAG_TILEWIDTH, static_cast<uint32_t>(spec.tile_size)) &&
            TIFFSetField(tif, TIFFTAG_TILELENGTH, static_cast<uint32_t>(spec.tile_size)) &&
            TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8) &&
            TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 3) &&
            TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG) &&
            TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_JPEG) &&
            TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_YCBCR) &&
            TIFFSetField(tif, TIFFTAG_YCBCRSUBSAMPLING, 2, 2) &&
            TIFFSetField(tif, TIFFTAG_JPEGQUALITY, spec.jpeg_quality) &&
            TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
  if (ok && level == 0) {
    std::string description = fmt::format("tessera synthslide seed={} tissue_fraction={}",
                                          spec.seed, spec.tissue_fraction);
    if (!spec.region_classes.empty()) {
      description += fmt::format(" regions={}", fmt::join(spec.region_classes, ","));
    }
    ok = TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, description.c_str());
  }
  if (ok && spec.write_resolution) {
    const double pixels_per_cm = 10000.0 / (spec.mpp * std::ldexp(1.0, level));
    ok = TIFFSetField(tif, TIFFTAG_XRESOLUTION, pixels_per_cm) &&
         TIFFSetField(tif, TIFFTAG_YRESOLUTION, pixels_per_cm) &&
         TIFFSetField(tif, TIFFTAG_RESOLUTIONUNIT, RESUNIT_CENTIMETER);
  }
  writer.check(ok, "setting tags");
  const auto expected = static_cast<tmsize_t>(spec.tile_size) * spec.tile_size * 3;
  if (TIFFTileSize(tif) != expected) {
    fail<IoError>("cannot write TIFF '{}': libtiff expects {} bytes per tile, not {}", spec.path,
                  TIFFTileSize(tif), expected);
  }
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> level_dimensions(int64_t width, int64_t height) {
  std::vector<std::pair<int64_t, int64_t>> dims{{width, height}};
  for (int level = 1; std::max(dims.back().first, dims.back().second) >= kSmallestLevelSide;
       ++level) {
    const int64_t scale = int64_t{1} << level;
    dims.emplace_back((width + scale - 1) / scale, (height + scale - 1) / scale);
  }
  return dims;
}

SlideSummary write_slide(const SlideSpec& spec) {
  validate(spec);
  SlideSummary summary;
  summary.level_dims = level_dimensions(spec.width, spec.height);

  // Compressed 4:2:0 JPEG stays below 1.5 bytes per pixel, the size of its raw samples.
  double bound = 65536.0;
  for (const auto& [w, h] : summary.level_dims) bound += 1.5 * static_cast<double>(w) * h;
  summary.bigtiff = spec.force_bigtiff || bound > kClassicTiffLimit;

  const TissueLayout layout(spec.width, spec.height, spec.mask_downsample, spec.tissue_fraction,
                            spec.seed);
  summary.tissue_fraction_actual = layout.tissue_fraction();
  std::optional<ClassMap> classes;
  if (!spec.region_classes.empty()) {
    classes.emplace(layout, spec.region_classes, spec.seed);
    summary.class_fractions = classes->fractions();
  }
  const TileRenderer renderer(layout, spec.width, spec.height, spec.seed,
                              classes ? &*classes : nullptr, spec.stain_offset);

  TempFile temp(spec.path + ".partial-" + std::to_string(::getpid()));
  TiffWriter writer(temp.path(), spec.path, summary.bigtiff);
  std::vector<uint8_t> tile(static_cast<size_t>(spec.tile_size) * spec.tile_size * 3);
  for (size_t level = 0; level < summary.level_dims.size(); ++level) {
    const auto [w, h] = summary.level_dims[level];
    set_level_tags(writer, spec, static_cast<int>(level), w, h);
    for (int64_t y = 0; y < h; y += spec.tile_size) {
      for (int64_t x = 0; x < w; x += spec.tile_size) {
        renderer.render(static_cast<int>(level), w, h, x, y, spec.tile_size, tile.data());
        writer.check(TIFFWriteTile(writer.get(), tile.data(), static_cast<uint32_t>(x),
                                   static_cast<uint32_t>(y), 0, 0) >= 0,
                     "TIFFWriteTile");
      }
    }
    writer.check(TIFFWriteDirectory(writer.get()) == 1, "TIFFWriteDirectory");
    spdlog::debug("synthslide '{}': level {} ({}x{}) written", spec.path, level, w, h);
  }
  writer.close();

  std::error_code ec;
  std::filesystem::rename(temp.path(), spec.path, ec);
  if (ec) fail<IoError>("cannot rename '{}' to '{}': {}", temp.path(), spec.path, ec.message());
  temp.release();
  summary.bytes = std::filesystem::file_size(spec.path, ec);
  if (ec) fail<IoError>("cannot stat written TIFF '{}': {}", spec.path, ec.message());

  if (!spec.mask_path.empty()) write_png(spec.mask_path, layout.mask());
  if (!spec.class_mask_path.empty()) write_png(spec.class_mask_path, classes->mask());
  return summary;
}

}  // namespace tessera::synth
