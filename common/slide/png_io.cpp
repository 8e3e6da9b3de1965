#include "common/slide/png_io.h"

#include <png.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/core/error.h"
#include "common/core/fs.h"

namespace tessera {
namespace {

struct FileCloser {
  void operator()(FILE* f) const noexcept { std::fclose(f); }
};
using FilePtr = std::unique_ptr<FILE, FileCloser>;

// libpng reports errors by calling this and expecting it not to return; the message is kept for
// the exception thrown once control is back in C++ code.
struct PngErrorSink {
  char message[256] = "unknown libpng error";
};

void on_png_error(png_structp png, png_const_charp msg) {
  auto* sink = static_cast<PngErrorSink*>(png_get_error_ptr(png));
  std::snprintf(sink->message, sizeof sink->message, "%s", msg);
  png_longjmp(png, 1);
}

void on_png_warning(png_structp, png_const_charp) {}

// Decodes an opened PNG into `out`. Returns false with sink->message set on a libpng error. Holds
// no object with a destructor across setjmp, so the longjmp is well defined.
// With max_pixels > 0, a header giving more pixels stops the decoding before anything is
// allocated: false with out's width and height set and no pixels.
bool decode_png(FILE* file, PngErrorSink* sink, Image8* out, std::vector<png_bytep>* rows,
                uint64_t max_pixels) {
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, sink, on_png_error, on_png_warning);
  if (png == nullptr) return false;
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_init_io(png, file);
  png_read_info(png, info);
  const uint64_t header_pixels =
      uint64_t{png_get_image_width(png, info)} * png_get_image_height(png, info);
  if (max_pixels > 0 && header_pixels > max_pixels) {
    out->width = static_cast<int>(std::min<png_uint_32>(png_get_image_width(png, info), INT32_MAX));
    out->height = static_cast<int>(std::min<png_uint_32>(png_get_image_height(png, info), INT32_MAX));
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  const png_byte color_type = png_get_color_type(png, info);
  png_set_expand(png);  // palette -> RGB, gray < 8 bit -> 8 bit, tRNS -> alpha
  png_set_scale_16(png);
  png_set_strip_alpha(png);
  png_read_update_info(png, info);

  const int channels = png_get_channels(png, info);
  const bool gray = (color_type & PNG_COLOR_MASK_COLOR) == 0;
  if (channels != (gray ? 1 : 3)) png_error(png, "unexpected channel count after conversion");
  out->width = static_cast<int>(png_get_image_width(png, info));
  out->height = static_cast<int>(png_get_image_height(png, info));
  out->channels = channels;
  out->pixels.resize(static_cast<size_t>(out->width) * out->height * channels);
  rows->resize(out->height);
  for (int y = 0; y < out->height; ++y) {
    (*rows)[y] = out->pixels.data() + static_cast<size_t>(y) * out->width * channels;
  }
  png_read_image(png, rows->data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

}  // namespace

void write_png(const std::string& path, const Image8& image) {
  if (image.channels != 1 && image.channels != 3) {
    fail<IoError>("cannot write PNG '{}': {} channels (need 1 or 3)", path, image.channels);
  }
  if (image.width <= 0 || image.height <= 0 ||
      image.pixels.size() != static_cast<size_t>(image.width) * image.height * image.channels) {
    fail<IoError>("cannot write PNG '{}': {}x{}x{} image holds {} bytes", path, image.width,
                  image.height, image.channels, image.pixels.size());
  }
  png_image desc;
  std::memset(&desc, 0, sizeof desc);
  desc.version = PNG_IMAGE_VERSION;
  desc.width = static_cast<png_uint_32>(image.width);
  desc.height = static_cast<png_uint_32>(image.height);
  desc.format = image.channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  // Speed over size: QC thumbnails of textured tissue barely compress, and zlib's default level
  // was a fifth of patchgen's CPU time on a small slide (docs/performance.md).
  desc.flags = PNG_IMAGE_FLAG_FAST;
  const png_int_32 stride = image.width * image.channels;

  // Encoded once into a buffer of libpng's worst-case size (asking for the size first would
  // compress the image twice).
  png_alloc_size_t size = PNG_IMAGE_PNG_SIZE_MAX(desc);
  std::string encoded(size, '\0');
  if (!png_image_write_to_memory(&desc, encoded.data(), &size, 0, image.pixels.data(), stride,
                                 nullptr)) {
    fail<IoError>("cannot encode PNG '{}': {}", path, desc.message);
  }
  png_image_free(&desc);
  encoded.resize(size);
  atomic_write_file(path, encoded);
}

Image8 read_png(const std::string& path, uint64_t max_pixels) {
  FilePtr file(std::fopen(path.c_str(), "rb"));
  if (!file) fail<IoError>("cannot open PNG '{}': {}", path, std::strerror(errno));
  png_byte signature[8] = {};
  if (std::fread(signature, 1, sizeof signature, file.get()) != sizeof signature ||
      png_sig_cmp(signature, 0, sizeof signature) != 0) {
    fail<IoError>("'{}' is not a PNG file", path);
  }
  std::rewind(file.get());

  Image8 image;
  PngErrorSink sink;
  std::vector<png_bytep> rows;
  if (!decode_png(file.get(), &sink, &image, &rows, max_pixels)) {
    if (image.width > 0 && image.pixels.empty()) {
      fail<InvalidInput>("PNG '{}' is {}x{} pixels by its header, over the limit of {} pixels",
                         path, image.width, image.height, max_pixels);
    }
    fail<IoError>("cannot read PNG '{}': {}", path, sink.message);
  }
  return image;
}

}  // namespace tessera
