#!/usr/bin/env bash
# The embed benchmark on a lent GPU machine (benchmarks/gpu/README.md): unpacks the carried Debian
# packages (.debs/*.deb) into DEBS_ROOT, builds embed_bench there against python3's CUDA libtorch,
# and runs it on one GPU for every model and precision asked. Writes under $OUT: build.log,
# env.txt (GPU, driver, torch, CUDA, cuDNN), bench.log and one JSON report per model and precision.
#
#   bash benchmarks/gpu/run_gpu_bench.sh        (device tool: carry [".debs"], timeout_s 570)
#
# Environment (defaults in brackets): GPU_BENCH_MODELS ["vit-l16 vit-g14"], GPU_BENCH_PRECISIONS
# ["bf16 fp16"], GPU_BENCH_PATCHES [2048], GPU_BENCH_BATCH [64], GPU_BENCH_THREADS [16],
# GPU_BENCH_DEVICE [cuda], DEBS_ROOT [/opt/debs], TORCH_DIR [python3's torch.utils.cmake_prefix_path
# + /Torch], BUILD_DIR [<repo>/build-gpu]. The last four let the script be tried on a CPU machine.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${OUT:?set OUT to the folder for the results}"
debs="${DEBS_ROOT:-/opt/debs}"
lib="$debs/usr/lib/x86_64-linux-gnu"
build="${BUILD_DIR:-$root/build-gpu}"
mkdir -p "$out" "$debs"

# 1. Debian's libraries under $debs; their pkg-config files point there.
for f in "$root"/.debs/*.deb; do dpkg -x "$f" "$debs"; done
find "$lib/pkgconfig" "$lib/openmpi/lib/pkgconfig" -name '*.pc' -type f -exec sed -i \
  -e "s|=/usr|=$debs/usr|" -e "s| -\([IL]\)/usr| -\1$debs/usr|g" -e '/^Requires.private/d' {} +
cat > "$debs/pkg-config" <<EOF
#!/bin/sh
export LD_LIBRARY_PATH="$lib" PKG_CONFIG_LIBDIR="$lib/pkgconfig:$debs/usr/share/pkgconfig"
exec "$debs/usr/bin/pkgconf" "\$@"
EOF
chmod +x "$debs/pkg-config"

# 2. Build embed_bench only (no tests) against the machine's libtorch. MPI is given explicitly
# (its compiler wrappers need Open MPI's mpicc); the serial HDF5 (libhdf5-dev, libhdf5-103-1) and
# libxxhash are found through their pkg-config files, rewritten above.
torch_dir="${TORCH_DIR:-$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')/Torch}"
if [[ -d /usr/local/cuda/bin ]]; then export PATH="/usr/local/cuda/bin:$PATH"; fi  # nvcc for libtorch
{
  TORCH_CUDA_ARCH_LIST=9.0 cmake -S "$root" -B "$build" -G Ninja -DTESSERA_BUILD_TESTS=OFF \
    -DTorch_DIR="$torch_dir" \
    -DCMAKE_PREFIX_PATH="$debs/usr" -DCMAKE_CXX_FLAGS="-isystem $debs/usr/include" \
    -DPKG_CONFIG_EXECUTABLE="$debs/pkg-config" \
    -DMPI_SKIP_COMPILER_WRAPPER=ON \
    -DMPI_C_HEADER_DIR="$lib/openmpi/include" -DMPI_CXX_HEADER_DIR="$lib/openmpi/include" \
    -DMPI_C_LIB_NAMES=mpi -DMPI_CXX_LIB_NAMES="mpi_cxx;mpi" \
    -DMPI_mpi_LIBRARY="$lib/libmpi.so.40" -DMPI_mpi_cxx_LIBRARY="$lib/libmpi_cxx.so.40" \
    -DOPENSSL_ROOT_DIR="$debs/usr"
  cmake --build "$build" -j "$(nproc)" --target embed_bench
} > "$out/build.log" 2>&1 || { tail -n 60 "$out/build.log"; exit 1; }

# 3. The run: Debian's libraries first, Open MPI as an isolated singleton relocated to $debs.
debs_path="$lib:$lib/hdf5/serial:$lib/openmpi/lib:$lib/blas:$lib/lapack:$debs/lib/x86_64-linux-gnu"
export LD_LIBRARY_PATH="$debs_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PREFIX="$debs/usr" OMPI_MCA_ess_singleton_isolated=1
export OMPI_MCA_mca_base_component_path="$lib/openmpi/lib/openmpi3"
export PMIX_MCA_mca_base_component_path="$lib/pmix2/lib/pmix"
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
{
  nvidia-smi || true
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
    "cudnn", torch.backends.cudnn.version(), "device",
    torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)' || true
  nproc
  ldd "$build/benchmarks/embed_bench" | grep -E 'not found|/opt/|torch|cuda' || true
} > "$out/env.txt" 2>&1

device="${GPU_BENCH_DEVICE:-cuda}"
batch="${GPU_BENCH_BATCH:-64}"
for model in ${GPU_BENCH_MODELS:-vit-l16 vit-g14}; do
  for precision in ${GPU_BENCH_PRECISIONS:-bf16 fp16}; do
    "$build/benchmarks/embed_bench" \
      --run "$root/bench-out/embed-bench-gpu/run" --slide-width 24000 --slide-height 16000 \
      --model "$model" --precision "$precision" --device "$device" \
      --batch-size "$batch" --torch-threads "${GPU_BENCH_THREADS:-16}" \
      --patches "${GPU_BENCH_PATCHES:-2048}" --reps 3 --warmup 1 \
      --out "$out/embed_bench_${model}_${precision}_${device}_bs${batch}.json" \
      >> "$out/bench.log" 2>&1 || echo "embed_bench failed: $model $precision" >> "$out/bench.log"
    tail -n 3 "$out/bench.log"
  done
done
