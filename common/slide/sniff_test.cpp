// Files no reader takes get a reason naming what they are: each kind made here, opened through
// Slide::open as patchgen does.
#include "common/slide/sniff.h"

#include <gtest/gtest.h>
#include <tiffio.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "common/core/error.h"
#include "common/slide/slide.h"
#include "tests/synthslide/synthslide.h"
#include "common/slide/slide_test_support.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

// A stripped (untiled) TIFF of `pages` pages, each w x h with `samples` samples of `bits` bits.
std::string write_tiff(const std::string& name, int pages, int samples, int bits,
                       const char* description = nullptr) {
  const std::string path = (slide_test::scratch_dir() / name).string();
  TIFF* tif = TIFFOpen(path.c_str(), "w");
  const int w = 64, h = 48;
  std::vector<uint8_t> row(static_cast<size_t>(w) * samples * bits / 8, 0x40);
  for (int p = 0; p < pages; ++p) {
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, w);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, h);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, samples);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, bits);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, samples == 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, 16);
    if (description != nullptr && p == 0) TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, description);
    for (int y = 0; y < h; ++y) TIFFWriteScanline(tif, row.data(), y, 0);
    TIFFWriteDirectory(tif);
  }
  TIFFClose(tif);
  return path;
}

void expect_reason(const std::string& path, const std::string& reason) {
  try {
    Slide::open(path, SlideReader::kAuto);
    ADD_FAILURE() << path << " opened";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open slide '" + path + "'"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}

TEST(Sniff, MultiplexQptiffNamesChannelsAndBitDepth) {
  const std::string path = write_tiff("vectra.qptiff", 5, 1, 16,
                                      "<?xml version=\"1.0\"?><PerkinElmer-QPI-ImageDescription>"
                                      "<ImageType>FullResolution</ImageType>"
                                      "</PerkinElmer-QPI-ImageDescription>");
  expect_reason(path, "a multiplex or fluorescence image (5 channels of 16 bits, Vectra QPTIFF)");
  expect_reason(path, "brightfield RGB only");
}

TEST(Sniff, SixteenBitRgbIsRefusedAsSuch) {
  expect_reason(write_tiff("rgb16.tif", 1, 3, 16), "a 16-bit image (3 sample(s) per pixel)");
}

TEST(Sniff, SingleChannelIsRefusedAsSuch) {
  expect_reason(write_tiff("gray.tif", 1, 1, 8), "a single-channel (grayscale) image");
}

TEST(Sniff, ISyntaxSaysConvertItFirst) {
  const std::string path = (slide_test::scratch_dir() / "scan.isyntax").string();
  std::ofstream(path) << "<DataObject ObjectType=\"DPUfsImport\">\n<Attribute Name=\"DICOM_MANUFACTURER\""
                         " Group=\"0x0008\" Element=\"0x0070\" PMSVR=\"IString\">PHILIPS</Attribute>";
  expect_reason(path, "Philips iSyntax");
  expect_reason(path, "convert it first");
}

TEST(Sniff, UnknownFormatPointsAtTheList) {
  const std::string path = (slide_test::scratch_dir() / "mystery.bin").string();
  std::ofstream(path) << "\x01\x02\x03\x04 not a slide at all";
  expect_reason(path, "unsupported or missing format (unknown file type, first bytes 01 02 03 04");
  expect_reason(path, "docs/formats.md");
}

TEST(Sniff, TruncatedTiffIsSaidToBeTruncated) {
  synth::SlideSpec spec;
  spec.path = (slide_test::scratch_dir() / "whole.tif").string();
  spec.width = 1500;
  spec.height = 1200;
  spec.seed = 3;
  synth::write_slide(spec);
  const std::string cut = (slide_test::scratch_dir() / "cut.tif").string();
  fs::copy_file(spec.path, cut);
  fs::resize_file(cut, fs::file_size(spec.path) / 2);
  expect_reason(cut, "truncated");
}

TEST(Sniff, EmptyFile) {
  const std::string path = (slide_test::scratch_dir() / "empty.svs").string();
  std::ofstream{path};
  expect_reason(path, "an empty file");
}

}  // namespace
}  // namespace tessera
