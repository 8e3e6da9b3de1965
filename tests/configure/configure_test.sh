#!/usr/bin/env bash
# Configures tessera with each subset of its stages switched on (TESSERA_BUILD_PATCHGEN, _EMBED,
# _INGEST) into throw-away build folders: every partial build must
# configure on its own, tests and benchmarks included. Usage: configure_test.sh SOURCE_DIR [GENERATOR]
set -euo pipefail
src="$1"
generator="${2:-}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
gen_args=()
if [[ -n "$generator" ]]; then gen_args=(-G "$generator"); fi
failed=0
for patchgen in ON OFF; do
  for embed in ON OFF; do
    for ingest in ON OFF; do
      name="patchgen=$patchgen embed=$embed ingest=$ingest"
      dir="$work/$patchgen-$embed-$ingest"
      if cmake -S "$src" -B "$dir" "${gen_args[@]}" -DTESSERA_BUILD_TESTS=ON \
          -DTESSERA_BUILD_BENCHMARKS=ON -DTESSERA_BUILD_PATCHGEN="$patchgen" \
          -DTESSERA_BUILD_EMBED="$embed" -DTESSERA_BUILD_INGEST="$ingest" >"$dir.log" 2>&1; then
        echo "configured: $name"
      else
        echo "FAILED to configure: $name" >&2
        tail -n 30 "$dir.log" >&2
        failed=1
      fi
      rm -rf "$dir"
    done
  done
done
exit "$failed"
