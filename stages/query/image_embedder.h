// Query patches embedded with the model of an index, without loading libtorch in this process:
// the work is done by the embed-image helper (stages/embed/image_tool.h) in a child process, so
// query and serve start in a fraction of a second and only an image query pays for the model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/vector/catalog.h"

namespace tessera::query {

// Not collective; thread-compatible. Embeds `count` patches of catalog.patch_size px (RGB bytes,
// row-major, interleaved) with the model recorded in `catalog` (loaded from its first embed run's
// config.ini), on `device` with `threads` torch threads. Returns count x catalog.dim floats.
// Throws InvalidInput when the helper is not found or refuses the input or model (its message
// is included), IoError when it fails otherwise.
std::vector<float> embed_patches(const Catalog& catalog, const uint8_t* rgb, int count,
                                 const std::string& device, int threads);

// The embed-image executable: $TESSERA_EMBED_IMAGE, else beside this executable, else in the
// build tree's stages/embed/; "" when none exists.
std::string find_embed_image_helper();

}  // namespace tessera::query
