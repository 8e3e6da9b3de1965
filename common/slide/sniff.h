// Why a file cannot be read as a slide, found by looking at it (magic bytes, TIFF tags, DICOM SOP
// class) once OpenSlide and the DICOM reader have both declined it. Each message says what the
// file is and what to do; docs/formats.md lists the cases.
#pragma once

#include <string>

namespace tessera {

// What `path` is and why it cannot be read, e.g. "a multiplex or fluorescence image (8 channels of
// 16 bits): tessera reads brightfield RGB only; ...". Never throws; the caller prefixes the path.
std::string unreadable_reason(const std::string& path);

}  // namespace tessera
