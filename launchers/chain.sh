#!/usr/bin/env bash
# Runs the chain patchgen -> embed -> ingest on this machine with mpirun: the local counterpart of
# launchers/submit (same stages, same parts, same resume from markers when rerun).
#
#   launchers/chain.sh --run RUN --manifest CSV --model NAME|FILE.pt [options]
#
#   --ranks R             MPI ranks per stage (default 2)
#   --threads N           threads per rank: embed --torch-threads N, ingest --threads N,
#                         OMP_NUM_THREADS=N (default 1); ranks are not bound to cores
#                         (mpirun --bind-to none), so R x N should not exceed the cores
#   --parts P             cohort parts, run one after the other (default 1)
#   --tag T               embed output RUN/embed/T (default: the model name or file stem)
#   --patchgen-args 'OPTIONS', --embed-args 'OPTIONS', --ingest-args 'OPTIONS'
#                         extra options of each stage (split on blanks)
#   --failed-slides continue|stop
#                         patchgen exit 3 (some slides failed): continue (default) with the
#                         slides that succeeded, or stop with exit 3
#   --build DIR           tessera build directory (default: ./build of the repository)
# A model must be named; built-ins (vit-tiny, vit-s16, ...) have random weights (demos, tests).
# Exit code: that of the first stage that failed, else 0.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build" ranks=2 threads=1 parts=1 run="" manifest="" model="" tag="" policy=continue
pg_args="" em_args="" in_args=""
while (($#)); do
  case "$1" in
    --run) run="$2" ;;
    --manifest) manifest="$2" ;;
    --model) model="$2" ;;
    --tag) tag="$2" ;;
    --ranks) ranks="$2" ;;
    --threads) threads="$2" ;;
    --parts) parts="$2" ;;
    --patchgen-args) pg_args="$2" ;;
    --embed-args) em_args="$2" ;;
    --ingest-args) in_args="$2" ;;
    --failed-slides) policy="$2" ;;
    --build) build="$2" ;;
    *) echo "chain.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift 2
done
if [[ -z "$run" || -z "$manifest" || -z "$model" ]]; then
  echo "chain.sh: --run, --manifest and --model are required (a model must be named)" >&2
  exit 2
fi
read -ra pg_extra <<<"$pg_args"
read -ra em_extra <<<"$em_args"
read -ra in_extra <<<"$in_args"
tag_args=()
if [[ -n "$tag" ]]; then tag_args=(--tag "$tag"); fi
export OMP_NUM_THREADS="$threads"
mpi=(mpirun -np "$ranks" --oversubscribe --bind-to none)

for ((p = 0; p < parts; p++)); do
  rc=0
  "${mpi[@]}" "$build/stages/patchgen/patchgen" --manifest "$manifest" --out "$run" \
    --part "$p" --parts "$parts" "${pg_extra[@]}" || rc=$?
  if ((rc == 3)) && [[ "$policy" == continue ]]; then
    echo "chain.sh: part $p: some slides failed (see its _SUCCESS); continuing with the others" >&2
  elif ((rc != 0)); then
    exit "$rc"
  fi
  rc=0
  "${mpi[@]}" "$build/stages/embed/embed" --run "$run" --model "$model" "${tag_args[@]}" \
    --part "$p" --parts "$parts" --torch-threads "$threads" "${em_extra[@]}" || rc=$?
  if ((rc == 3)) && [[ "$policy" == continue ]]; then
    echo "chain.sh: part $p has no patches (its slides failed); continuing" >&2
  elif ((rc != 0)); then
    exit "$rc"
  fi
done
"${mpi[@]}" "$build/stages/ingest/ingest" --run "$run" "${tag_args[@]}" --threads "$threads" \
  "${in_extra[@]}"
