#!/usr/bin/env bash
# The embed benchmark on a lent GPU machine (benchmarks/gpu/README.md): unpacks the carried Debian
# packages (.debs/*.deb, or one pruned .debs/debs.tar.xz) into DEBS_ROOT, builds embed_bench against
# python3's CUDA libtorch from a copy of the source (by default the commit archived here into
# .debs/src.tar.gz, else the working tree), and runs it on one GPU for every model and precision
# asked. Writes under $OUT: build.log, env.txt (GPU, driver, torch, CUDA, cuDNN, compilers),
# bench.log and one JSON report per model and precision.
#
#   bash benchmarks/gpu/run_gpu_bench.sh        (device tool: carry [".debs"], timeout_s 540; README.md has the call)
#
# Environment (defaults in brackets):
#   GPU_BENCH_RUNS      MODEL:PRECISION pairs, run in this order [every precision of
#                       GPU_BENCH_PRECISIONS ["bf16 fp16"], for each every model of
#                       GPU_BENCH_MODELS ["vit-l16 vit-g14"]]
#   GPU_BENCH_PATCHES [2048], GPU_BENCH_BATCH [64], GPU_BENCH_THREADS [16], GPU_BENCH_REPS [3],
#   GPU_BENCH_WARMUP [1], GPU_BENCH_DEVICE [cuda]
#   GPU_BENCH_DEADLINE_S  seconds after the script's start by which every run must end: a run
#                       starts only with GPU_BENCH_MIN_RUN_S [60] left, and is stopped at the
#                       deadline [0: none]. Set it below the device call's timeout_s so that the
#                       JSONs already written come back whatever happens.
#   GPU_BENCH_SRC       a tar.gz of the source tree to build [<repo>/.debs/src.tar.gz when present,
#                       else the working tree]; <repo>/.debs/REVISION, when present, is the git
#                       revision recorded in the reports (the copy there is no git checkout).
#   GPU_BENCH_TARGET [embed_bench], DEBS_ROOT [/opt/debs], TORCH_DIR [python3's
#   torch.utils.cmake_prefix_path + /Torch], BUILD_DIR [<repo>/build-gpu], SRC_DIR
#   [/tmp/tessera-src]. These let the script be tried on a CPU machine.
set -euo pipefail
shopt -s nullglob

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${OUT:?set OUT to the folder for the results}"
debs="${DEBS_ROOT:-/opt/debs}"
lib="$debs/usr/lib/x86_64-linux-gnu"
build="${BUILD_DIR:-$root/build-gpu}"
src="${SRC_DIR:-/tmp/tessera-src}"
mkdir -p "$out" "$debs"
stamp() { echo "[$(date -u +%H:%M:%S) +${SECONDS}s] $*"; }

# 1. Debian's libraries under $debs; their pkg-config files point there.
stamp "unpacking" | tee -a "$out/bench.log"
for f in "$root"/.debs/*.tar.xz; do tar -C "$debs" -xJf "$f"; done
for f in "$root"/.debs/*.deb; do dpkg -x "$f" "$debs"; done
find "$lib/pkgconfig" "$lib/openmpi/lib/pkgconfig" -name '*.pc' -type f -exec sed -i \
  -e "s|=/usr|=$debs/usr|" -e "s| -\([IL]\)/usr| -\1$debs/usr|g" -e '/^Requires.private/d' {} +
cat > "$debs/pkg-config" <<EOS
#!/bin/sh
export LD_LIBRARY_PATH="$lib" PKG_CONFIG_LIBDIR="$lib/pkgconfig:$debs/usr/share/pkgconfig"
exec "$debs/usr/bin/pkgconf" "\$@"
EOS
chmod +x "$debs/pkg-config"
# libtorch's pip wheel ships its own fmt (v12) in torch/include, which its -isystem puts ahead of
# Debian's: spdlog (Debian's, built against fmt 9) then fails to compile in model.cpp. Debian's fmt
# and spdlog alone, through -I, come first (-I directories are searched before -isystem ones).
mkdir -p "$debs/first"
ln -sfn "$debs/usr/include/fmt" "$debs/first/fmt"
ln -sfn "$debs/usr/include/spdlog" "$debs/first/spdlog"

# 2. The source, copied: an archived commit keeps others' uncommitted work in the working tree out
# of the build. Stages this benchmark does not need (ingest, query, vector: FAISS, which the machine
# lacks) are dropped from the copy's CMake files if they are added there unconditionally. An
# unchanged source is not copied again, so a rerun on a warm machine rebuilds nothing.
archive="${GPU_BENCH_SRC:-$root/.debs/src.tar.gz}"
if [[ -f "$archive" ]]; then
  key="$(sha256sum "$archive" | cut -c1-64)"
else
  key="working-tree"
fi
if [[ "$(cat "$src/.gpu-bench-source" 2>/dev/null)" != "$key" ]]; then
  rm -rf "$src" && mkdir -p "$src"
  if [[ -f "$archive" ]]; then
    tar -C "$src" -xzf "$archive"
  else
    tar -C "$root" --exclude=./.debs --exclude=./.git --exclude='./build*' --exclude=./bench-out \
      -cf - . | tar -C "$src" -xf -
  fi
  sed -i -E '/^[[:space:]]*add_subdirectory\((stages\/ingest|stages\/query|vector)[[:space:]]*\)/d' \
    "$src/CMakeLists.txt" "$src/common/CMakeLists.txt"
  if [[ -f "$root/.debs/REVISION" ]]; then
    sed -i "s|set(_rev \"unknown\")|set(_rev \"$(tr -cd '[:alnum:]._-' < "$root/.debs/REVISION")\")|" \
      "$src/cmake/TesseraVersion.cmake"
  fi
  echo "$key" > "$src/.gpu-bench-source"
fi

# 3. Build embed_bench only (no tests, no ingest) against the machine's libtorch. MPI is given
# explicitly (its compiler wrappers need Open MPI's mpicc); the serial HDF5 (libhdf5-dev,
# libhdf5-103-1) and libxxhash are found through their pkg-config files, rewritten above.
stamp "configuring and building" | tee -a "$out/bench.log"
torch_dir="${TORCH_DIR:-$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')/Torch}"
if [[ -d /usr/local/cuda/bin ]]; then export PATH="/usr/local/cuda/bin:$PATH"; fi  # nvcc for libtorch
{
  TORCH_CUDA_ARCH_LIST=9.0 cmake -S "$src" -B "$build" -G Ninja -DTESSERA_BUILD_TESTS=OFF \
    -DTESSERA_BUILD_BENCHMARKS=ON -DTESSERA_BUILD_EMBED=ON -DTESSERA_BUILD_PATCHGEN=ON \
    -DTESSERA_BUILD_INGEST=OFF \
    -DTorch_DIR="$torch_dir" \
    -DCMAKE_PREFIX_PATH="$debs/usr" -DCMAKE_CXX_FLAGS="-I$debs/first -isystem $debs/usr/include" \
    -DPKG_CONFIG_EXECUTABLE="$debs/pkg-config" \
    -DMPI_SKIP_COMPILER_WRAPPER=ON \
    -DMPI_C_HEADER_DIR="$lib/openmpi/include" -DMPI_CXX_HEADER_DIR="$lib/openmpi/include" \
    -DMPI_C_LIB_NAMES=mpi -DMPI_CXX_LIB_NAMES="mpi_cxx;mpi" \
    -DMPI_mpi_LIBRARY="$lib/libmpi.so.40" -DMPI_mpi_cxx_LIBRARY="$lib/libmpi_cxx.so.40" \
    -DOPENSSL_ROOT_DIR="$debs/usr"
  cmake --build "$build" -j "$(nproc)" --target "${GPU_BENCH_TARGET:-embed_bench}"
} > "$out/build.log" 2>&1 || { tail -n 60 "$out/build.log"; exit 1; }
stamp "built" | tee -a "$out/bench.log"

# 4. The run: Debian's libraries first, Open MPI as an isolated singleton relocated to $debs.
{
  nvidia-smi || true
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
    "cudnn", torch.backends.cudnn.version(), "device",
    torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)' || true
  echo "nproc $(nproc)"
  echo "source $key revision $(cat "$root/.debs/REVISION" 2>/dev/null || echo unknown)"
  c++ --version | head -n 1 || true
  cmake --version | head -n 1 || true
  nvcc --version | tail -n 2 || true
  grep -E 'CMAKE_BUILD_TYPE|CMAKE_CXX_COMPILER:|TESSERA_BUILD' "$build/CMakeCache.txt" || true
} > "$out/env.txt" 2>&1
debs_path="$lib:$lib/hdf5/serial:$lib/openmpi/lib:$lib/blas:$lib/lapack:$debs/lib/x86_64-linux-gnu"
export LD_LIBRARY_PATH="$debs_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PREFIX="$debs/usr" OMPI_MCA_ess_singleton_isolated=1
export OMPI_MCA_mca_base_component_path="$lib/openmpi/lib/openmpi3"
export PMIX_MCA_mca_base_component_path="$lib/pmix2/lib/pmix"
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench="$build/benchmarks/embed_bench"
ldd "$bench" 2>&1 | grep -E 'not found|/opt/|torch|cuda|nvidia' >> "$out/env.txt" || true

device="${GPU_BENCH_DEVICE:-cuda}"
batch="${GPU_BENCH_BATCH:-64}"
runs="${GPU_BENCH_RUNS:-}"
if [[ -z "$runs" ]]; then
  for precision in ${GPU_BENCH_PRECISIONS:-bf16 fp16}; do
    for model in ${GPU_BENCH_MODELS:-vit-l16 vit-g14}; do runs+="$model:$precision "; done
  done
fi
deadline="${GPU_BENCH_DEADLINE_S:-0}"
for pair in $runs; do
  model="${pair%%:*}" precision="${pair#*:}"
  limit=()
  if (( deadline > 0 )); then
    left=$(( deadline - SECONDS ))
    if (( left < ${GPU_BENCH_MIN_RUN_S:-60} )); then
      stamp "skipped $model $precision: ${left}s left before the deadline" | tee -a "$out/bench.log"
      continue
    fi
    limit=(timeout -k 10 "$left")
  fi
  stamp "running $model $precision" >> "$out/bench.log"
  "${limit[@]}" "$bench" \
    --run "$root/bench-out/embed-bench-gpu/run" --slide-width 24000 --slide-height 16000 \
    --model "$model" --precision "$precision" --device "$device" \
    --batch-size "$batch" --torch-threads "${GPU_BENCH_THREADS:-16}" \
    --patches "${GPU_BENCH_PATCHES:-2048}" --reps "${GPU_BENCH_REPS:-3}" \
    --warmup "${GPU_BENCH_WARMUP:-1}" \
    --out "$out/embed_bench_${model}_${precision}_${device}_bs${batch}.json" \
    >> "$out/bench.log" 2>&1 || stamp "embed_bench failed ($?): $model $precision" >> "$out/bench.log"
  tail -n 2 "$out/bench.log"
done
stamp "done" | tee -a "$out/bench.log"
