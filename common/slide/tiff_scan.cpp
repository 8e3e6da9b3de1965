// TileReader::open (tile_reader.h): a TIFF's directories probed for the levels the direct reader
// can read (tiled JPEG, 8-bit RGB or YCbCr, top-left), each matched to an OpenSlide level by its
// dimensions, with its tile offsets and JPEG tables. dicom_scan.cpp does the same for DICOM.
#include <tiffio.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/slide/tile_reader.h"
#include "common/slide/tiff_handle.h"

namespace tessera {

namespace {

// Why the current directory of `tif` cannot be a direct level; empty when it can, with whether
// its JPEG streams are decoded as RGB (TIFF's photometric: RGB or YCbCr) in `jpeg_rgb`.
std::string unsuitable(TIFF* tif, bool* jpeg_rgb) {
  uint16_t compression = 0, photometric = 0, spp = 0, bps = 0, planar = PLANARCONFIG_CONTIG;
  uint16_t orientation = ORIENTATION_TOPLEFT;
  if (!TIFFIsTiled(tif)) return "not tiled";
  TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
  if (compression != COMPRESSION_JPEG) return fmt::format("compression {} is not JPEG", compression);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bps);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
  if (spp != 3 || bps != 8 || planar != PLANARCONFIG_CONTIG) {
    return fmt::format("{} samples of {} bits, planar config {}", spp, bps, planar);
  }
  if (!TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric) ||
      (photometric != PHOTOMETRIC_YCBCR && photometric != PHOTOMETRIC_RGB)) {
    return fmt::format("photometric {} is neither YCbCr nor RGB", photometric);
  }
  *jpeg_rgb = photometric == PHOTOMETRIC_RGB;
  TIFFGetFieldDefaulted(tif, TIFFTAG_ORIENTATION, &orientation);
  if (orientation != ORIENTATION_TOPLEFT) return fmt::format("orientation {}", orientation);
  return {};
}

}  // namespace

std::unique_ptr<TileReader> TileReader::open(
    const std::string& path, const std::vector<std::pair<int64_t, int64_t>>& levels,
    size_t cache_bytes, std::string* why_not) {
  auto refuse = [&](std::string reason) -> std::unique_ptr<TileReader> {
    if (why_not != nullptr) *why_not = std::move(reason);
    return nullptr;
  };
  if (levels.empty()) return refuse("no levels");
  std::string message;
  TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
  TIFFOpenOptionsSetErrorHandlerExtR(options, tiff::keep_message, &message);
  TIFFOpenOptionsSetWarningHandlerExtR(options, tiff::keep_message, &message);
  tiff::Handle tif(TIFFOpenExt(path.c_str(), "r", options));
  TIFFOpenOptionsFree(options);
  if (!tif) return refuse(fmt::format("libtiff cannot open it ({})", message));

  // Every directory with its dimensions, then each OpenSlide level matched by dimensions.
  struct Dir {
    tdir_t index;
    int64_t width, height;
  };
  std::vector<Dir> dirs;
  do {
    uint32_t w = 0, h = 0;
    TIFFGetField(tif.get(), TIFFTAG_IMAGEWIDTH, &w);
    TIFFGetField(tif.get(), TIFFTAG_IMAGELENGTH, &h);
    dirs.push_back({TIFFCurrentDirectory(tif.get()), w, h});
  } while (TIFFReadDirectory(tif.get()));

  std::vector<TileLevel> found_levels;
  for (size_t l = 0; l < levels.size(); ++l) {
    const auto [lw, lh] = levels[l];
    std::string reason = "no TIFF directory has its dimensions";
    bool found = false;
    for (const Dir& d : dirs) {
      if (d.width != lw || d.height != lh) continue;
      if (!TIFFSetDirectory(tif.get(), d.index)) continue;
      TileLevel level;
      reason = unsuitable(tif.get(), &level.jpeg_rgb);
      if (!reason.empty()) continue;
      level.width = lw;
      level.height = lh;
      uint32_t tw = 0, th = 0;
      TIFFGetField(tif.get(), TIFFTAG_TILEWIDTH, &tw);
      TIFFGetField(tif.get(), TIFFTAG_TILELENGTH, &th);
      if (tw == 0 || th == 0 || tw > 8192 || th > 8192) {
        reason = fmt::format("tile size {}x{}", tw, th);
        continue;
      }
      level.tile_w = static_cast<int>(tw);
      level.tile_h = static_cast<int>(th);
      level.cols = (lw + tw - 1) / tw;
      level.rows = (lh + th - 1) / th;
      const auto tiles = static_cast<size_t>(TIFFNumberOfTiles(tif.get()));
      uint64_t* offsets = nullptr;
      uint64_t* sizes = nullptr;
      if (tiles != static_cast<size_t>(level.cols * level.rows) ||
          !TIFFGetField(tif.get(), TIFFTAG_TILEOFFSETS, &offsets) ||
          !TIFFGetField(tif.get(), TIFFTAG_TILEBYTECOUNTS, &sizes) || !offsets || !sizes) {
        reason = "tile offsets missing or inconsistent";
        continue;
      }
      level.offsets.assign(offsets, offsets + tiles);
      level.sizes.assign(sizes, sizes + tiles);
      uint32_t tables_size = 0;
      void* tables = nullptr;
      if (TIFFGetField(tif.get(), TIFFTAG_JPEGTABLES, &tables_size, &tables) && tables &&
          tables_size >= 4) {
        const auto* t = static_cast<const uint8_t*>(tables);
        level.tables.assign(t, t + tables_size - 2);  // without EOI: the tile's stream follows
      }
      found_levels.push_back(std::move(level));
      found = true;
      break;
    }
    if (!found) return refuse(fmt::format("level {} ({}x{}): {}", l, lw, lh, reason));
  }
  tif.reset();
  return from_levels(path, {path}, std::move(found_levels), cache_bytes, why_not);
}

}  // namespace tessera
