#!/usr/bin/env bash
# Configures tessera with each subset of its stages switched on (TESSERA_BUILD_PATCHGEN, _EMBED,
# _INGEST) into throw-away build folders: every partial build must configure on its own, tests
# and benchmarks included. The eight configures run as many at a time as there are cores (each is
# one single-threaded cmake). Usage: configure_test.sh SOURCE_DIR [GENERATOR]
set -euo pipefail
src="$1"
generator="${2:-}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
gen_args=()
if [[ -n "$generator" ]]; then gen_args=(-G "$generator"); fi

# configure PATCHGEN EMBED INGEST: configures one subset into its own folder; its log is kept
# beside it and its exit status in $work/<subset>.rc.
configure() {
  local dir="$work/$1-$2-$3" rc=0
  cmake -S "$src" -B "$dir" "${gen_args[@]}" -DTESSERA_BUILD_TESTS=ON \
    -DTESSERA_BUILD_BENCHMARKS=ON -DTESSERA_BUILD_PATCHGEN="$1" \
    -DTESSERA_BUILD_EMBED="$2" -DTESSERA_BUILD_INGEST="$3" >"$dir.log" 2>&1 || rc=$?
  echo "$rc" >"$dir.rc"
  rm -rf "$dir"
}

jobs="$(nproc)"
subsets=()
for patchgen in ON OFF; do
  for embed in ON OFF; do
    for ingest in ON OFF; do
      subsets+=("$patchgen $embed $ingest")
      # shellcheck disable=SC2086  # the subset is three words on purpose
      configure $patchgen $embed $ingest &
      while (($(jobs -rp | wc -l) >= jobs)); do wait -n; done
    done
  done
done
wait

failed=0
for subset in "${subsets[@]}"; do
  read -r patchgen embed ingest <<<"$subset"
  name="patchgen=$patchgen embed=$embed ingest=$ingest"
  base="$work/$patchgen-$embed-$ingest"
  if [[ "$(cat "$base.rc")" == 0 ]]; then
    echo "configured: $name"
  else
    echo "FAILED to configure: $name" >&2
    tail -n 30 "$base.log" >&2
    failed=1
  fi
done
exit "$failed"
