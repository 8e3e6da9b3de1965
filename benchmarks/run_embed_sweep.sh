#!/usr/bin/env bash
# Runs embed_bench (docs/performance.md, "Benchmark harness") over a grid of embed's --batch-size,
# embed's --prefetch (batches read and prepared ahead: embed's only reader setting; it has no
# reader-thread option) and patchgen's --chunk-patches (one patchgen run per chunk size, all of
# one generated slide), one rank, and writes
#   OUT/sweep.csv  one row per point: parameters, median/min/max tiles/s of every mode, the
#                  store efficiency and the report's path
#   OUT/sweep.png  median tiles/s per point and mode, min-max as error bars (gnuplot)
#   OUT/reports/embed_bench_bs<B>_pf<P>_chunk<C>.json  the reports
#
#   benchmarks/run_embed_sweep.sh [BUILD_DIR] [extra embed_bench options...]
#
# Environment: SWEEP_OUT (default <repo>/bench-out/embed-sweep), SWEEP_BATCH (default "8 16"),
# SWEEP_PREFETCH (default "1 4"), SWEEP_CHUNK (default "16 64"), SWEEP_MODEL (vit-tiny),
# SWEEP_PATCHES (64), SWEEP_REPS (2), SWEEP_CACHE (warm), SWEEP_THREADS (2), MPIEXEC_FLAGS (default
# "--allow-run-as-root --mca btl self,vader"). Needs jq; gnuplot (gnuplot-nox) is installed with
# apt-get when running as root and missing, otherwise the PNG is skipped with a message.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
shift || true
out="${SWEEP_OUT:-$root/bench-out/embed-sweep}"
read -r -a mpi_flags <<< "${MPIEXEC_FLAGS:---allow-run-as-root --mca btl self,vader}"
driver="$build/benchmarks/embed_bench"
if [[ ! -x "$driver" ]]; then
  echo "error: '$driver' not found; configure with -DTESSERA_BUILD_BENCHMARKS=ON and build embed_bench first" >&2
  exit 2
fi
if ! command -v gnuplot > /dev/null && [[ "$(id -u)" == 0 ]]; then
  apt-get install -y -q gnuplot-nox > /dev/null || echo "warning: gnuplot-nox not installed" >&2
fi

modes=(model-only cached store wsi)
mkdir -p "$out/reports"
csv="$out/sweep.csv"
{
  printf 'batch_size,prefetch,chunk_patches,cache_policy'
  for mode in "${modes[@]}"; do printf ',%s_median,%s_min,%s_max' "$mode" "$mode" "$mode"; done
  printf ',store_efficiency,report\n'
} > "$csv"

# A 5,000 x 4,000 px slide holds about 150 tissue patches: enough for 64.
slide_flags=(--slide "$out/synth-5000x4000-seed1.tif" --slide-width 5000 --slide-height 4000)
for chunk in ${SWEEP_CHUNK:-16 64}; do
  for batch in ${SWEEP_BATCH:-8 16}; do
    for prefetch in ${SWEEP_PREFETCH:-1 4}; do
      report="$out/reports/embed_bench_bs${batch}_pf${prefetch}_chunk${chunk}.json"
      # Unbound, so the rank's torch threads get every core (mpirun would pin a lone rank).
      mpirun -np 1 --bind-to none "${mpi_flags[@]}" "$driver" \
        --run "$out/run-chunk$chunk" --chunk-patches "$chunk" "${slide_flags[@]}" \
        --model "${SWEEP_MODEL:-vit-tiny}" --device cpu --torch-threads "${SWEEP_THREADS:-2}" \
        --batch-size "$batch" --prefetch "$prefetch" --cache "${SWEEP_CACHE:-warm}" \
        --patches "${SWEEP_PATCHES:-64}" --reps "${SWEEP_REPS:-2}" --warmup 1 \
        --out "$report" "$@"
      jq -r --arg report "$report" '
        [.parameters.batch_size, .parameters.prefetch, .parameters.chunk_patches, .cache_policy]
        + ([.summary.modes["model-only", "cached", "store", "wsi"].tiles_per_s
            | .median, .min, .max])
        + [.efficiency.store, $report] | @csv' "$report" >> "$csv"
    done
  done
done
echo "wrote $csv"

if ! command -v gnuplot > /dev/null; then
  echo "gnuplot not found: no $out/sweep.png (apt-get install gnuplot-nox)" >&2
  exit 0
fi
gnuplot <<EOF
set terminal pngcairo size 1000,560 noenhanced
set output "$out/sweep.png"
set datafile separator ","
set title "embed_bench sweep: tiles/s per point (median; bars: min-max)"
set ylabel "tiles/s"
set xlabel "batch / prefetch / chunk"
set xtics rotate by -30
set key outside right
set grid ytics
set offsets 0.5, 0.5, 0, 0
plot "$csv" every ::1 using 0:(NaN):xtic(sprintf("%d/%d/%d", \$1, \$2, \$3)) notitle, \
     for [m=0:3] "$csv" every ::1 using (\$0 + (m - 1.5) * 0.12):(column(5 + 3 * m)):(column(6 + 3 * m)):(column(7 + 3 * m)) \
     with yerrorbars pointtype 7 title word("model-only cached store wsi", m + 1)
EOF
echo "wrote $out/sweep.png"
