#!/usr/bin/env bash
# Runs the patchgen benchmark (docs/performance.md) at R=1 and R=2 and writes
# bench-out/patchgen_bench_npR.json. patchgen_bench generates the 40,000 x 30,000 px slide
# (bench-out/synth-40000x30000-seed1.tif) when it is missing.
#
#   benchmarks/run_patchgen_bench.sh [BUILD_DIR] [extra patchgen_bench options...]
#
# Environment: BENCH_OUT (output folder, default <repo>/bench-out), BENCH_RANKS (default "1 2"),
# MPIEXEC_FLAGS (default "--allow-run-as-root --mca btl self,vader").
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
shift || true
out="${BENCH_OUT:-$root/bench-out}"
read -r -a mpi_flags <<< "${MPIEXEC_FLAGS:---allow-run-as-root --mca btl self,vader}"
driver="$build/benchmarks/patchgen_bench"
if [[ ! -x "$driver" ]]; then
  echo "error: '$driver' not found; configure with -DTESSERA_BUILD_BENCHMARKS=ON and build patchgen_bench first" >&2
  exit 2
fi

mkdir -p "$out"
for ranks in ${BENCH_RANKS:-1 2}; do
  # patchgen runs a reader thread beside each rank's writer: a lone rank gets every core (mpirun
  # would pin it to core 0), more ranks one core each.
  if ((ranks == 1)); then bind=(--bind-to none); else bind=(--bind-to core); fi
  mpirun -np "$ranks" "${bind[@]}" "${mpi_flags[@]}" "$driver" \
    --slide "$out/synth-40000x30000-seed1.tif" \
    --work "$out/patchgen-work" \
    --out "$out/patchgen_bench_np$ranks.json" \
    "$@"
done
