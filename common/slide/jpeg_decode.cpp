#include "common/slide/jpeg_decode.h"

#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE
#include <jpeglib.h>

#include <algorithm>

#include <fmt/format.h>

namespace tessera {

namespace {

// libjpeg's error manager: an error jumps back to decode() with the message; a warning (corrupt
// data that libjpeg decodes anyway, into damaged pixels) is kept, and decode() fails with it.
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  char warning[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

void jpeg_warning(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  if (cinfo->err->num_warnings++ == 0) (*cinfo->err->format_message)(cinfo, e->warning);
}

// decode_jpeg_tile with an explicit decoder. Only trivially destructible objects live here, as an
// error longjmps.
std::string decode(jpeg_decompress_struct& cinfo, JpegError& err, const uint8_t* data,
                   size_t size, J_COLOR_SPACE space, int w, int h, uint8_t* rgb) {
  if (setjmp(err.jump)) {
    jpeg_abort_decompress(&cinfo);
    return err.message;
  }
  err.mgr.num_warnings = 0;
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  if (static_cast<int>(cinfo.image_width) != w || static_cast<int>(cinfo.image_height) != h ||
      cinfo.num_components != 3) {
    jpeg_abort_decompress(&cinfo);
    return fmt::format("a {}x{} JPEG with {} components, not a {}x{} RGB tile", cinfo.image_width,
                       cinfo.image_height, cinfo.num_components, w, h);
  }
  cinfo.jpeg_color_space = space;
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW rows[8];
    const int n = static_cast<int>(std::min<JDIMENSION>(8, cinfo.output_height - cinfo.output_scanline));
    for (int i = 0; i < n; ++i) rows[i] = rgb + (static_cast<size_t>(cinfo.output_scanline) + i) * w * 3;
    jpeg_read_scanlines(&cinfo, rows, static_cast<JDIMENSION>(n));
  }
  jpeg_finish_decompress(&cinfo);
  if (err.mgr.num_warnings > 0) return fmt::format("corrupt JPEG data ({})", err.warning);
  return {};
}

// One thread's JPEG decoder, kept for the thread's life: decoders are not shared.
struct Decoder {
  jpeg_decompress_struct cinfo{};
  JpegError error{};

  Decoder() {
    cinfo.err = jpeg_std_error(&error.mgr);
    error.mgr.error_exit = jpeg_fail;
    error.mgr.emit_message = jpeg_warning;
    jpeg_create_decompress(&cinfo);
  }
  ~Decoder() { jpeg_destroy_decompress(&cinfo); }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;
};

Decoder& thread_decoder() {
  thread_local Decoder decoder;
  return decoder;
}

}  // namespace

std::string decode_jpeg_tile(const uint8_t* data, size_t size, bool rgb_space, int w, int h,
                             uint8_t* rgb) {
  Decoder& d = thread_decoder();
  return decode(d.cinfo, d.error, data, size, rgb_space ? JCS_RGB : JCS_YCbCr, w, h, rgb);
}

}  // namespace tessera
