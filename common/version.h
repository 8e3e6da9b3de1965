#pragma once

namespace tessera {
// The project version ("0.1.0") and the git revision the build was configured from
// (`git describe --always --dirty`, or "unknown" outside a checkout).
const char* version();
const char* git_revision();
}  // namespace tessera
