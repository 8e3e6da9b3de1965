// JPEG tiles (TIFF levels, DICOM frames) decoded with libjpeg, beside j2k_decode.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {

// Decodes one complete JPEG stream of a w x h tile to interleaved RGB (w*h*3 bytes), reading it as
// RGB (`rgb_space`) or YCbCr whatever its markers say, as OpenSlide does (TIFF's photometric
// decides: Aperio's RGB JPEG tiles carry no marker); libjpeg's defaults otherwise (accurate
// integer IDCT, smooth upsampling). Uses the calling thread's decoder, kept for the thread's life.
// Returns an empty string, or why it cannot: libjpeg's reason, a warning about corrupt data it
// would decode into damaged pixels, or the image's geometry when it is not such a tile.
std::string decode_jpeg_tile(const uint8_t* data, size_t size, bool rgb_space, int w, int h,
                             uint8_t* rgb);

}  // namespace tessera
