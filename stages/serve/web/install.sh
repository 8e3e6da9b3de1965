#!/usr/bin/env bash
# Installs serve's web page into OUT: its own files, and OpenSeadragon (and, with --test,
# puppeteer-core for the browser test) from the npm registry at the versions package.json pins.
# Run by CMake (target serve_web); nothing it downloads is committed.
#   stages/serve/web/install.sh OUT [--test]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: install.sh OUT [--test]}
with_test=${2:-}
mkdir -p "$out/vendor/openseadragon" "$out/npm"

cp "$here/package.json" "$out/npm/package.json"
omit=(--omit=dev)
[[ "$with_test" == "--test" ]] && omit=()
stamp="$out/npm/.installed${with_test}"
if [[ ! -f "$stamp" || "$here/package.json" -nt "$stamp" ]]; then
  (cd "$out/npm" && npm install --no-audit --no-fund --loglevel=error "${omit[@]}")
  touch "$stamp"
fi
cp -r "$out/npm/node_modules/openseadragon/build/openseadragon/." "$out/vendor/openseadragon/"
cp "$here/index.html" "$here/app.css" "$here/app.js" "$here/explain.js" "$here/viewer_extras.js" \
   "$here/similar.js" "$out/"
