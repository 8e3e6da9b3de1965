#!/usr/bin/env bash
# Compares tessera with a CLAM-style Python reference (clam_extract.py, README.md here) on one
# generated slide and the same patch coordinates, CPU fp32, resnet50-trunc, batch 64. Per
# repetition, in an order rotated by one each repetition:
#   tessera-np1  patchgen + embed, mpirun -np 1 --bind-to none, --torch-threads 2
#   tessera-np2  patchgen + embed, mpirun -np 2 --bind-to core, --torch-threads 1
#   clam         clam_extract.py on patchgen's coordinates, 2 torch threads
#   model-only   embed_bench's model-only mode and clam_extract.py --model-only, MODEL_PATCHES each
# then clam_compare_report.py writes OUT_DIR/clam_compare.json and prints a table.
#
#   benchmarks/clam_reference/run_clam_compare.sh BUILD_DIR [OUT_DIR]
#
# Environment: REPS (3), SLIDE_WIDTH (6000), SLIDE_HEIGHT (5000), SLIDE_SEED (1), MODEL_PATCHES
# (64), BATCH_SIZE (64), NUM_WORKERS (0), PATCHGEN_ARGS (""), MPIEXEC_FLAGS (default
# "--allow-run-as-root --mca btl self,vader"), NICE (5: niceness of every timed command).
# Missing Debian packages are installed with apt-get when run as root.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [[ $# -lt 1 ]]; then
  echo "usage: $0 BUILD_DIR [OUT_DIR]" >&2
  exit 2
fi
build="$(realpath "$1")"
out="$(realpath -m "${2:-$root/bench-out/clam}")"
reps="${REPS:-3}"
width="${SLIDE_WIDTH:-6000}"
height="${SLIDE_HEIGHT:-5000}"
seed="${SLIDE_SEED:-1}"
model_patches="${MODEL_PATCHES:-64}"
batch="${BATCH_SIZE:-64}"
workers="${NUM_WORKERS:-0}"
read -r -a mpi_flags <<< "${MPIEXEC_FLAGS:---allow-run-as-root --mca btl self,vader}"
read -r -a patchgen_args <<< "${PATCHGEN_ARGS:-}"
nice=(nice -n "${NICE:-5}")
py=/usr/bin/python3  # Debian's interpreter with python3-torch; not the python3 on PATH
extract="$here/clam_extract.py"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# embed_bench pads a last partial batch with blank patches and counts only the real ones.
if (( model_patches < 1 || model_patches % batch != 0 )); then
  echo "error: MODEL_PATCHES ($model_patches) must be a multiple of BATCH_SIZE ($batch)" >&2
  exit 2
fi

for tool in tests/synthslide/synthslide stages/patchgen/patchgen stages/embed/embed \
            benchmarks/embed_bench; do
  if [[ ! -x "$build/$tool" ]]; then
    echo "error: '$build/$tool' not found; build it first" >&2
    exit 2
  fi
done

missing=()
for pkg in python3-torch python3-torchvision python3-openslide python3-pil python3-h5py; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$pkg")
  fi
done
if [[ ${#missing[@]} -gt 0 ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "error: missing Debian packages: ${missing[*]} (apt-get install them as root)" >&2
    exit 2
  fi
  echo "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

mkdir -p "$out/logs"
slide="$out/slide-${width}x${height}-seed${seed}.tif"
[[ -f "$slide" ]] || "$build/tests/synthslide/synthslide" --out "$slide" --width "$width" \
  --height "$height" --seed "$seed"
printf 'slide_id,path\nslide,%s\n' "$slide" > "$out/manifest.csv"

# The coordinates both sides use: one untimed patchgen run, exported as CSV. embed_bench reads its
# model-only patches from this run too.
coords_run="$out/coords-run"
rm -rf "$coords_run"
mpirun -np 1 --bind-to none "${mpi_flags[@]}" "$build/stages/patchgen/patchgen" \
  --manifest "$out/manifest.csv" --out "$coords_run" "${patchgen_args[@]}" \
  > "$out/logs/coords-patchgen.log" 2>&1
"$py" "$extract" --coords "$coords_run/patchgen/index.h5" --export-coords "$out/coords.csv"

times="$out/times.tsv"
printf 'rep\tcase\tstep\tseconds\n' > "$times"

# timed REP CASE STEP LOG COMMAND...: runs COMMAND niced, its output to LOG, and records its wall
# seconds in times.tsv.
timed() {
  local rep="$1" case="$2" step="$3" log="$4"
  shift 4
  local t0 t1
  t0=$(date +%s.%N)
  "${nice[@]}" "$@" > "$log" 2>&1
  t1=$(date +%s.%N)
  awk -v r="$rep" -v c="$case" -v s="$step" -v a="$t0" -v b="$t1" \
    'BEGIN { printf "%s\t%s\t%s\t%.3f\n", r, c, s, b - a }' >> "$times"
}

# tessera REP CASE NP BIND THREADS: patchgen then embed into a fresh run directory.
tessera() {
  local rep="$1" case="$2" np="$3" bind="$4" threads="$5"
  local run="$out/rep$rep/$case"
  rm -rf "$run"
  mkdir -p "$run"
  local mpi=(mpirun -np "$np" --bind-to "$bind" "${mpi_flags[@]}")
  timed "$rep" "$case" patchgen "$run.patchgen.log" "${mpi[@]}" "$build/stages/patchgen/patchgen" \
    --manifest "$out/manifest.csv" --out "$run" "${patchgen_args[@]}"
  timed "$rep" "$case" embed "$run.embed.log" "${mpi[@]}" "$build/stages/embed/embed" \
    --run "$run" --model resnet50-trunc --device cpu --precision fp32 --batch-size "$batch" \
    --torch-threads "$threads"
  "$py" "$extract" --coords "$run/patchgen/index.h5" --export-coords "$run.coords.csv" > /dev/null
  if ! cmp -s "$run.coords.csv" "$out/coords.csv"; then
    echo "error: $case's patchgen made other coordinates than $out/coords.csv" >&2
    exit 1
  fi
}

clam() {
  local rep="$1"
  mkdir -p "$out/rep$rep"
  timed "$rep" clam extract "$out/rep$rep/clam.log" "$py" "$extract" --coords "$out/coords.csv" \
    --out "$out/rep$rep/clam_features.h5" --json "$out/rep$rep/clam.json" \
    --batch-size "$batch" --num-workers "$workers" --threads 2
}

model_only() {
  local rep="$1"
  mkdir -p "$out/rep$rep"
  rm -rf "$coords_run/embed/embed-bench"
  timed "$rep" model-only tessera "$out/rep$rep/embed_bench.log" \
    mpirun -np 1 --bind-to none "${mpi_flags[@]}" "$build/benchmarks/embed_bench" \
    --run "$coords_run" --model resnet50-trunc --device cpu --precision fp32 \
    --batch-size "$batch" --torch-threads 2 --patches "$model_patches" --reps 1 --warmup 0 \
    --out "$out/rep$rep/embed_bench.json"
  timed "$rep" model-only torchvision "$out/rep$rep/clam_model_only.log" "$py" "$extract" \
    --model-only --patches "$model_patches" --batch-size "$batch" --threads 2 \
    --json "$out/rep$rep/clam_model_only.json"
}

cases=(tessera-np1 tessera-np2 clam model-only)
for ((rep = 0; rep < reps; rep++)); do
  for ((k = 0; k < ${#cases[@]}; k++)); do
    c="${cases[$(( (k + rep) % ${#cases[@]} ))]}"
    echo "$(date -u +%H:%M:%S) repetition $rep: $c"
    case "$c" in
      tessera-np1) tessera "$rep" "$c" 1 none 2 ;;
      tessera-np2) tessera "$rep" "$c" 2 core 1 ;;
      clam) clam "$rep" ;;
      model-only) model_only "$rep" ;;
    esac
  done
done

"$py" "$here/clam_compare_report.py" --out-dir "$out" --build "$build" --reps "$reps" \
  --slide "$slide" --width "$width" --height "$height" --seed "$seed" \
  --model-patches "$model_patches" --batch-size "$batch" --num-workers "$workers" \
  --patchgen-args "${PATCHGEN_ARGS:-}" --mpiexec-flags "${mpi_flags[*]}" \
  --git-revision "$(git -C "$root" rev-parse HEAD)" --json "$out/clam_compare.json"
