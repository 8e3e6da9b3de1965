// Lossless JPEG 2000 encoding of RGB tiles with OpenJPEG, for synthslide's DICOM frames.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::synth {

// A JPEG 2000 codestream of the w x h interleaved RGB tile: one layer, reversible 5/3 wavelet, no
// multiple-component transform, so that decoding gives back exactly these pixels. Throws IoError
// when OpenJPEG fails.
std::vector<uint8_t> encode_j2k_lossless(const uint8_t* rgb, int w, int h);

}  // namespace tessera::synth
