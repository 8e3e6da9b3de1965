#include "tests/synthslide/dicom_writer.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcpixel.h>
#include <dcmtk/dcmdata/dcpixseq.h>
#include <dcmtk/dcmdata/dcpxitem.h>
#include <dcmtk/dcmdata/dcuid.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/slide/tile_reader.h"
#include "tests/synthslide/hash.h"
#include "tests/synthslide/j2k_encode.h"

namespace tessera::synth {

namespace {

// A UID under 2.25 (decimal integer) derived from the seed, so the same spec gives the same bytes.
std::string uid(uint64_t seed, uint64_t role, uint64_t index) {
  return fmt::format("2.25.{}", mix64(salted(seed, role) ^ mix64(index)) >> 1);
}

void check(const OFCondition& status, const std::string& file, const char* what) {
  if (status.bad()) fail<IoError>("cannot write DICOM '{}': {}: {}", file, what, status.text());
}

E_TransferSyntax transfer_syntax(DicomCodec codec) {
  switch (codec) {
    case DicomCodec::kJpeg: return EXS_JPEGProcess1;
    case DicomCodec::kJpeg2000: return EXS_JPEG2000LosslessOnly;
    case DicomCodec::kRaw: break;
  }
  return EXS_LittleEndianExplicit;
}

// The attributes of one level's instance, without pixel data.
void put_attributes(DcmDataset* ds, const SlideSpec& spec, const DicomSpec& dicom, int level,
                    int64_t width, int64_t height, int64_t frames, const std::string& file) {
  const int ts = spec.tile_size;
  const double spacing_mm = spec.mpp * static_cast<double>(int64_t{1} << level) / 1000.0;
  const char* photometric = dicom.codec == DicomCodec::kJpeg ? "YBR_FULL_422" : "RGB";
  auto s = [&](const DcmTagKey& tag, const std::string& value) {
    check(ds->putAndInsertString(tag, value.c_str()), file, "an attribute");
  };
  auto u16 = [&](const DcmTagKey& tag, Uint16 value) {
    check(ds->putAndInsertUint16(tag, value), file, "an attribute");
  };
  auto u32 = [&](const DcmTagKey& tag, Uint32 value) {
    check(ds->putAndInsertUint32(tag, value), file, "an attribute");
  };
  s(DCM_SOPClassUID, UID_VLWholeSlideMicroscopyImageStorage);
  s(DCM_SOPInstanceUID, uid(spec.seed, 1, static_cast<uint64_t>(level)));
  s(DCM_StudyInstanceUID, uid(spec.seed, 2, 0));
  s(DCM_SeriesInstanceUID, uid(spec.seed, 3, 0));
  s(DCM_FrameOfReferenceUID, uid(spec.seed, 4, 0));
  s(DCM_ImageType, level == 0 ? "ORIGINAL\\PRIMARY\\VOLUME\\NONE"
                              : "DERIVED\\PRIMARY\\VOLUME\\RESAMPLED");
  s(DCM_Modality, "SM");
  s(DCM_Manufacturer, "tessera synthslide");
  s(DCM_ContentDate, "20260101");
  s(DCM_ContentTime, "000000");
  s(DCM_PatientName, "");
  s(DCM_PatientID, fmt::format("synth-{}", spec.seed));
  s(DCM_SeriesNumber, "1");
  s(DCM_InstanceNumber, std::to_string(level + 1));
  s(DCM_ImageComments, fmt::format("tessera synthslide seed={} tissue_fraction={}", spec.seed,
                                   spec.tissue_fraction));
  if (dicom.write_organization) {
    s(DCM_DimensionOrganizationType, dicom.sparse ? "TILED_SPARSE" : "TILED_FULL");
    DcmItem* organization = nullptr;
    check(ds->findOrCreateSequenceItem(DCM_DimensionOrganizationSequence, organization, 0), file,
          "dimension organization");
    check(organization->putAndInsertString(DCM_DimensionOrganizationUID, uid(spec.seed, 5, 0).c_str()),
          file, "dimension organization");
  }
  u16(DCM_SamplesPerPixel, 3);
  s(DCM_PhotometricInterpretation, photometric);
  u16(DCM_PlanarConfiguration, 0);
  s(DCM_NumberOfFrames, std::to_string(frames));
  u16(DCM_Rows, static_cast<Uint16>(ts));
  u16(DCM_Columns, static_cast<Uint16>(ts));
  u16(DCM_BitsAllocated, 8);
  u16(DCM_BitsStored, 8);
  u16(DCM_HighBit, 7);
  u16(DCM_PixelRepresentation, 0);
  s(DCM_LossyImageCompression, dicom.codec == DicomCodec::kJpeg ? "01" : "00");
  if (dicom.codec == DicomCodec::kJpeg) s(DCM_LossyImageCompressionMethod, "ISO_10918_1");
  u32(DCM_TotalPixelMatrixColumns, static_cast<Uint32>(width));
  u32(DCM_TotalPixelMatrixRows, static_cast<Uint32>(height));
  u32(DCM_TotalPixelMatrixFocalPlanes, 1);
  u32(DCM_NumberOfOpticalPaths, 1);
  DcmItem* optical = nullptr;
  check(ds->findOrCreateSequenceItem(DCM_OpticalPathSequence, optical, 0), file, "optical path");
  check(optical->putAndInsertString(DCM_OpticalPathIdentifier, "1"), file, "optical path");
  if (dicom.write_spacing) {
    DcmItem* shared = nullptr;
    DcmItem* measures = nullptr;
    check(ds->findOrCreateSequenceItem(DCM_SharedFunctionalGroupsSequence, shared, 0), file,
          "shared groups");
    check(shared->findOrCreateSequenceItem(DCM_PixelMeasuresSequence, measures, 0), file,
          "pixel measures");
    const std::string spacing = fmt::format("{:.10g}\\{:.10g}", spacing_mm, spacing_mm);
    check(measures->putAndInsertString(DCM_PixelSpacing, spacing.c_str()), file, "pixel spacing");
    check(measures->putAndInsertString(DCM_SliceThickness, "0"), file, "slice thickness");
  }
}

bool all_white(const std::vector<uint8_t>& rgb, int ts, int64_t in_w, int64_t in_h) {
  for (int64_t y = 0; y < in_h; ++y) {
    const uint8_t* row = rgb.data() + static_cast<size_t>(y) * ts * 3;
    if (!std::all_of(row, row + in_w * 3, [](uint8_t v) { return v == 255; })) return false;
  }
  return true;
}

}  // namespace

DicomCodec parse_dicom_codec(const std::string& text) {
  if (text == "jpeg") return DicomCodec::kJpeg;
  if (text == "j2k") return DicomCodec::kJpeg2000;
  if (text == "raw") return DicomCodec::kRaw;
  fail<InvalidInput>("invalid DICOM codec '{}' (expected jpeg, j2k or raw)", text);
}

DicomSummary write_dicom_series(const SlideSpec& spec, const DicomSpec& dicom) {
  const auto dims = level_dimensions(spec.width, spec.height);
  std::string why;
  auto reader = TileReader::open(spec.path, dims, size_t{1}, &why);
  if (!reader) fail<IoError>("synthslide: cannot read back TIFF '{}': {}", spec.path, why);
  std::error_code ec;
  std::filesystem::create_directories(dicom.dir, ec);
  if (ec) fail<IoError>("cannot create DICOM folder '{}': {}", dicom.dir, ec.message());

  DicomSummary summary;
  const int ts = spec.tile_size;
  std::vector<uint8_t> rgb(static_cast<size_t>(ts) * ts * 3);
  for (size_t level = 0; level < dims.size(); ++level) {
    const auto [w, h] = dims[level];
    const int64_t cols = (w + ts - 1) / ts, rows = (h + ts - 1) / ts;
    const std::string file = (std::filesystem::path(dicom.dir) / fmt::format("level-{}.dcm", level)).string();
    // Tiles in storage order: row-major, or column-major for TILED_SPARSE.
    std::vector<std::pair<int64_t, int64_t>> order;
    for (int64_t a = 0; a < (dicom.sparse ? cols : rows); ++a) {
      for (int64_t b = 0; b < (dicom.sparse ? rows : cols); ++b) {
        order.push_back(dicom.sparse ? std::make_pair(a, b) : std::make_pair(b, a));
      }
    }
    DcmFileFormat format;
    DcmDataset* ds = format.getDataset();
    std::unique_ptr<DcmPixelSequence> sequence;
    DcmOffsetList offsets;
    std::vector<uint8_t> raw;
    if (dicom.codec != DicomCodec::kRaw) {
      sequence = std::make_unique<DcmPixelSequence>(DcmTag(DCM_PixelData, EVR_OB));
      sequence->insert(new DcmPixelItem(DcmTag(DCM_Item, EVR_OB)));  // the Basic Offset Table
    }
    DcmSequenceOfItems* per_frame = nullptr;
    int64_t frames = 0;
    for (const auto& [col, row] : order) {
      const int64_t x = col * ts, y = row * ts;
      std::vector<uint8_t> stream;
      if (dicom.codec == DicomCodec::kJpeg && !dicom.sparse) {
        stream = reader->jpeg_stream(static_cast<int>(level), col, row);
      } else {
        reader->read_rgb(static_cast<int>(level), x, y, ts, ts, rgb.data());
        if (dicom.sparse && all_white(rgb, ts, std::min<int64_t>(ts, w - x), std::min<int64_t>(ts, h - y))) {
          ++summary.omitted_tiles;
          continue;
        }
        if (dicom.codec == DicomCodec::kJpeg) {
          stream = reader->jpeg_stream(static_cast<int>(level), col, row);
        } else if (dicom.codec == DicomCodec::kJpeg2000) {
          stream = encode_j2k_lossless(rgb.data(), ts, ts);
        } else {
          raw.insert(raw.end(), rgb.begin(), rgb.end());
        }
      }
      if (sequence) {
        check(sequence->storeCompressedFrame(offsets, stream.data(),
                                             static_cast<Uint32>(stream.size()), 0),
              file, "a frame");
      }
      if (dicom.sparse) {
        if (per_frame == nullptr) {
          per_frame = new DcmSequenceOfItems(DCM_PerFrameFunctionalGroupsSequence);
          check(ds->insert(per_frame), file, "per-frame groups");
        }
        auto* group = new DcmItem();
        per_frame->append(group);
        DcmItem* position = nullptr;
        check(group->findOrCreateSequenceItem(DCM_PlanePositionSlideSequence, position, 0), file,
              "plane position");
        check(position->putAndInsertString(DCM_ColumnPositionInTotalImagePixelMatrix,
                                           std::to_string(x + 1).c_str()),
              file, "plane position");
        check(position->putAndInsertString(DCM_RowPositionInTotalImagePixelMatrix,
                                           std::to_string(y + 1).c_str()),
              file, "plane position");
        check(position->putAndInsertString(DCM_ZOffsetInSlideCoordinateSystem, "0"), file,
              "plane position");
      }
      ++frames;
    }
    put_attributes(ds, spec, dicom, static_cast<int>(level), w, h, frames, file);
    auto* pixels = new DcmPixelData(DCM_PixelData);
    if (sequence) {
      DcmPixelItem* table = nullptr;
      check(sequence->getItem(table, 0), file, "offset table");
      check(table->createOffsetTable(offsets), file, "offset table");
      pixels->putOriginalRepresentation(transfer_syntax(dicom.codec), nullptr, sequence.release());
    } else {
      check(pixels->putUint8Array(raw.data(), static_cast<unsigned long>(raw.size())), file,
            "pixel data");
    }
    check(ds->insert(pixels, true), file, "pixel data");
    const std::string temp = file + ".partial";
    check(format.saveFile(temp.c_str(), transfer_syntax(dicom.codec)), file, "saving");
    std::filesystem::rename(temp, file, ec);
    if (ec) fail<IoError>("cannot rename '{}' to '{}': {}", temp, file, ec.message());
    summary.frames += frames;
    ++summary.levels;
    spdlog::debug("synthslide '{}': level {} ({}x{}) written, {} frames", file, level, w, h, frames);
  }
  return summary;
}

}  // namespace tessera::synth
