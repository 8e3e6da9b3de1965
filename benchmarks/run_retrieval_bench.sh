#!/usr/bin/env bash
# Runs retrieval_bench (docs/performance.md, "Retrieval"): the whole chain (patchgen, embed,
# ingest, aggregate, ingest --level slide) on a labelled synthetic cohort per built-in model, then
# patch search, slide-vector search and mosaic voting with the tissue classes as labels, leaving
# out the query's patient. Writes bench-out/retrieval/retrieval_bench.json and prints the table
# rows of docs/performance.md. The cohort and the runs stay in bench-out/retrieval/work, so a
# second invocation with the same cohort reruns only what is missing (a new model) and the queries.
#
#   benchmarks/run_retrieval_bench.sh [BUILD_DIR] [extra retrieval_bench options...]
#
# The record in docs/performance.md:
#   benchmarks/run_retrieval_bench.sh build --models vit-tiny,resnet50-trunc,vit-s16 \
#       --slides 16 --patients 10 --repetitions 2
#
# Environment: BENCH_OUT (output folder, default <repo>/bench-out).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
shift || true
out="${BENCH_OUT:-$root/bench-out}/retrieval"
driver="$build/benchmarks/retrieval_bench"
for exe in "$driver" "$build/stages/patchgen/patchgen" "$build/stages/embed/embed" \
           "$build/stages/aggregate/aggregate" "$build/stages/ingest/ingest" \
           "$build/stages/query/query"; do
  if [[ ! -x "$exe" ]]; then
    echo "error: '$exe' not found; configure with -DTESSERA_BUILD_BENCHMARKS=ON and build retrieval_bench, patchgen, embed," \
         "aggregate, ingest and query first" >&2
    exit 2
  fi
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"
"$driver" --build "$build" --dir "$out/work" --out "$out/retrieval_bench.json" "$@"
