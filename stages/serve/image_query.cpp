#include "stages/serve/image_query.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/core/error.h"
#include "common/slide/slide.h"
#include "stages/query/inputs.h"

#if __has_include("stages/query/image_embedder.h")
#include "stages/query/image_embedder.h"
#define TESSERA_SERVE_HAS_EMBEDDER 1
#else
#define TESSERA_SERVE_HAS_EMBEDDER 0
#endif

namespace tessera::serve {

namespace fs = std::filesystem;

bool image_search_available() { return TESSERA_SERVE_HAS_EMBEDDER != 0; }

std::vector<float> embed_image_bytes(const Catalog& catalog, const std::string& bytes, int threads) {
#if TESSERA_SERVE_HAS_EMBEDDER
  // query's reader takes a path: the upload goes through a private temporary file.
  std::string path = (fs::temp_directory_path() / "tessera-serve-upload-XXXXXX").string();
  const int fd = ::mkstemp(path.data());
  if (fd < 0) fail<IoError>("cannot create a temporary file for an uploaded image");
  ::close(fd);
  Image8 image;
  try {
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    image = query::read_image(path);
  } catch (const Error& e) {
    fs::remove(path);
    fail<InvalidInput>("the uploaded image cannot be read: {}", e.what());
  }
  fs::remove(path);
  if (image.width != image.height) {
    fail<InvalidInput>("the uploaded image is {} x {} pixels: give a square patch", image.width,
                       image.height);
  }
  const int S = catalog.patch_size;
  if (image.width != S) {
    Image8 resized{S, S, 3, std::vector<uint8_t>(static_cast<size_t>(S) * S * 3)};
    resize_patch(image.pixels.data(), image.width, resized.pixels.data(), S);
    image = std::move(resized);
  }
  return query::embed_patches(catalog, image.pixels.data(), 1, "cpu", threads);
#else
  (void)catalog;
  (void)bytes;
  (void)threads;
  fail("search by image is not available in this build");
#endif
}

}  // namespace tessera::serve
