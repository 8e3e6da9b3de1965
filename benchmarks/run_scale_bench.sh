#!/usr/bin/env bash
# Runs the cohort-scale coordination benchmark (docs/performance.md) at R = 1, 2 and 4 ranks and
# writes bench-out/scale/scale_bench_<patches>_npR.json. R above the core count is oversubscribed.
#
#   benchmarks/run_scale_bench.sh [BUILD_DIR] [extra scale_bench options...]
#
# Environment: BENCH_OUT (output folder, default <repo>/bench-out), BENCH_RANKS (default "1 2 4"),
# PATCHES_TOTAL (default: scale_bench's), MPIEXEC_FLAGS (default "--allow-run-as-root --bind-to
# none --oversubscribe --mca btl self,vader").
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
shift || true
out="${BENCH_OUT:-$root/bench-out}"
read -r -a mpi_flags <<< "${MPIEXEC_FLAGS:---allow-run-as-root --bind-to none --oversubscribe --mca btl self,vader}"
driver="$build/benchmarks/scale_bench"
if [[ ! -x "$driver" ]]; then
  echo "error: '$driver' not found; configure with -DTESSERA_BUILD_BENCHMARKS=ON and build scale_bench first" >&2
  exit 2
fi

total=()
if [[ -n "${PATCHES_TOTAL:-}" ]]; then
  total=(--patches-total "$PATCHES_TOTAL")
fi
mkdir -p "$out/scale"
for ranks in ${BENCH_RANKS:-1 2 4}; do
  mpirun -np "$ranks" "${mpi_flags[@]}" "$driver" --scratch "$out/scale" "${total[@]}" "$@"
done
