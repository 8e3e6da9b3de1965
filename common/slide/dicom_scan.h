// Where the frames of a DICOM file lie: a small walker over the file's elements (explicit VR
// little endian, the encoding of every transfer syntax the direct reader takes) that finds the
// top-level Pixel Data and the byte range of each frame in it, so that frames can be read with
// pread. DCMTK parses the attributes (common/slide/dicom_slide.cpp); it does not say where a value
// lies in the file. Before DCMTK parses a file, check_dicom_structure walks the same elements to
// bound what DCMTK's recursive parser would meet.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

// The most sequences a DICOM file may nest inside one another (DCMTK parses a sequence by
// recursion; a header nesting 6,000 deep overflowed the stack). Whole-slide files nest 4 or 5.
inline constexpr int kMaxDicomNesting = 64;

// How a data set's elements are encoded (both little endian); see dicom_transfer_syntax.
enum class DicomEncoding { kExplicitVr, kImplicitVr };

struct DicomFrames {
  bool encapsulated = false;      // compressed frames in items; else native pixel data
  std::vector<uint64_t> offsets;  // per frame, file offset of its bytes
  std::vector<uint64_t> sizes;    // per frame, bytes (a compressed frame may carry a pad byte)
};

// The Transfer Syntax UID of `file`'s meta information ("" when it has none). Throws IoError
// naming the file when it has no DICM preamble or its meta information is damaged.
std::string dicom_transfer_syntax(const std::string& file);

// Checks that the elements of `file` up to its top-level Pixel Data are well formed (each value
// inside the file and inside its item and sequence, known VRs) and nest at most kMaxDicomNesting
// sequences deep; walks iteratively, in memory independent of the depth. Throws IoError naming the
// file and the first problem.
void check_dicom_structure(const std::string& file, DicomEncoding encoding);

// Locates `frames` frames in `file`. Native pixel data must hold frames * frame_bytes bytes; an
// encapsulated one one fragment per frame (matched one to one, or through the Basic Offset
// Table). Throws IoError naming the file and the reason ("truncated", a frame split over several
// fragments, a frame count more than the Pixel Data can hold, ...).
DicomFrames locate_frames(const std::string& file, int64_t frames, uint64_t frame_bytes);

}  // namespace tessera
