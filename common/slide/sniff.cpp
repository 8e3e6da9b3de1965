#include "common/slide/sniff.h"

#include <tiffio.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "common/slide/tiff_handle.h"

namespace tessera {

namespace {

constexpr const char* kSeeFormats = "the list of supported formats is in docs/formats.md";

int ignore(TIFF*, void*, const char*, const char*, va_list) { return 1; }

uint64_t little(const unsigned char* p, int n, bool big_endian) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) {
    const int k = big_endian ? i : n - 1 - i;
    v = (v << 8) | p[k];
  }
  return v;
}

// Follows the chain of image file directories; a reason when one lies beyond the file's end.
std::string truncated_ifd(const std::string& path, uint64_t file_size) {
  std::ifstream in(path, std::ios::binary);
  unsigned char head[16] = {};
  in.read(reinterpret_cast<char*>(head), sizeof head);
  const bool big_endian = head[0] == 'M';
  const bool bigtiff = little(head + 2, 2, big_endian) == 43;
  uint64_t offset = bigtiff ? little(head + 8, 8, big_endian) : little(head + 4, 4, big_endian);
  for (int dir = 0; offset != 0 && dir < 100000; ++dir) {
    const int count_bytes = bigtiff ? 8 : 2, entry_bytes = bigtiff ? 20 : 12;
    const int next_bytes = bigtiff ? 8 : 4;
    unsigned char buffer[8] = {};
    if (offset + count_bytes > file_size) {
      return fmt::format("truncated: TIFF directory {} starts at byte {} but the file has {} bytes; "
                         "copy the file again",
                         dir, offset, file_size);
    }
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(reinterpret_cast<char*>(buffer), count_bytes);
    const uint64_t entries = little(buffer, count_bytes, big_endian);
    const uint64_t next_at = offset + count_bytes + entries * entry_bytes;
    if (next_at + next_bytes > file_size) {
      return fmt::format("truncated: TIFF directory {} runs past the end of the file ({} bytes); "
                         "copy the file again",
                         dir, file_size);
    }
    in.seekg(static_cast<std::streamoff>(next_at));
    in.read(reinterpret_cast<char*>(buffer), next_bytes);
    offset = little(buffer, next_bytes, big_endian);
  }
  return {};
}

std::string tiff_reason(const std::string& path, uint64_t file_size) {
  if (std::string t = truncated_ifd(path, file_size); !t.empty()) return t;
  TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
  TIFFOpenOptionsSetErrorHandlerExtR(options, ignore, nullptr);
  TIFFOpenOptionsSetWarningHandlerExtR(options, ignore, nullptr);
  tiff::Handle tif(TIFFOpenExt(path.c_str(), "r", options));
  TIFFOpenOptionsFree(options);
  if (!tif) return fmt::format("a damaged TIFF file libtiff cannot open; {}", kSeeFormats);

  uint16_t spp = 1, bps = 1, photometric = 0, compression = 1;
  uint32_t w = 0, h = 0;
  TIFFGetFieldDefaulted(tif.get(), TIFFTAG_SAMPLESPERPIXEL, &spp);
  TIFFGetFieldDefaulted(tif.get(), TIFFTAG_BITSPERSAMPLE, &bps);
  TIFFGetFieldDefaulted(tif.get(), TIFFTAG_COMPRESSION, &compression);
  TIFFGetField(tif.get(), TIFFTAG_PHOTOMETRIC, &photometric);
  TIFFGetField(tif.get(), TIFFTAG_IMAGEWIDTH, &w);
  TIFFGetField(tif.get(), TIFFTAG_IMAGELENGTH, &h);
  const char* description = nullptr;
  TIFFGetField(tif.get(), TIFFTAG_IMAGEDESCRIPTION, &description);
  const std::string desc = description ? description : "";
  const bool tiled = TIFFIsTiled(tif.get());

  // The image data of the first directory must lie inside the file.
  uint64_t* offsets = nullptr;
  uint64_t* counts = nullptr;
  const uint32_t chunks = tiled ? TIFFNumberOfTiles(tif.get()) : TIFFNumberOfStrips(tif.get());
  if (TIFFGetField(tif.get(), tiled ? TIFFTAG_TILEOFFSETS : TIFFTAG_STRIPOFFSETS, &offsets) &&
      TIFFGetField(tif.get(), tiled ? TIFFTAG_TILEBYTECOUNTS : TIFFTAG_STRIPBYTECOUNTS, &counts) &&
      offsets && counts) {
    uint64_t end = 0;
    for (uint32_t i = 0; i < chunks; ++i) end = std::max(end, offsets[i] + counts[i]);
    if (end > file_size) {
      return fmt::format("truncated: the image data runs to byte {} but the file has {} bytes; "
                         "copy the file again",
                         end, file_size);
    }
  }
  // Grayscale pages of the first page's size: one per channel.
  int channels = 0;
  do {
    uint32_t dw = 0, dh = 0;
    uint16_t dspp = 1;
    TIFFGetField(tif.get(), TIFFTAG_IMAGEWIDTH, &dw);
    TIFFGetField(tif.get(), TIFFTAG_IMAGELENGTH, &dh);
    TIFFGetFieldDefaulted(tif.get(), TIFFTAG_SAMPLESPERPIXEL, &dspp);
    if (dw == w && dh == h) channels += dspp;
  } while (TIFFReadDirectory(tif.get()));

  const bool multiplex_tag = desc.find("PerkinElmer-QPI") != std::string::npos ||
                             desc.find("<OME") != std::string::npos ||
                             desc.find("Fluorescence") != std::string::npos;
  if ((spp == 1 && channels > 1) || spp > 4 || (multiplex_tag && spp != 3)) {
    return fmt::format("a multiplex or fluorescence image ({} channels of {} bits{}): tessera reads "
                       "brightfield RGB only (8-bit, 3 channels); {}",
                       std::max<int>(channels, spp), bps,
                       desc.find("PerkinElmer-QPI") != std::string::npos ? ", Vectra QPTIFF" : "",
                       kSeeFormats);
  }
  if (bps != 8) {
    return fmt::format("a {}-bit image ({} sample(s) per pixel): tessera reads 8-bit brightfield RGB "
                       "only; convert it to 8-bit RGB first",
                       bps, spp);
  }
  if (spp == 1 || photometric == PHOTOMETRIC_MINISBLACK || photometric == PHOTOMETRIC_MINISWHITE) {
    return fmt::format("a single-channel (grayscale) image: tessera reads brightfield RGB only; {}",
                       kSeeFormats);
  }
  return fmt::format("a {} {}x{} TIFF (compression {}, {} samples of {} bits) that is no slide "
                     "format OpenSlide or the direct reader take; {}",
                     tiled ? "tiled" : "stripped", w, h, compression, spp, bps, kSeeFormats);
}

}  // namespace

std::string unreadable_reason(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return fmt::format("cannot be read ({})", ec.message());
  if (size == 0) return "an empty file (0 bytes)";
  std::vector<unsigned char> head(std::min<uintmax_t>(size, 4096));
  {
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
    if (!in) return "cannot be read";
  }
  const std::string text(head.begin(), head.end());
  auto starts = [&](const char* magic, size_t n) {
    return head.size() >= n && std::memcmp(head.data(), magic, n) == 0;
  };
  if (starts("II*\0", 4) || starts("MM\0*", 4) || starts("II+\0", 4) || starts("MM\0+", 4)) {
    return tiff_reason(path, size);
  }
  if (text.find("DPUfsImport") != std::string::npos ||
      std::filesystem::path(path).extension() == ".isyntax") {
    return "a Philips iSyntax file, which neither OpenSlide nor tessera reads: convert it first (to "
           "DICOM or a tiled TIFF, e.g. with Philips' iSyntax SDK or isyntax2raw and raw2ometiff)";
  }
  if (head.size() >= 132 && std::memcmp(head.data() + 128, "DICM", 4) == 0) {
    return "a DICOM file the DICOM reader did not take";
  }
  std::string magic;
  for (size_t i = 0; i < std::min<size_t>(8, head.size()); ++i) {
    magic += fmt::format("{}{:02x}", i ? " " : "", head[i]);
  }
  return fmt::format("unsupported or missing format (unknown file type, first bytes {}); {}", magic,
                     kSeeFormats);
}

}  // namespace tessera
