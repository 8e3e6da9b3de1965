// Search by an uploaded image: the image (PNG or JPEG bytes) resized to the index's patch size and
// embedded by the model the catalog records, through query's image embedder when this build has
// it.
#pragma once

#include <string>
#include <vector>

#include "common/vector/catalog.h"

namespace tessera::serve {

// True when this build can embed images (query's image embedder was present at build time).
bool image_search_available();

// The embedding of the image `bytes` (not normalised). Throws InvalidInput for bytes that are not a
// PNG or JPEG image, or an image that is not square; Error when image search is not available.
std::vector<float> embed_image_bytes(const Catalog& catalog, const std::string& bytes, int threads);

}  // namespace tessera::serve
