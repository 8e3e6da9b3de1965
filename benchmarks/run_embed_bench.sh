#!/usr/bin/env bash
# Runs the embed benchmark (docs/performance.md, "embed") on the CPU: each model of BENCH_MODELS in
# each precision of BENCH_PRECISIONS, batch 16, 2 torch threads, the first BENCH_PATCHES patches,
# 1 warm-up + 5 timed repetitions, one rank. Writes
# BENCH_OUT/embed-bench/embed_bench_<model>_<precision>_cpu_bs16_np1.json; the first call generates
# the slide and the patchgen run under BENCH_OUT/embed-bench/.
#
#   benchmarks/run_embed_bench.sh [BUILD_DIR] [extra embed_bench options...]
#
# Environment: BENCH_OUT (default <repo>/bench-out), BENCH_MODELS (default "vit-s16
# resnet50-trunc"), BENCH_PRECISIONS (default "fp32"; bf16 is 100-500x slower than fp32 on a CPU
# without AVX-512), BENCH_PATCHES (default 64), MPIEXEC_FLAGS (default "--allow-run-as-root --mca
# btl self,vader").
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
shift || true
out="${BENCH_OUT:-$root/bench-out}/embed-bench"
read -r -a mpi_flags <<< "${MPIEXEC_FLAGS:---allow-run-as-root --mca btl self,vader}"
driver="$build/benchmarks/embed_bench"
if [[ ! -x "$driver" ]]; then
  echo "error: '$driver' not found; configure with -DTESSERA_BUILD_BENCHMARKS=ON and build embed_bench first" >&2
  exit 2
fi

mkdir -p "$out"
for model in ${BENCH_MODELS:-vit-s16 resnet50-trunc}; do
  for precision in ${BENCH_PRECISIONS:-fp32}; do
    # One rank with 2 torch threads: unbound, so its threads get both cores (mpirun would pin a
    # lone rank to core 0).
    mpirun -np 1 --bind-to none "${mpi_flags[@]}" "$driver" \
      --run "$out/run" \
      --model "$model" --precision "$precision" --device cpu \
      --batch-size 16 --torch-threads 2 \
      --patches "${BENCH_PATCHES:-64}" --reps 5 --warmup 1 \
      --out "$out/embed_bench_${model}_${precision}_cpu_bs16_np1.json" \
      "$@"
  done
done
