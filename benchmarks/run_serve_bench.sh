#!/usr/bin/env bash
# Runs serve_bench (docs/performance.md, "serve"): the service against in-process search on an
# index (default: RUN/ingest/ivf1024 of the 1M x 384 synthetic run made as below), and DeepZoom
# tiles from a small run of two synthetic tiled JPEG slides (made here once with
# launchers/chain.sh and the vit-tiny model). Writes bench-out/serve/serve_bench.json.
#
#   benchmarks/run_serve_bench.sh [BUILD_DIR] [INDEX] [extra serve_bench options...]
#
# The 1M index (the synthetic run of ingest_bench, kept, then one IVF1024,Flat ingest of 4 shards):
#   build/benchmarks/ingest_bench --sizes 384:1000000 --indexes "IVF1024,Flat" --shards 4 \
#     --ranks 1 --skip-query --keep --scratch bench-out/serve/gen
#   mpirun -np 1 build/stages/ingest/ingest --run bench-out/serve/gen/run-d384-n1000000 \
#     --tag synthetic --name ivf1024 --index IVF1024,Flat --shards 4 --train-size 50000 --threads 2
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
index="${2:-}"
shift 2 || shift $# || true
out="${BENCH_OUT:-$root/bench-out}/serve"
mkdir -p "$out/tiles"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [[ -z "$index" ]]; then
  index="$out/gen/run-d384-n1000000/ingest/ivf1024"
fi
[[ -f "$index/catalog.json" ]] || { echo "error: no index at '$index' (see the header of $0)" >&2; exit 2; }

tiles="$out/tiles"
if [[ ! -f "$tiles/run/ingest/vit-tiny/catalog.json" ]]; then
  {
    echo "slide_id,path,patient_id"
    for i in 1 2; do
      [[ -f "$tiles/s$i.tif" ]] || "$build/tests/synthslide/synthslide" --out "$tiles/s$i.tif" \
        --width 8000 --height 6000 --seed "$i" --tile-size 256 >&2
      echo "s$i,s$i.tif,p$i"
    done
  } > "$tiles/manifest.csv"
  "$root/launchers/chain.sh" --build "$build" --run "$tiles/run" --manifest "$tiles/manifest.csv" \
    --model vit-tiny --ranks 2 --threads 1 --embed-args "--batch-size 32"
fi
"$build/benchmarks/serve_bench" --index "$index" --tile-index "$tiles/run/ingest/vit-tiny" \
  --scratch "$out" --out "$out/serve_bench.json" "$@"
