#!/usr/bin/env bash
# names_test.sh must fail on each kind of violation it is for: planted one at a time into a copy of
# the production sources, each must make it fail and be named in its report.
# Usage: names_planted_test.sh SOURCE_DIR
set -euo pipefail
src="$(cd "$1" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
plants=(
  'h5::File f = h5::File::open(path, h5::Mode::kRead);'
  'const std::string p = dir + "/embeddings.h5";'
  'const std::string p = (fs::path(dir) / "features" / name).string();'
  'const std::string p = dir + "/features/" + id;'
  'auto d = file.open_dataset("patch_id");'
  'const std::string c = dir + "/slide_catalog.json";'
  'const std::string s = (fs::path(dir) / "_SUCCESS").string();'
  'const std::string m = (fs::path(dir) / "markers").string();'
)
for plant in "${plants[@]}"; do
  rm -rf "$work/tree"
  mkdir -p "$work/tree"
  (cd "$src" && cp -r --parents common stages benchmarks "$work/tree/")
  echo "void planted() { $plant }" >> "$work/tree/stages/aggregate/items.cpp"
  if out=$("$src/tests/layering/names_test.sh" "$work/tree" 2>&1); then
    echo "names_test passed with a planted violation: $plant"
    exit 1
  fi
  if ! grep -qF "stages/aggregate/items.cpp" <<<"$out"; then
    echo "names_test failed without naming the planted line ($plant):"
    echo "$out"
    exit 1
  fi
done
echo "names_planted_test: each of ${#plants[@]} planted violations fails names_test"
