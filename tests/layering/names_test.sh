#!/usr/bin/env bash
# The files two stages exchange have one owner: common/store (and common/vector for the FAISS
# shards). This test fails when C++ code anywhere else spells an HDF5 dataset or group name of an
# exchanged file in an HDF5 call, or an exchanged file name as a literal: it must ask the store's
# names (index_names, shard_names, embedding_names, files.h) instead.
# Production code is checked (common/, stages/, benchmarks/); tests (*_test.cpp, tests/) spell the
# documented names on purpose, as readers independent of the writers, like the h5py tests.
# Usage: names_test.sh SOURCE_DIR
set -euo pipefail
src="$1"
cd "$src"
# Every name the store declares: `inline constexpr const char* kX = "name";`.
mapfile -t names < <(grep -hoE 'inline constexpr const char\* k[A-Za-z0-9]+ = "[^"]+"' \
  common/store/*.h | sed -E 's/.*= "([^"]+)"/\1/' | sort -u)
if ((${#names[@]} < 10)); then
  echo "names_test: found only ${#names[@]} names in common/store/*.h: the pattern is stale" >&2
  exit 1
fi
calls='open_dataset|create_appendable|create_dataset|write_dataset|write_strings|write_vector|open_group|create_group|has_dataset|link_exists'
alternation=$(printf '%s|' "${names[@]}" | sed 's/[.]/[.]/g; s/|$//')
found=$(grep -rnE --include='*.cpp' --include='*.h' \
  "(($calls)\\(\"($alternation)\"|[^a-z_./{}]\"($alternation)\"[^a-z_])" \
  common stages benchmarks |
  grep -vE '^common/(store|h5)/|_test\.cpp:' |
  grep -vE 'constexpr const char\*' || true)
# Names that are also ordinary words in JSON fields, options and log lines are only refused in
# HDF5 calls; an exact literal of a file name (index.h5, embeddings.h5, ...) is refused anywhere.
found=$(printf '%s\n' "$found" | grep -E "(($calls)\\(\"|\"[a-z_]+[.]h5\")" || true)
if [[ -n "$found" ]]; then
  echo "exchanged-file names spelled outside common/store (use the store's name constants):"
  echo "$found"
  exit 1
fi
echo "names_test: no exchanged-file name outside common/store (${#names[@]} names checked)"
