#!/usr/bin/env bash
# Sweeps patchgen's reading settings on the benchmark slide (docs/performance.md): reader threads
# per rank, patches per hand-over batch, batches read ahead and HDF5 chunk size, one rank. Every
# point runs patchgen_bench's `patchgen` and `decode_limit` modes; the points are interleaved
# (round r runs every point once, in an order rotated by r) so that drift of the machine spreads
# over all of them. Writes
#   OUT/sweep.csv   one row per point: parameters, median/min/max patches/s of patchgen and of the
#                   decode limit, the median ratio of the two, the repetitions, the shard XXH3
#   OUT/sweep.png   patches/s per point (median; bars: min-max) beside the decode limit (gnuplot)
#   OUT/reports/t<T>_b<B>_a<A>_c<C>_r<R>.json  every patchgen_bench report
#
#   benchmarks/run_patchgen_sweep.sh [BUILD_DIR] [extra patchgen_bench options...]
#
# Environment: SWEEP_OUT (default <repo>/bench-out/patchgen-sweep), SWEEP_THREADS (default
# "1 2 3"), SWEEP_BATCH ("16 64"), SWEEP_AHEAD ("8"), SWEEP_CHUNK ("64"), SWEEP_REPS (2),
# SWEEP_CACHE (warm), MPIEXEC_FLAGS (default "--allow-run-as-root --mca btl self,vader"). The slide
# is BENCH_SLIDE (default <repo>/bench-out/synth-40000x30000-seed1.tif, generated when missing).
# gnuplot (gnuplot-nox) is installed with apt-get when running as root and missing; without it the
# PNG is skipped with a message.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
shift || true
out="${SWEEP_OUT:-$root/bench-out/patchgen-sweep}"
slide="${BENCH_SLIDE:-$root/bench-out/synth-40000x30000-seed1.tif}"
read -r -a mpi_flags <<< "${MPIEXEC_FLAGS:---allow-run-as-root --mca btl self,vader}"
driver="$build/benchmarks/patchgen_bench"
if [[ ! -x "$driver" ]]; then
  echo "error: '$driver' not found; configure with -DTESSERA_BUILD_BENCHMARKS=ON and build patchgen_bench first" >&2
  exit 2
fi
if ! command -v gnuplot > /dev/null && [[ "$(id -u)" == 0 ]]; then
  apt-get install -y -q gnuplot-nox > /dev/null || echo "warning: gnuplot-nox not installed" >&2
fi
mkdir -p "$out/reports"

points=()
for chunk in ${SWEEP_CHUNK:-64}; do
  for threads in ${SWEEP_THREADS:-1 2 3}; do
    for batch in ${SWEEP_BATCH:-16 64}; do
      for ahead in ${SWEEP_AHEAD:-8}; do points+=("$threads $batch $ahead $chunk"); done
    done
  done
done

# A lone rank unbound: its reader threads and writer get every core (mpirun would pin it to one).
bench() {
  mpirun -np 1 --bind-to none "${mpi_flags[@]}" "$driver" --slide "$slide" \
    --work "$out/work" --modes patchgen,decode_limit --cache "${SWEEP_CACHE:-warm}" \
    --log-level warn "$@"
}

# One untimed run first: generates the slide when missing and warms the page cache.
bench --reps 1 --warmup 0 --out "$out/reports/warmup.json" "$@" > /dev/null
reps="${SWEEP_REPS:-2}"
for ((r = 0; r < reps; ++r)); do
  for ((k = 0; k < ${#points[@]}; ++k)); do
    read -r threads batch ahead chunk <<< "${points[$(((k + r) % ${#points[@]}))]}"
    echo "round $r: reader-threads $threads, read-batch $batch, read-ahead $ahead, chunk $chunk"
    bench --reps 1 --warmup 0 --reader-threads "$threads" --read-batch "$batch" \
      --read-ahead "$ahead" --chunk-patches "$chunk" \
      --out "$out/reports/t${threads}_b${batch}_a${ahead}_c${chunk}_r${r}.json" "$@" > /dev/null
  done
done

/usr/bin/python3 - "$out" <<'PY'
import csv, glob, json, os, statistics, sys
out = sys.argv[1]
groups = {}
for path in sorted(glob.glob(os.path.join(out, "reports", "t*_r*.json"))):
    doc = json.load(open(path))
    p = doc["parameters"]
    key = (p["reader_threads"], p["read_batch"], p["read_ahead"], p["chunk_patches"])
    rep = doc["repetitions"][0]
    g = groups.setdefault(key, {"patchgen": [], "decode_limit": [], "ratio": [], "xxh3": set()})
    g["patchgen"].append(rep["patchgen"]["patches_per_s"])
    g["decode_limit"].append(rep["decode_limit"]["patches_per_s"])
    g["ratio"].append(rep["ratio_decode_limit"])
    g["xxh3"].update(doc["output"]["shard_xxh3"])
with open(os.path.join(out, "sweep.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["reader_threads", "read_batch", "read_ahead", "chunk_patches",
                "patchgen_median", "patchgen_min", "patchgen_max", "decode_limit_median",
                "decode_limit_min", "decode_limit_max", "ratio_decode_limit_median", "reps",
                "shard_xxh3"])
    for key in sorted(groups):
        g = groups[key]
        row = list(key)
        for name in ("patchgen", "decode_limit"):
            xs = g[name]
            row += [round(statistics.median(xs), 1), round(min(xs), 1), round(max(xs), 1)]
        row += [round(statistics.median(g["ratio"]), 3), len(g["patchgen"]),
                " ".join(sorted(g["xxh3"]))]
        w.writerow(row)
print("wrote " + os.path.join(out, "sweep.csv"))
PY

if ! command -v gnuplot > /dev/null; then
  echo "gnuplot not found: no $out/sweep.png (apt-get install gnuplot-nox)" >&2
  exit 0
fi
gnuplot <<EOF
set terminal pngcairo size 1000,560 noenhanced
set output "$out/sweep.png"
set datafile separator ","
set title "patchgen sweep, one rank: patches/s per point (median; bars: min-max)"
set ylabel "patches/s"
set xlabel "reader threads / read batch / read ahead / chunk patches"
set xtics rotate by -30
set key outside right
set grid ytics
set yrange [0:*]
set offsets 0.5, 0.5, 0, 0
plot "$out/sweep.csv" every ::1 using (\$0 - 0.08):5:6:7:xtic(sprintf("%d/%d/%d/%d", \$1, \$2, \$3, \$4)) \
       with yerrorbars pointtype 7 title "patchgen", \
     "$out/sweep.csv" every ::1 using (\$0 + 0.08):8:9:10 with yerrorbars pointtype 5 \
       title "decode limit of the touched tiles"
EOF
echo "wrote $out/sweep.png"
