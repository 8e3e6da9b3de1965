#pragma once

namespace tessera {
// The project version ("0.1.0") and the git revision of the source tree
// (`git describe --always --dirty` when the build ran, or "unknown" outside a checkout).
const char* version();
const char* git_revision();
}  // namespace tessera
