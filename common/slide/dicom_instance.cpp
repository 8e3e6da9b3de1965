#include "common/slide/dicom_instance.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmdata/dcxfer.h>
#include <dcmtk/oflog/oflog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "common/core/error.h"
#include "common/slide/dicom_scan.h"

namespace tessera {

namespace {

namespace fs = std::filesystem;

std::string text(DcmItem* item, const DcmTagKey& tag, unsigned long pos = 0) {
  OFString value;
  if (item == nullptr || item->findAndGetOFString(tag, value, pos).bad()) return {};
  return value.c_str();
}

int64_t integer(DcmItem* item, const DcmTagKey& tag, int64_t fallback) {
  const std::string t = text(item, tag);
  if (t.empty()) return fallback;
  char* end = nullptr;
  const long long v = std::strtoll(t.c_str(), &end, 10);
  return end == t.c_str() ? fallback : static_cast<int64_t>(v);
}

DcmItem* item_of(DcmItem* parent, const DcmTagKey& sequence, int index = 0) {
  DcmItem* item = nullptr;
  if (parent == nullptr || parent->findAndGetSequenceItem(sequence, item, index).bad()) return nullptr;
  return item;
}

void quiet_dcmtk() {
  static std::once_flag once;
  std::call_once(once, [] { OFLog::configure(OFLogger::FATAL_LOG_LEVEL); });
}

// The counts and sizes a header claims are checked against their VRs' ranges and the file's size
// before any is multiplied or allocated by.
void check_claims(const DicomInstance& in, uint64_t file_size) {
  constexpr int64_t kUL = 4294967295;
  auto out_of = [&](const char* what, int64_t value, int64_t most) {
    fail<IoError>("DICOM file '{}' claims {} {} (0 to {})", in.file, what, value, most);
  };
  if (in.total_w < 0 || in.total_w > kUL) out_of("Total Pixel Matrix Columns", in.total_w, kUL);
  if (in.total_h < 0 || in.total_h > kUL) out_of("Total Pixel Matrix Rows", in.total_h, kUL);
  if (in.tile_w < 0 || in.tile_w > 65535) out_of("Columns", in.tile_w, 65535);
  if (in.tile_h < 0 || in.tile_h > 65535) out_of("Rows", in.tile_h, 65535);
  if (in.focal_planes > kUL) out_of("focal planes", in.focal_planes, kUL);
  if (in.optical_paths > 65535) out_of("optical paths", in.optical_paths, 65535);
  // Each frame takes at least a byte of its file.
  if (in.frames < 0 || static_cast<uint64_t>(in.frames) > file_size) {
    fail<IoError>("DICOM file '{}' claims {} frames, more than its {} bytes can hold", in.file,
                  in.frames, file_size);
  }
}

}  // namespace

DicomInstance read_dicom_instance(const std::string& file) {
  quiet_dcmtk();
  // DCMTK parses sequences by recursion: the structure is walked first, iteratively, and a file
  // nesting deeper than kMaxDicomNesting, or encoded so the walk cannot follow DCMTK (big endian,
  // deflated, a transfer syntax DCMTK does not know), is refused before DCMTK parses it.
  const std::string transfer = dicom_transfer_syntax(file);
  const DcmXfer xfer(transfer.c_str());
  if (xfer.getXfer() == EXS_Unknown || xfer.getByteOrder() != EBO_LittleEndian ||
      xfer.getStreamCompression() != ESC_none) {
    fail<IoError>("DICOM file '{}' uses transfer syntax {}, which the reader does not take",
                  file, transfer.empty() ? "(none)" : dicom_uid_name(transfer));
  }
  check_dicom_structure(file, xfer.isExplicitVR() ? DicomEncoding::kExplicitVr
                                                  : DicomEncoding::kImplicitVr);
  DcmFileFormat format;
  // Parsing stops at Pixel Data (its items, one per frame, are dicom_scan.h's to find); other
  // values over 4 KiB stay in the file.
  const OFCondition status = format.loadFileUntilTag(OFFilename(file.c_str()), EXS_Unknown,
                                                     EGL_noChange, 4096, ERM_autoDetect,
                                                     DCM_PixelData);
  if (status.bad()) {
    fail<IoError>("DICOM file '{}' cannot be parsed ({}): truncated or damaged", file,
                  status.text());
  }
  DcmDataset* ds = format.getDataset();
  DicomInstance in;
  in.file = file;
  in.sop_class = text(ds, DCM_SOPClassUID);
  in.series = text(ds, DCM_SeriesInstanceUID);
  in.flavor = text(ds, DCM_ImageType, 2);
  in.transfer = DcmXfer(ds->getOriginalXfer()).getXferID();
  if (in.sop_class != UID_VLWholeSlideMicroscopyImageStorage) {
    const std::string modality = text(ds, DCM_Modality);
    fail<IoError>("'{}' is a DICOM {} file{}, not a whole-slide image (VL Whole Slide Microscopy "
                  "Image Storage); tessera reads only those",
                  file, in.sop_class.empty() ? "(no SOP class)" : dicom_uid_name(in.sop_class),
                  modality.empty() ? "" : fmt::format(" of modality {}", modality));
  }
  in.photometric = text(ds, DCM_PhotometricInterpretation);
  in.organization = text(ds, DCM_DimensionOrganizationType);
  in.concatenation = text(ds, DCM_ConcatenationUID);
  in.concatenation_total = integer(ds, DCM_InConcatenationTotalNumber, 0);
  in.concatenation_number = integer(ds, DCM_InConcatenationNumber, 0);
  in.concatenation_frame_offset = integer(ds, DCM_ConcatenationFrameOffsetNumber, 0);
  in.total_w = integer(ds, DCM_TotalPixelMatrixColumns, 0);
  in.total_h = integer(ds, DCM_TotalPixelMatrixRows, 0);
  in.tile_w = integer(ds, DCM_Columns, 0);
  in.tile_h = integer(ds, DCM_Rows, 0);
  in.frames = integer(ds, DCM_NumberOfFrames, 1);
  in.samples = static_cast<int>(integer(ds, DCM_SamplesPerPixel, 0));
  in.bits = static_cast<int>(integer(ds, DCM_BitsAllocated, 0));
  in.planar = static_cast<int>(integer(ds, DCM_PlanarConfiguration, 0));
  in.focal_planes = std::max<int64_t>(1, integer(ds, DCM_TotalPixelMatrixFocalPlanes, 1));
  in.optical_paths = std::max<int64_t>(1, integer(ds, DCM_NumberOfOpticalPaths, 1));
  std::error_code ec;
  const uintmax_t file_size = fs::file_size(file, ec);
  if (ec) fail<IoError>("cannot stat DICOM file '{}': {}", file, ec.message());
  check_claims(in, file_size);

  DcmItem* measures = item_of(item_of(ds, DCM_SharedFunctionalGroupsSequence), DCM_PixelMeasuresSequence);
  DcmItem* per_frame0 = item_of(ds, DCM_PerFrameFunctionalGroupsSequence);
  if (measures == nullptr) measures = item_of(per_frame0, DCM_PixelMeasuresSequence);
  Float64 row = 0, col = 0;
  if (measures != nullptr && measures->findAndGetFloat64(DCM_PixelSpacing, row, 0).good() &&
      measures->findAndGetFloat64(DCM_PixelSpacing, col, 1).good() && row > 0 && col > 0) {
    in.spacing_row_mm = row;
    in.spacing_col_mm = col;
  }

  DcmSequenceOfItems* per_frame = nullptr;
  if (ds->findAndGetSequence(DCM_PerFrameFunctionalGroupsSequence, per_frame).good() &&
      per_frame != nullptr && item_of(item_of(ds, DCM_PerFrameFunctionalGroupsSequence),
                                      DCM_PlanePositionSlideSequence) != nullptr) {
    std::string z0, path0;
    for (unsigned long f = 0; f < per_frame->card(); ++f) {
      DcmItem* group = per_frame->getItem(f);
      DcmItem* position = item_of(group, DCM_PlanePositionSlideSequence);
      const std::string z = text(position, DCM_ZOffsetInSlideCoordinateSystem);
      const std::string path = text(item_of(group, DCM_OpticalPathIdentificationSequence),
                                    DCM_OpticalPathIdentifier);
      if (f == 0) {
        z0 = z;
        path0 = path;
      }
      in.positions.emplace_back(integer(position, DCM_ColumnPositionInTotalImagePixelMatrix, 0),
                                integer(position, DCM_RowPositionInTotalImagePixelMatrix, 0));
      in.first_plane.push_back(z == z0 && path == path0);
    }
  }
  return in;
}

std::string dicom_uid_name(const std::string& uid) {
  const char* name = dcmFindNameOfUID(uid.c_str(), nullptr);
  return name ? fmt::format("{} ({})", uid, name) : uid;
}

}  // namespace tessera
