#include "tests/synthslide/j2k_encode.h"

#include <openjpeg.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "common/core/error.h"

namespace tessera::synth {

namespace {

struct Sink {
  std::vector<uint8_t> bytes;
  size_t pos = 0;
};

OPJ_SIZE_T sink_write(void* buffer, OPJ_SIZE_T n, void* user) {
  auto* s = static_cast<Sink*>(user);
  if (s->bytes.size() < s->pos + n) s->bytes.resize(s->pos + n);
  std::memcpy(s->bytes.data() + s->pos, buffer, n);
  s->pos += n;
  return n;
}

OPJ_OFF_T sink_skip(OPJ_OFF_T n, void* user) {
  auto* s = static_cast<Sink*>(user);
  s->pos = static_cast<size_t>(static_cast<OPJ_OFF_T>(s->pos) + n);
  if (s->bytes.size() < s->pos) s->bytes.resize(s->pos);
  return n;
}

OPJ_BOOL sink_seek(OPJ_OFF_T n, void* user) {
  auto* s = static_cast<Sink*>(user);
  s->pos = static_cast<size_t>(n);
  if (s->bytes.size() < s->pos) s->bytes.resize(s->pos);
  return OPJ_TRUE;
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

std::vector<uint8_t> encode_j2k_lossless(const uint8_t* rgb, int w, int h) {
  opj_cparameters_t parameters;
  opj_set_default_encoder_parameters(&parameters);
  parameters.tcp_numlayers = 1;
  parameters.tcp_rates[0] = 0;  // lossless
  parameters.cp_disto_alloc = 1;
  parameters.irreversible = 0;
  parameters.tcp_mct = 0;
  int resolutions = 1;
  while (resolutions < 6 && (std::min(w, h) >> resolutions) >= 1) ++resolutions;
  parameters.numresolution = resolutions;

  opj_image_cmptparm_t components[3];
  std::memset(components, 0, sizeof components);
  for (auto& c : components) {
    c.dx = c.dy = 1;
    c.w = static_cast<OPJ_UINT32>(w);
    c.h = static_cast<OPJ_UINT32>(h);
    c.prec = 8;
    c.sgnd = 0;
  }
  std::unique_ptr<opj_image_t, ImageCloser> image(opj_image_create(3, components, OPJ_CLRSPC_SRGB));
  if (!image) fail<IoError>("OpenJPEG cannot create a {}x{} image", w, h);
  image->x0 = image->y0 = 0;
  image->x1 = static_cast<OPJ_UINT32>(w);
  image->y1 = static_cast<OPJ_UINT32>(h);
  const size_t pixels = static_cast<size_t>(w) * h;
  for (int c = 0; c < 3; ++c) {
    for (size_t i = 0; i < pixels; ++i) image->comps[c].data[i] = rgb[3 * i + c];
  }
  std::unique_ptr<opj_codec_t, CodecCloser> codec(opj_create_compress(OPJ_CODEC_J2K));
  opj_set_error_handler(codec.get(), quiet, nullptr);
  opj_set_warning_handler(codec.get(), quiet, nullptr);
  opj_set_info_handler(codec.get(), quiet, nullptr);
  if (!opj_setup_encoder(codec.get(), &parameters, image.get())) {
    fail<IoError>("OpenJPEG rejects the encoder parameters for a {}x{} tile", w, h);
  }
  Sink sink;
  std::unique_ptr<opj_stream_t, StreamCloser> stream(opj_stream_create(1 << 16, OPJ_FALSE));
  opj_stream_set_user_data(stream.get(), &sink, nullptr);
  opj_stream_set_write_function(stream.get(), sink_write);
  opj_stream_set_skip_function(stream.get(), sink_skip);
  opj_stream_set_seek_function(stream.get(), sink_seek);
  if (!opj_start_compress(codec.get(), image.get(), stream.get()) ||
      !opj_encode(codec.get(), stream.get()) || !opj_end_compress(codec.get(), stream.get())) {
    fail<IoError>("OpenJPEG cannot encode a {}x{} tile", w, h);
  }
  stream.reset();  // flushes
  return std::move(sink.bytes);
}

}  // namespace tessera::synth
