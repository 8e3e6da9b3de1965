#include "common/slide/j2k_decode.h"

#include <openjpeg.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include <fmt/format.h>

namespace tessera {

namespace {

// An in-memory source for OpenJPEG's stream callbacks.
struct Source {
  const uint8_t* data;
  size_t size;
  size_t pos;
};

OPJ_SIZE_T source_read(void* buffer, OPJ_SIZE_T n, void* user) {
  auto* s = static_cast<Source*>(user);
  if (s->pos >= s->size) return static_cast<OPJ_SIZE_T>(-1);
  const size_t k = std::min<size_t>(n, s->size - s->pos);
  std::memcpy(buffer, s->data + s->pos, k);
  s->pos += k;
  return k;
}

OPJ_OFF_T source_skip(OPJ_OFF_T n, void* user) {
  auto* s = static_cast<Source*>(user);
  const auto target = static_cast<OPJ_OFF_T>(s->pos) + n;
  if (target < 0 || target > static_cast<OPJ_OFF_T>(s->size)) return -1;
  s->pos = static_cast<size_t>(target);
  return n;
}

OPJ_BOOL source_seek(OPJ_OFF_T n, void* user) {
  auto* s = static_cast<Source*>(user);
  if (n < 0 || n > static_cast<OPJ_OFF_T>(s->size)) return OPJ_FALSE;
  s->pos = static_cast<size_t>(n);
  return OPJ_TRUE;
}

void keep_message(const char* text, void* user) {
  auto* last = static_cast<std::string*>(user);
  *last = text;
  while (!last->empty() && last->back() == '\n') last->pop_back();
}

void quiet(const char*, void*) {}

struct CodecCloser {
  void operator()(opj_codec_t* c) const { opj_destroy_codec(c); }
};
struct StreamCloser {
  void operator()(opj_stream_t* s) const { opj_stream_destroy(s); }
};
struct ImageCloser {
  void operator()(opj_image_t* i) const { opj_image_destroy(i); }
};

}  // namespace

std::string decode_j2k(const uint8_t* data, size_t size, int w, int h, uint8_t* rgb) {
  static const uint8_t kJp2Signature[] = {0, 0, 0, 0x0C, 'j', 'P', ' ', ' '};
  const bool jp2 = size >= sizeof kJp2Signature &&
                   std::memcmp(data, kJp2Signature, sizeof kJp2Signature) == 0;
  std::unique_ptr<opj_codec_t, CodecCloser> codec(
      opj_create_decompress(jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K));
  std::string message = "OpenJPEG failed";
  opj_set_error_handler(codec.get(), keep_message, &message);
  opj_set_warning_handler(codec.get(), quiet, nullptr);
  opj_set_info_handler(codec.get(), quiet, nullptr);
  opj_dparameters_t parameters;
  opj_set_default_decoder_parameters(&parameters);
  if (!opj_setup_decoder(codec.get(), &parameters)) return message;

  Source source{data, size, 0};
  std::unique_ptr<opj_stream_t, StreamCloser> stream(opj_stream_create(1 << 16, OPJ_TRUE));
  opj_stream_set_user_data(stream.get(), &source, nullptr);
  opj_stream_set_user_data_length(stream.get(), size);
  opj_stream_set_read_function(stream.get(), source_read);
  opj_stream_set_skip_function(stream.get(), source_skip);
  opj_stream_set_seek_function(stream.get(), source_seek);

  opj_image_t* raw = nullptr;
  if (!opj_read_header(stream.get(), codec.get(), &raw)) return message;
  std::unique_ptr<opj_image_t, ImageCloser> image(raw);
  if (!opj_decode(codec.get(), stream.get(), image.get()) ||
      !opj_end_decompress(codec.get(), stream.get())) {
    return message;
  }
  if (image->numcomps != 3) {
    return fmt::format("a JPEG 2000 image with {} components, not RGB", image->numcomps);
  }
  for (int c = 0; c < 3; ++c) {
    const opj_image_comp_t& comp = image->comps[c];
    if (static_cast<int>(comp.w) != w || static_cast<int>(comp.h) != h || comp.prec != 8 ||
        comp.sgnd != 0 || comp.dx != 1 || comp.dy != 1) {
      return fmt::format("a {}x{} JPEG 2000 component of {} bits, not a {}x{} 8-bit tile", comp.w,
                         comp.h, comp.prec, w, h);
    }
  }
  const size_t pixels = static_cast<size_t>(w) * h;
  const OPJ_INT32* r = image->comps[0].data;
  const OPJ_INT32* g = image->comps[1].data;
  const OPJ_INT32* b = image->comps[2].data;
  for (size_t i = 0; i < pixels; ++i) {
    rgb[3 * i] = static_cast<uint8_t>(std::clamp<OPJ_INT32>(r[i], 0, 255));
    rgb[3 * i + 1] = static_cast<uint8_t>(std::clamp<OPJ_INT32>(g[i], 0, 255));
    rgb[3 * i + 2] = static_cast<uint8_t>(std::clamp<OPJ_INT32>(b[i], 0, 255));
  }
  return {};
}

}  // namespace tessera
