#!/usr/bin/env bash
# Runs the stage-3 benchmark (ingest and query, docs/performance.md): a synthetic run of N rows
# per D:N size, the real ingest executable (mpirun -np 1 and 2, --bind-to none: ranks share the
# cores, each with threads / R FAISS threads) against raw FAISS builds from memory, and the real
# query executable over 1, 4 and 8 shards. Writes bench-out/ingest/ingest_bench_<N>.json.
#
#   benchmarks/run_ingest_bench.sh [BUILD_DIR] [extra ingest_bench options...]
#
# The record in docs/performance.md: benchmarks/run_ingest_bench.sh build --sizes 384:1000000 \
#     --indexes "Flat;IVF1024,Flat;IVF1024,PQ48np"  (then 1536:100000 with --skip-query)
# A smoke run (about a minute):                     benchmarks/run_ingest_bench.sh build-bench \
#     --sizes 384:20000,1536:5000 --flat-reps 1 --queries 100 --single-queries 20
#
# Environment: BENCH_OUT (output folder, default <repo>/bench-out).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
shift || true
out="${BENCH_OUT:-$root/bench-out}"
driver="$build/benchmarks/ingest_bench"
for exe in "$driver" "$build/stages/ingest/ingest" "$build/stages/query/query"; do
  if [[ ! -x "$exe" ]]; then
    echo "error: '$exe' not found; configure with -DTESSERA_BUILD_BENCHMARKS=ON and build ingest_bench, ingest and query first" >&2
    exit 2
  fi
done

mkdir -p "$out/ingest"
"$driver" --bin-dir "$build" --scratch "$out/ingest" "$@"
