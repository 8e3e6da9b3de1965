// libtiff glue shared by the slide readers (tile_reader, strip_tiff, sniff): a handle that closes
// its TIFF, and a message handler that keeps libtiff's last message about one file instead of
// printing it (vendor tags make libtiff chatty).
#pragma once

#include <tiffio.h>

#include <cstdarg>
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

namespace tessera::tiff {

struct Closer {
  void operator()(TIFF* t) const { TIFFClose(t); }
};
using Handle = std::unique_ptr<TIFF, Closer>;

// A TIFFErrorHandlerExtR / TIFFWarningHandlerExtR: `user_data` is the std::string that receives
// the message ("module: text").
inline int keep_message(TIFF*, void* user_data, const char* module, const char* fmt_text,
                        va_list ap) {
  char text[512];
  std::vsnprintf(text, sizeof text, fmt_text, ap);
  auto* last = static_cast<std::string*>(user_data);
  *last = module ? fmt::format("{}: {}", module, text) : std::string(text);
  return 1;
}

}  // namespace tessera::tiff
