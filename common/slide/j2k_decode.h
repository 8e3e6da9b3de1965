// JPEG 2000 tiles (DICOM frames) decoded with OpenJPEG.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {

// Decodes one JPEG 2000 codestream (or JP2 file) of a w x h, 3-component, 8-bit tile to
// interleaved RGB (w*h*3 bytes); OpenJPEG undoes a multiple-component transform the codestream
// declares. Returns an empty string, or why it cannot (OpenJPEG's last message, or the image's
// geometry when it is not such a tile).
std::string decode_j2k(const uint8_t* data, size_t size, int w, int h, uint8_t* rgb);

}  // namespace tessera
