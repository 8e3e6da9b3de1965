// DICOM whole-slide images through Slide and the direct reader: synthslide's DICOM twins against
// their TIFF (every level, random regions crossing tile borders; JPEG baseline, lossless JPEG 2000,
// uncompressed; TILED_FULL and TILED_SPARSE), the written files checked by pydicom and dcmdump, the
// real openslide-python DICOM pair, and each refusal with its reason (files made here with DCMTK).
#include "common/slide/dicom_slide.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcpixel.h>
#include <dcmtk/dcmdata/dcpixseq.h>
#include <dcmtk/dcmdata/dcpxitem.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "common/core/error.h"
#include "common/slide/slide.h"
#include "tests/synthslide/dicom_writer.h"
#include "tests/synthslide/synthslide.h"
#include "common/slide/slide_test_support.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using slide_test::kFixtures;

// The TIFF slide and its DICOM twins, written once.
struct Twins {
  synth::SlideSpec spec;
  std::map<std::string, std::string> dicom;  // variant -> folder
};

const Twins& twins() {
  static const Twins t = [] {
    Twins out;
    out.spec.path = (slide_test::scratch_dir() / "twin.tif").string();
    out.spec.width = 2088;  // 40- and 52-pixel edge tiles; levels 1044x666 and 522x333 (downsamples 2, 4)
    out.spec.height = 1332;
    out.spec.seed = 11;
    out.spec.mpp = 0.5;
    synth::write_slide(out.spec);
    struct Variant {
      const char* name;
      synth::DicomCodec codec;
      bool sparse;
    };
    for (const Variant& v : {Variant{"jpeg-full", synth::DicomCodec::kJpeg, false},
                             Variant{"jpeg-sparse", synth::DicomCodec::kJpeg, true},
                             Variant{"j2k-full", synth::DicomCodec::kJpeg2000, false},
                             Variant{"j2k-sparse", synth::DicomCodec::kJpeg2000, true},
                             Variant{"raw-full", synth::DicomCodec::kRaw, false}}) {
      synth::DicomSpec d;
      d.dir = (slide_test::scratch_dir() / v.name).string();
      d.codec = v.codec;
      d.sparse = v.sparse;
      synth::write_dicom_series(out.spec, d);
      out.dicom[v.name] = d.dir;
    }
    return out;
  }();
  return t;
}

std::vector<uint8_t> region(const Slide& s, int level, int64_t x, int64_t y, int w, int h) {
  std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
  s.read_rgb(x, y, level, w, h, rgb.data());
  return rgb;
}

TEST(DicomSlide, TwinsHaveTheTiffPixelsOnEveryLevelAndRegion) {
  const Twins& t = twins();
  const Slide tiff = Slide::open(t.spec.path, SlideReader::kDirect);
  for (const auto& [name, dir] : t.dicom) {
    SCOPED_TRACE(name);
    // DICOM is read directly whatever the reader asked for.
    const Slide dicom = Slide::open(dir, SlideReader::kOpenSlide);
    EXPECT_STREQ(dicom.reader(), "direct");
    EXPECT_FALSE(dicom.has_openslide());
    EXPECT_EQ(dicom.vendor(), "dicom");
    ASSERT_EQ(dicom.level_count(), tiff.level_count());
    for (int l = 0; l < tiff.level_count(); ++l) {
      EXPECT_EQ(dicom.width(l), tiff.width(l));
      EXPECT_EQ(dicom.height(l), tiff.height(l));
      EXPECT_DOUBLE_EQ(dicom.downsample(l), tiff.downsample(l));
      EXPECT_EQ(dicom.read_level(l).pixels, tiff.read_level(l).pixels) << "level " << l;
    }
    const auto mpp = slide_mpp(dicom, 0);
    ASSERT_TRUE(mpp.has_value());
    EXPECT_DOUBLE_EQ(mpp->x, 0.5);
    EXPECT_DOUBLE_EQ(mpp->y, 0.5);
    std::mt19937_64 rng(5);
    for (int i = 0; i < 60; ++i) {
      const int level = static_cast<int>(rng() % tiff.level_count());
      const int64_t ds = static_cast<int64_t>(tiff.downsample(level));
      const int w = 1 + static_cast<int>(rng() % 700), h = 1 + static_cast<int>(rng() % 700);
      const int64_t x = (static_cast<int64_t>(rng() % (tiff.width(level) + 200)) - 100) * ds;
      const int64_t y = (static_cast<int64_t>(rng() % (tiff.height(level) + 200)) - 100) * ds;
      ASSERT_EQ(region(dicom, level, x, y, w, h), region(tiff, level, x, y, w, h))
          << "level " << level << " at " << x << "," << y << " " << w << "x" << h;
    }
    EXPECT_EQ(dicom.openslide_fallbacks(), 0);
  }
}

TEST(DicomSlide, WrittenSeriesIsValidForPydicomAndDcmdump) {
  const Twins& t = twins();
  const fs::path script = slide_test::scratch_dir() / "validate.py";
  std::ofstream(script) << R"(import sys, pydicom
from pydicom.encaps import generate_pixel_data_frame
for path in sys.argv[1:]:
    ds = pydicom.dcmread(path)
    assert ds.SOPClassUID == '1.2.840.10008.5.1.4.1.1.77.1.6', ds.SOPClassUID
    assert ds.Modality == 'SM' and ds.ImageType[2] == 'VOLUME'
    n = int(ds.NumberOfFrames)
    assert n > 0
    if ds.file_meta.TransferSyntaxUID.is_encapsulated:
        frames = list(generate_pixel_data_frame(ds.PixelData, n))
        assert len(frames) == n, (len(frames), n)
        if ds.file_meta.TransferSyntaxUID == '1.2.840.10008.1.2.4.50':
            assert all(f[:2] == b'\xff\xd8' for f in frames)
        else:
            assert all(f[:4] == b'\xff\x4f\xff\x51' for f in frames)
    else:
        assert len(ds.PixelData) == n * ds.Rows * ds.Columns * 3
    if ds.DimensionOrganizationType == 'TILED_SPARSE':
        assert len(ds.PerFrameFunctionalGroupsSequence) == n
    spacing = ds.SharedFunctionalGroupsSequence[0].PixelMeasuresSequence[0].PixelSpacing
    assert float(spacing[0]) > 0
print('ok', len(sys.argv) - 1)
)";
  for (const auto& [name, dir] : t.dicom) {
    std::string files;
    for (const auto& e : fs::directory_iterator(dir)) files += " '" + e.path().string() + "'";
    const std::string python = "/usr/bin/python3 '" + script.string() + "'" + files;
    EXPECT_EQ(std::system(python.c_str()), 0) << name << ": " << python;
    const std::string dcmdump = "dcmdump -q -E" + files + " > /dev/null";
    EXPECT_EQ(std::system(dcmdump.c_str()), 0) << name << ": " << dcmdump;
  }
}

TEST(DicomSlide, SameSpecGivesIdenticalFiles) {
  const Twins& t = twins();
  synth::DicomSpec again;
  again.dir = (slide_test::scratch_dir() / "jpeg-sparse-again").string();
  again.sparse = true;
  synth::write_dicom_series(t.spec, again);
  for (const char* f : {"level-0.dcm", "level-1.dcm", "level-2.dcm"}) {
    std::ifstream a(fs::path(t.dicom.at("jpeg-sparse")) / f, std::ios::binary);
    std::ifstream b(fs::path(again.dir) / f, std::ios::binary);
    const std::string ca((std::istreambuf_iterator<char>(a)), {});
    const std::string cb((std::istreambuf_iterator<char>(b)), {});
    EXPECT_FALSE(ca.empty());
    EXPECT_EQ(ca, cb) << f;
  }
}

TEST(DicomSlide, ConverterFileWithoutOrganizationOrSpacingReadsAsTiledFull) {
  const Twins& t = twins();
  synth::DicomSpec bare;
  bare.dir = (slide_test::scratch_dir() / "converter").string();
  bare.write_organization = false;
  bare.write_spacing = false;
  synth::write_dicom_series(t.spec, bare);
  const Slide dicom = Slide::open(bare.dir);
  const Slide tiff = Slide::open(t.spec.path, SlideReader::kDirect);
  EXPECT_EQ(dicom.read_level(1).pixels, tiff.read_level(1).pixels);
  EXPECT_FALSE(slide_mpp(dicom, 0).has_value());  // the manifest's mpp or --default-mpp then
  EXPECT_EQ(slide_mpp(dicom, 0.25)->source, "default");
}

TEST(DicomSlide, OneFileIsASlide) {
  const Twins& t = twins();
  const Slide one = Slide::open(t.dicom.at("jpeg-full") + "/level-1.dcm");
  EXPECT_EQ(one.level_count(), 1);
  EXPECT_EQ(one.width(), (t.spec.width + 1) / 2);  // level 1: ceil(width / 2)
  EXPECT_DOUBLE_EQ(slide_mpp(one, 0)->x, 1.0);
}

// ---- the real DICOM pair of openslide-python's tests (a VOLUME and its THUMBNAIL) ----

TEST(DicomSlide, RealPixelMedFilesOpenAndTheThumbnailIsSkipped) {
  const fs::path dir = slide_test::scratch_dir() / "boxes";
  fs::create_directories(dir);
  fs::copy_file(kFixtures + "boxes_0.dcm", dir / "boxes_0.dcm", fs::copy_options::overwrite_existing);
  fs::copy_file(kFixtures + "boxes_1.dcm", dir / "boxes_1.dcm", fs::copy_options::overwrite_existing);
  const Slide folder = Slide::open(dir.string());
  const Slide file = Slide::open(kFixtures + "boxes_0.dcm");
  for (const Slide* s : {&folder, &file}) {
    EXPECT_EQ(s->vendor(), "dicom");
    ASSERT_EQ(s->level_count(), 1);  // boxes_1.dcm is a THUMBNAIL
    EXPECT_EQ(s->width(), 16);
    EXPECT_EQ(s->height(), 16);
    EXPECT_NEAR(slide_mpp(*s, 0)->x, 0.499, 1e-9);
  }
  // PixelMed converted small.svs: the same JPEG tile, so the same pixels as the SVS read directly
  // (its 64x64 frame holds the 16x16 image).
  const Slide svs = Slide::open(kFixtures + "small.svs", SlideReader::kDirect);
  EXPECT_EQ(folder.read_level(0).pixels, svs.read_level(0).pixels);
  EXPECT_EQ(file.read_level(0).pixels, svs.read_level(0).pixels);
}

void expect_refusal(const std::string& path, const std::string& reason) {
  try {
    Slide::open(path, SlideReader::kAuto);
    ADD_FAILURE() << path << " opened";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open slide '" + path + "'"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}

TEST(DicomSlide, ThumbnailAloneIsNoPyramid) {
  expect_refusal(kFixtures + "boxes_1.dcm", "no pyramid level");
}

// A small DICOM file made with DCMTK: `frames` uncompressed (or, with `xfer` encapsulated, one
// fragment each of dummy bytes) 16x16 frames of value 10 * (frame + 1).
struct Minimal {
  std::string sop_class = UID_VLWholeSlideMicroscopyImageStorage;
  E_TransferSyntax xfer = EXS_LittleEndianExplicit;
  int width = 16, height = 16, frames = 1, bits = 8, samples = 3, focal_planes = 1;
  std::string organization = "TILED_FULL";
  std::vector<std::pair<int, int>> positions;  // TILED_SPARSE: 1-based column, row per frame
  std::string concatenation_uid;
  int concatenation_total = 0, concatenation_number = 0, frame_offset = 0;
  int value_base = 0;  // frame f holds value_base + 10 * (f + 1)
  std::string instance_uid = "2.25.1";
};

void write_minimal(const std::string& path, const Minimal& m) {
  DcmFileFormat format;
  DcmDataset* ds = format.getDataset();
  ds->putAndInsertString(DCM_SOPClassUID, m.sop_class.c_str());
  ds->putAndInsertString(DCM_SOPInstanceUID, m.instance_uid.c_str());
  ds->putAndInsertString(DCM_SeriesInstanceUID, "2.25.2");
  ds->putAndInsertString(DCM_Modality, m.sop_class == UID_VLWholeSlideMicroscopyImageStorage ? "SM" : "CT");
  ds->putAndInsertString(DCM_ImageType, "ORIGINAL\\PRIMARY\\VOLUME\\NONE");
  ds->putAndInsertString(DCM_DimensionOrganizationType, m.organization.c_str());
  ds->putAndInsertUint16(DCM_SamplesPerPixel, static_cast<Uint16>(m.samples));
  ds->putAndInsertString(DCM_PhotometricInterpretation, m.samples == 3 ? "RGB" : "MONOCHROME2");
  ds->putAndInsertUint16(DCM_PlanarConfiguration, 0);
  ds->putAndInsertString(DCM_NumberOfFrames, std::to_string(m.frames).c_str());
  ds->putAndInsertUint16(DCM_Rows, 16);
  ds->putAndInsertUint16(DCM_Columns, 16);
  ds->putAndInsertUint16(DCM_BitsAllocated, static_cast<Uint16>(m.bits));
  ds->putAndInsertUint16(DCM_BitsStored, static_cast<Uint16>(m.bits));
  ds->putAndInsertUint16(DCM_HighBit, static_cast<Uint16>(m.bits - 1));
  ds->putAndInsertUint16(DCM_PixelRepresentation, 0);
  ds->putAndInsertUint32(DCM_TotalPixelMatrixColumns, static_cast<Uint32>(m.width));
  ds->putAndInsertUint32(DCM_TotalPixelMatrixRows, static_cast<Uint32>(m.height));
  ds->putAndInsertUint32(DCM_TotalPixelMatrixFocalPlanes, static_cast<Uint32>(m.focal_planes));
  if (!m.concatenation_uid.empty()) {
    ds->putAndInsertString(DCM_ConcatenationUID, m.concatenation_uid.c_str());
    ds->putAndInsertString(DCM_InConcatenationTotalNumber,
                           std::to_string(m.concatenation_total).c_str());
    ds->putAndInsertUint16(DCM_InConcatenationNumber, static_cast<Uint16>(m.concatenation_number));
    ds->putAndInsertUint32(DCM_ConcatenationFrameOffsetNumber, static_cast<Uint32>(m.frame_offset));
  }
  if (!m.positions.empty()) {
    for (size_t f = 0; f < m.positions.size(); ++f) {
      DcmItem* group = nullptr;
      DcmItem* position = nullptr;
      ds->findOrCreateSequenceItem(DCM_PerFrameFunctionalGroupsSequence, group, static_cast<int>(f));
      group->findOrCreateSequenceItem(DCM_PlanePositionSlideSequence, position, 0);
      position->putAndInsertString(DCM_ColumnPositionInTotalImagePixelMatrix,
                                   std::to_string(m.positions[f].first).c_str());
      position->putAndInsertString(DCM_RowPositionInTotalImagePixelMatrix,
                                   std::to_string(m.positions[f].second).c_str());
    }
  }
  const size_t frame_bytes = 16 * 16 * static_cast<size_t>(m.samples) * (m.bits / 8);
  auto* pixels = new DcmPixelData(DCM_PixelData);
  if (m.xfer == EXS_LittleEndianExplicit) {
    std::vector<uint8_t> data;
    for (int f = 0; f < m.frames; ++f) {
      data.insert(data.end(), frame_bytes, static_cast<uint8_t>(m.value_base + 10 * (f + 1)));
    }
    pixels->putUint8Array(data.data(), static_cast<unsigned long>(data.size()));
  } else {
    auto* sequence = new DcmPixelSequence(DcmTag(DCM_PixelData, EVR_OB));
    sequence->insert(new DcmPixelItem(DcmTag(DCM_Item, EVR_OB)));
    DcmOffsetList offsets;
    std::vector<uint8_t> dummy(64, 0x55);
    for (int f = 0; f < m.frames; ++f) sequence->storeCompressedFrame(offsets, dummy.data(), 64, 0);
    pixels->putOriginalRepresentation(m.xfer, nullptr, sequence);
  }
  ds->insert(pixels, true);
  ASSERT_TRUE(format.saveFile(path.c_str(), m.xfer).good()) << path;
}

TEST(DicomSlide, NonWholeSlideDicomIsRefusedNamingItsClass) {
  Minimal m;
  m.sop_class = UID_CTImageStorage;
  const std::string path = (slide_test::scratch_dir() / "ct.dcm").string();
  write_minimal(path, m);
  expect_refusal(path, "not a whole-slide image");
  expect_refusal(path, "1.2.840.10008.5.1.4.1.1.2 (CTImageStorage) file of modality CT");
}

TEST(DicomSlide, UnsupportedTransferSyntaxIsNamed) {
  Minimal m;
  m.xfer = EXS_JPEGLSLossless;
  const std::string path = (slide_test::scratch_dir() / "jpegls.dcm").string();
  write_minimal(path, m);
  expect_refusal(path, "transfer syntax 1.2.840.10008.1.2.4.80");
}

TEST(DicomSlide, SixteenBitOrSingleChannelIsRefused) {
  Minimal sixteen;
  sixteen.bits = 16;
  write_minimal((slide_test::scratch_dir() / "sixteen.dcm").string(), sixteen);
  expect_refusal((slide_test::scratch_dir() / "sixteen.dcm").string(), "3 sample(s) per pixel of 16 bits: brightfield RGB only");
  Minimal gray;
  gray.samples = 1;
  write_minimal((slide_test::scratch_dir() / "gray.dcm").string(), gray);
  expect_refusal((slide_test::scratch_dir() / "gray.dcm").string(), "1 sample(s) per pixel of 8 bits");
}

TEST(DicomSlide, SplitConcatenationIsRefused) {
  const fs::path dir = slide_test::scratch_dir() / "concatenation";
  fs::create_directories(dir);
  Minimal m;
  m.concatenation_uid = "2.25.77";
  m.concatenation_total = 2;
  write_minimal((dir / "part1.dcm").string(), m);
  expect_refusal(dir.string(), "concatenation split over 2 files, of which 1 are here");
}

TEST(DicomSlide, ConcatenationWithAllPartsIsOneLevel) {
  const fs::path dir = slide_test::scratch_dir() / "joined";
  fs::create_directories(dir);
  Minimal m;
  m.width = 32;
  m.height = 32;
  m.frames = 2;
  m.concatenation_uid = "2.25.78";
  m.concatenation_total = 2;
  // Written second part first: the frame offsets, not the file names, give the order.
  m.concatenation_number = 2;
  m.frame_offset = 2;
  m.value_base = 20;
  m.instance_uid = "2.25.11";
  write_minimal((dir / "a.dcm").string(), m);
  m.concatenation_number = 1;
  m.frame_offset = 0;
  m.value_base = 0;
  m.instance_uid = "2.25.12";
  write_minimal((dir / "b.dcm").string(), m);
  const Slide s = Slide::open(dir.string());
  ASSERT_EQ(s.level_count(), 1);
  const auto rgb = region(s, 0, 0, 0, 32, 32);
  auto at = [&](int x, int y) { return rgb[(static_cast<size_t>(y) * 32 + x) * 3]; };
  EXPECT_EQ(at(0, 0), 10);
  EXPECT_EQ(at(20, 0), 20);
  EXPECT_EQ(at(0, 20), 30);
  EXPECT_EQ(at(20, 20), 40);
}

TEST(DicomSlide, SparseTilesWithoutAFrameAreWhite) {
  Minimal m;
  m.width = 32;
  m.height = 32;
  m.frames = 3;
  m.organization = "TILED_SPARSE";
  m.positions = {{17, 1}, {1, 17}, {17, 17}};  // no frame at the top-left tile
  const std::string path = (slide_test::scratch_dir() / "sparse.dcm").string();
  write_minimal(path, m);
  const Slide s = Slide::open(path);
  const auto rgb = region(s, 0, 0, 0, 32, 32);
  auto at = [&](int x, int y) { return rgb[(static_cast<size_t>(y) * 32 + x) * 3]; };
  EXPECT_EQ(at(0, 0), 255);
  EXPECT_EQ(at(20, 0), 10);
  EXPECT_EQ(at(0, 20), 20);
  EXPECT_EQ(at(20, 20), 30);
}

// Issue 21's third hostile round: a header claiming a 2^31 x 2^31 pixel matrix ended the whole job
// with std::bad_alloc (the tile table is allocated by the claimed grid), and 2^31 x 2,500 took
// 1.3 GB before the slide failed. Both are refused, naming the grid, before anything is allocated.
TEST(DicomSlide, HugeClaimedGridIsRefusedBeforeAllocating) {
  Minimal sparse;
  sparse.width = sparse.height = 2147483647;
  sparse.organization = "TILED_SPARSE";
  sparse.positions = {{1, 1}};
  write_minimal((slide_test::scratch_dir() / "huge_sparse.dcm").string(), sparse);
  expect_refusal((slide_test::scratch_dir() / "huge_sparse.dcm").string(), "tiles: more than the 16777216");
  Minimal full;  // a grid under the limit: one frame for a million tiles, refused before the table
  full.width = 16777216;
  write_minimal((slide_test::scratch_dir() / "huge_full.dcm").string(), full);
  expect_refusal((slide_test::scratch_dir() / "huge_full.dcm").string(), "TILED_FULL with 1 frames for a grid of");
}

TEST(DicomSlide, FirstFocalPlaneIsRead) {
  Minimal m;
  m.frames = 2;
  m.focal_planes = 2;
  const std::string path = (slide_test::scratch_dir() / "planes.dcm").string();
  write_minimal(path, m);
  const Slide s = Slide::open(path);
  EXPECT_EQ(region(s, 0, 5, 5, 1, 1)[0], 10);
}

TEST(DicomSlide, TruncatedFileIsRefused) {
  const Twins& t = twins();
  const fs::path dir = slide_test::scratch_dir() / "truncated";
  fs::create_directories(dir);
  const fs::path level0 = fs::path(t.dicom.at("jpeg-full")) / "level-0.dcm";
  fs::copy_file(level0, dir / "level-0.dcm", fs::copy_options::overwrite_existing);
  fs::resize_file(dir / "level-0.dcm", fs::file_size(level0) / 2);
  expect_refusal(dir.string(), "truncated");
}

TEST(DicomSlide, FolderWithoutDicomIsRefused) {
  const fs::path dir = slide_test::scratch_dir() / "empty-folder";
  fs::create_directories(dir);
  std::ofstream(dir / "notes.txt") << "nothing";
  expect_refusal(dir.string(), "no DICOM file");
}

}  // namespace
}  // namespace tessera
