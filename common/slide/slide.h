// A whole-slide image opened with OpenSlide; or one OpenSlide 3.4 cannot open, which the direct
// tile reader reads alone whatever SlideReader says: a DICOM whole-slide image (a folder of one
// series, or one .dcm file; common/slide/dicom_slide.h) or an untiled 8-bit RGB TIFF
// (common/slide/strip_tiff.h). Move-only; the handle is closed by the
// destructor.
// read_rgb may be called from several threads at once (OpenSlide and the direct reader both allow
// concurrent reads); an OpenSlide error is sticky and seen by every thread.
#pragma once

#include <atomic>
#include <map>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/slide/png_io.h"
#include "common/slide/tile_reader.h"

typedef struct _openslide openslide_t;

namespace tessera {

// How a Slide reads pixels: always through OpenSlide, through the direct tile reader
// (common/slide/tile_reader.h; opening fails for a slide it cannot read), or `auto`: direct where it
// can, OpenSlide otherwise. Planning (levels, properties, thumbnails) always uses OpenSlide.
enum class SlideReader { kOpenSlide, kDirect, kAuto };

// "openslide", "direct" or "auto"; throws InvalidInput naming `option` otherwise.
SlideReader parse_slide_reader(const std::string& text, const std::string& option);
const char* to_string(SlideReader reader);

class Slide {
 public:
  // Opens `path`. Throws IoError naming the file with OpenSlide's reason, or the DICOM reader's;
  // for a file neither recognises, what the file is and why it cannot be read
  // (common/slide/sniff.h). Whatever else parsing the slide throws (std::bad_alloc for a size its
  // header claims) is rethrown as IoError naming the file: a bad slide is that slide's failure.
  static Slide open(const std::string& path);
  // Opens `path` reading pixels as `reader` says. With kDirect, a slide the direct reader refuses
  // throws IoError naming the file and the reason. `tile_cache_bytes` bounds the direct reader's
  // decoded tiles (0: TileReader's default).
  static Slide open(const std::string& path, SlideReader reader, size_t tile_cache_bytes = 0);
  // Opens `path` when OpenSlide recognises it; nullopt otherwise, with OpenSlide's error in
  // `error` when it recognised the file but could not open it.
  static std::optional<Slide> try_open(const std::string& path, std::string* error = nullptr);
  Slide(Slide&& other) noexcept;
  Slide& operator=(Slide&& other) noexcept;
  Slide(const Slide&) = delete;
  Slide& operator=(const Slide&) = delete;
  ~Slide();

  const std::string& path() const { return path_; }
  int level_count() const { return static_cast<int>(dims_.size()); }
  int64_t width(int level = 0) const { return dims_[level].first; }
  int64_t height(int level = 0) const { return dims_[level].second; }
  double downsample(int level) const { return downsamples_[level]; }
  const std::vector<double>& downsamples() const { return downsamples_; }
  std::optional<std::string> property(const std::string& name) const;
  std::string vendor() const;

  // "direct" when reads go through the direct tile reader, else "openslide".
  const char* reader() const { return direct_ ? "direct" : "openslide"; }
  // Whether OpenSlide has the slide open (false for DICOM: planning and every read go through the
  // direct reader).
  bool has_openslide() const { return osr_ != nullptr; }
  // Why the direct reader was not used (SlideReader::kAuto on a slide it refuses); else empty.
  const std::string& direct_refusal() const { return direct_refusal_; }
  // The direct reader's counters (all zero without it), and the reads that fell back to OpenSlide
  // because the level position was not a whole pixel (OpenSlide then interpolates; a slide without
  // OpenSlide reads from the nearest whole pixel instead and counts it here too).
  TileReaderStats direct_stats() const;
  int64_t openslide_fallbacks() const { return fallbacks_.load(std::memory_order_relaxed); }
  // The direct tile reader, or nullptr when reads go through OpenSlide.
  const TileReader* direct_reader() const { return direct_.get(); }

  // Reads the w x h region whose top-left corner is level-0 (x, y), at `level`, as RGB into `rgb`
  // (w*h*3 bytes). With the direct reader, when (x, y) / downsample(level) is a whole pixel, the
  // region is cut from decoded tiles (same pixels); otherwise OpenSlide's premultiplied ARGB is
  // converted with argb_to_rgb. Throws IoError
  // naming the file and region when OpenSlide reports an error; after an error the slide is
  // unusable (OpenSlide errors are sticky). OpenSlide's output goes through a buffer each thread
  // keeps and reuses, so reading patch after patch allocates nothing.
  void read_rgb(int64_t x, int64_t y, int level, int w, int h, uint8_t* rgb) const;
  // The same region as OpenSlide's raw premultiplied ARGB (w*h words), for tests and baselines;
  // without OpenSlide, read_rgb's pixels as opaque ARGB.
  void read_argb(int64_t x, int64_t y, int level, int w, int h, uint32_t* argb) const;
  // The whole of `level` as an RGB image (for thumbnails).
  Image8 read_level(int level) const;

 private:
  Slide(openslide_t* osr, std::string path);
  static Slide open_base(const std::string& path, size_t tile_cache_bytes);
  static Slide open_with(const std::string& path, SlideReader reader, size_t tile_cache_bytes);
  static Slide open_dicom(const std::string& path, size_t tile_cache_bytes);
  void check_error(const char* what) const;
  static std::vector<uint32_t>& argb_buffer();  // read_rgb's OpenSlide output, one per thread
  openslide_t* osr_ = nullptr;
  std::string path_;
  std::vector<std::pair<int64_t, int64_t>> dims_;
  std::vector<double> downsamples_;
  std::unique_ptr<TileReader> direct_;  // mutable state behind const reads (its tile cache)
  std::string direct_refusal_;
  std::map<std::string, std::string> properties_;  // without OpenSlide: the DICOM reader's
  mutable std::atomic<int64_t> fallbacks_{0};
};

// Resizes a src_size^2 RGB patch to dst_size^2: area filter when shrinking, bilinear when
// enlarging. The one resampling rule of patchgen and embed's --source wsi.
void resize_patch(const uint8_t* src, int src_size, uint8_t* dst, int dst_size);

// Converts premultiplied ARGB to RGB: opaque pixels keep their bytes exactly; partly transparent
// ones are un-premultiplied (c * 255 / a, rounded); fully transparent pixels (outside the scanned
// area) become white, like an empty glass background.
void argb_to_rgb(const uint32_t* argb, size_t pixels, uint8_t* rgb);

// Where a slide's level-0 resolution came from.
struct SlideMpp {
  double x = 0;
  double y = 0;
  std::string source;  // "openslide.mpp", "tiff.resolution" or "default"
};

// The slide's level-0 micrometres per pixel, from openslide.mpp-x/y, else from the TIFF
// resolution tags (tiff.XResolution/YResolution with tiff.ResolutionUnit centimeter or inch),
// else `default_mpp` when positive; nullopt when none applies.
std::optional<SlideMpp> slide_mpp(const Slide& slide, double default_mpp);

}  // namespace tessera
