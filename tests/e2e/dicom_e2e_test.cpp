// DICOM whole-slide images through patchgen as a user runs it: synthslide's DICOM twins (JPEG
// baseline and lossless JPEG 2000, TILED_FULL and TILED_SPARSE) give the same patches and pixel
// digests as their TIFF at R = 1 and 2; files no reader takes fail with their exact reason, the
// same in the slide table and in tessera-status; hostile files (issue 30) fail their own slide.
#include <gtest/gtest.h>
#include <tiffio.h>

#include <fstream>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "stages/patchgen/digest.h"
#include "tests/e2e/e2e_util.h"
#include "tests/synthslide/dicom_mutants.h"
#include "tests/synthslide/dicom_writer.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::e2e {
namespace {

const std::string kPatchgen = TESSERA_PATCHGEN;
const std::string kStatus = TESSERA_STATUS_EXE;
const std::string kFixtures = std::string(TESSERA_FIXTURES_DIR) + "/openslide-python/";

std::string patchgen(int ranks, const std::string& manifest, const std::string& out) {
  return mpirun(ranks) + kPatchgen + " --manifest " + manifest + " --out " + out +
         " --patch-size 128 --chunk-patches 16 --progress-interval 0.5";
}

TEST(DicomE2E, TwinsGiveTheTiffPatchesAndPixelDigestsAtOneAndTwoRanks) {
  TempDir tmp("dicom_twins");
  // Slide A is read at level 0, slide B (0.25 um/px) at level 1.
  std::vector<synth::SlideSpec> specs(2);
  specs[0].width = 1800, specs[0].height = 1400, specs[0].seed = 100, specs[0].mpp = 0.5;
  specs[1].width = 1600, specs[1].height = 1800, specs[1].seed = 101, specs[1].mpp = 0.25;
  for (size_t i = 0; i < specs.size(); ++i) {
    specs[i].path = tmp / fmt::format("s{}.tif", i);
    synth::write_slide(specs[i]);
  }
  write_text(tmp / "tiff.csv", "slide_id,path\nA,s0.tif\nB,s1.tif\n");
  const char* variants[] = {"jpeg-full", "jpeg-sparse", "j2k-full", "j2k-sparse"};
  for (const char* v : variants) {
    for (size_t i = 0; i < specs.size(); ++i) {
      synth::DicomSpec d;
      d.dir = tmp / fmt::format("{}-s{}", v, i);
      d.codec = std::string(v).rfind("j2k", 0) == 0 ? synth::DicomCodec::kJpeg2000
                                                    : synth::DicomCodec::kJpeg;
      d.sparse = std::string(v).find("sparse") != std::string::npos;
      synth::write_dicom_series(specs[i], d);
    }
    write_text(tmp / fmt::format("{}.csv", v),
               fmt::format("slide_id,path\nA,{0}-s0\nB,{0}-s1\n", v));
  }
  std::string log;
  ASSERT_EQ(run_command(patchgen(2, tmp / "tiff.csv", tmp / "tiff"), &log), 0) << log;
  const auto reference = patchgen::digest_run(tmp / "tiff/patchgen");
  EXPECT_GT(reference.patches, 60);
  for (const char* v : variants) {
    for (int ranks = 1; ranks <= 2; ++ranks) {
      const std::string out = tmp / fmt::format("{}-r{}", v, ranks);
      ASSERT_EQ(run_command(patchgen(ranks, tmp / fmt::format("{}.csv", v), out), &log), 0) << log;
      const auto digest = patchgen::digest_run(out + "/patchgen");
      EXPECT_EQ(digest.patches, reference.patches) << v << " R=" << ranks;
      EXPECT_EQ(digest.index_sha256, reference.index_sha256) << v << " R=" << ranks;
      EXPECT_EQ(digest.pixels_sha256, reference.pixels_sha256) << v << " R=" << ranks;
    }
  }
}

// A stripped TIFF of `pages` pages of `samples` samples of `bits` bits.
void write_tiff(const std::string& path, int pages, int samples, int bits, const char* description) {
  TIFF* tif = TIFFOpen(path.c_str(), "w");
  ASSERT_NE(tif, nullptr);
  std::vector<uint8_t> row(static_cast<size_t>(64) * samples * bits / 8, 0x40);
  for (int p = 0; p < pages; ++p) {
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, 64);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, 48);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, samples);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, bits);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, samples == 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    if (description != nullptr && p == 0) TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, description);
    for (int y = 0; y < 48; ++y) TIFFWriteScanline(tif, row.data(), y, 0);
    TIFFWriteDirectory(tif);
  }
  TIFFClose(tif);
}

TEST(DicomE2E, EachUnreadableKindHasItsReasonInTheSlideTableAndStatus) {
  TempDir tmp("unreadable");
  synth::SlideSpec good;
  good.path = tmp / "good.tif";
  good.width = 2000, good.height = 1500, good.seed = 9;
  synth::write_slide(good);
  write_tiff(tmp / "qptiff.tif", 6, 1, 16, "<PerkinElmer-QPI-ImageDescription/>");
  write_tiff(tmp / "rgb16.tif", 1, 3, 16, nullptr);
  write_tiff(tmp / "gray.tif", 1, 1, 8, nullptr);
  write_text(tmp / "scan.isyntax", "<DataObject ObjectType=\"DPUfsImport\">");
  write_text(tmp / "mystery.bin", "\x01\x02\x03\x04 nothing");
  {
    const std::string bytes = read_file(good.path);
    write_text(tmp / "cut.tif", bytes.substr(0, bytes.size() / 2));
  }
  fs::create_directories(tmp / "thumbnail-only");
  fs::copy_file(kFixtures + "boxes_1.dcm", tmp / "thumbnail-only/boxes_1.dcm");
  synth::DicomSpec series;
  series.dir = tmp / "cut-series";
  synth::write_dicom_series(good, series);
  fs::resize_file(tmp / "cut-series/level-0.dcm", fs::file_size(tmp / "cut-series/level-0.dcm") / 3);
  write_text(tmp / "m.csv",
             "slide_id,path\ngood,good.tif\nqptiff,qptiff.tif\nrgb16,rgb16.tif\ngray,gray.tif\n"
             "isyntax,scan.isyntax\nmystery,mystery.bin\ncut,cut.tif\nthumbnail,thumbnail-only\n"
             "cutseries,cut-series\n");
  std::string log;
  ASSERT_EQ(run_command(patchgen(2, tmp / "m.csv", tmp / "run"), &log), 3) << log;
  h5::File index = h5::File::open(tmp / "run/patchgen/index.h5", h5::Mode::kRead);
  h5::Group slides = index.open_group("slides");
  const auto status = slides.open_dataset("status").read_strings();
  const auto reason = slides.open_dataset("reason").read_strings();
  std::string status_out;
  EXPECT_EQ(run_command(kStatus + " " + (tmp / "run"), &status_out), 0) << status_out;
  const std::vector<std::string> expected = {
      "",
      "a multiplex or fluorescence image (6 channels of 16 bits, Vectra QPTIFF): tessera reads "
      "brightfield RGB only",
      "a 16-bit image (3 sample(s) per pixel)",
      "a single-channel (grayscale) image",
      "Philips iSyntax file, which neither OpenSlide nor tessera reads: convert it first",
      "unknown file type, first bytes 01 02 03 04",
      "truncated",
      "no pyramid level",
      "truncated"};
  EXPECT_EQ(status[0], "ok");
  for (size_t i = 1; i < expected.size(); ++i) {
    EXPECT_EQ(status[i], "failed") << i;
    EXPECT_NE(reason[i].find(expected[i]), std::string::npos) << i << ": " << reason[i];
    // tessera-status prints the slide table's reason as it is.
    EXPECT_NE(status_out.find(reason[i]), std::string::npos) << reason[i] << "\n" << status_out;
  }
}

// Issue 30, items 2, 5 and 6: one hostile DICOM slide ended the whole job. A sequence nested
// 20,000 deep crashed patchgen (SIGSEGV in DCMTK); a SOP Class UID with a byte that is not UTF-8
// failed its slide, then the run (exit 1, no _SUCCESS: the reason quoting the UID could not be
// written as JSON); a Total Pixel Matrix of 4294967295^2 in 1x1 tiles threw std::length_error
// ("unexpected error", exit 1, no file named, the good slide not processed). Each fails its own
// slide only, with a reason naming its file; the good slide is processed; _SUCCESS is valid JSON.
TEST(DicomE2E, HostileSlidesFailAloneAndTheRunCompletes) {
  TempDir tmp("hostile_dicom");
  synth::SlideSpec spec;
  spec.path = tmp / "good.tif";
  spec.width = 1500, spec.height = 1200, spec.seed = 30;
  synth::write_slide(spec);
  std::string manifest = "slide_id,path\n";
  const auto series = [&](const std::string& name) {
    synth::DicomSpec d;
    d.dir = tmp / name;
    synth::write_dicom_series(spec, d);
    manifest += name + "," + name + "\n";
    return d.dir + "/level-0.dcm";
  };
  series("good");
  const auto mutate = [](const std::string& file, const auto& change) {
    write_text(file, change(read_file(file)));
  };
  const std::string nested = series("nested");
  mutate(nested, [](const std::string& b) { return synth::with_nested_sequence(b, 20000, false); });
  const std::string utf8 = series("utf8");
  mutate(utf8, [](const std::string& b) {
    return synth::with_dicom_value(b, synth::dicom_tag(0x0008, 0x0016),
                                   synth::dicom_text_value("1.2.840.10008.5.1.4.1.1.77.1.\xff"));
  });
  const std::string huge = series("huge");
  mutate(huge, [](std::string b) {
    for (uint16_t element : {0x0006, 0x0007}) {
      b = synth::with_dicom_value(b, synth::dicom_tag(0x0048, element),
                                  synth::dicom_uint_value(4294967295u, 4));
    }
    for (uint16_t element : {0x0010, 0x0011}) {
      b = synth::with_dicom_value(b, synth::dicom_tag(0x0028, element), synth::dicom_uint_value(1, 2));
    }
    return b;
  });
  write_text(tmp / "m.csv", manifest);
  std::string log;
  ASSERT_EQ(run_command(patchgen(2, tmp / "m.csv", tmp / "run"), &log), 3) << log;
  const auto summary = nlohmann::json::parse(read_file(tmp / "run/patchgen/_SUCCESS"));
  EXPECT_EQ(summary.at("slides_ok").get<int>(), 1);
  std::map<std::string, std::string> reasons;
  for (const auto& f : summary.at("failed")) {
    reasons[f.at("slide_id").get<std::string>()] = f.at("reason").get<std::string>();
  }
  ASSERT_EQ(reasons.size(), 3u) << summary.dump(2);
  const std::pair<std::string, std::string> expected[] = {
      {"nested", "sequences nested more than 64 deep"},
      {"utf8", "not a whole-slide image"},
      {"huge", "4294967295x4294967295 tiles: more than the 16777216 a level may have"}};
  for (const auto& [id, why] : expected) {
    EXPECT_NE(reasons[id].find(why), std::string::npos) << id << ": " << reasons[id];
    EXPECT_NE(reasons[id].find(tmp / id + "/level-0.dcm"), std::string::npos) << reasons[id];
  }
}

}  // namespace
}  // namespace tessera::e2e

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  tessera::h5::init();
  return RUN_ALL_TESTS();
}
