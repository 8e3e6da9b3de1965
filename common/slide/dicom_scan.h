// Where the frames of a DICOM file lie: a small walker over the file's elements (explicit VR
// little endian, the encoding of every transfer syntax the direct reader takes) that finds the
// top-level Pixel Data and the byte range of each frame in it, so that frames can be read with
// pread. DCMTK parses the attributes (common/slide/dicom_slide.cpp); it does not say where a value
// lies in the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct DicomFrames {
  bool encapsulated = false;      // compressed frames in items; else native pixel data
  std::vector<uint64_t> offsets;  // per frame, file offset of its bytes
  std::vector<uint64_t> sizes;    // per frame, bytes (a compressed frame may carry a pad byte)
};

// Locates `frames` frames in `file`. Native pixel data must hold frames * frame_bytes bytes; an
// encapsulated one one fragment per frame (matched one to one, or through the Basic Offset
// Table). Throws IoError naming the file and the reason ("truncated", a frame split over several
// fragments, ...).
DicomFrames locate_frames(const std::string& file, int64_t frames, uint64_t frame_bytes);

}  // namespace tessera
