#!/usr/bin/env bash
# Runs the chain patchgen -> embed -> [aggregate ->] ingest on this machine with mpirun: the local
# counterpart of launchers/submit (same stages, same parts, same resume from markers when rerun).
#
#   launchers/chain.sh --run RUN --manifest CSV --model NAME|FILE.pt [options]
#   launchers/chain.sh --list-stages [--build DIR]
#
#   --ranks R             MPI ranks per stage (default 2)
#   --threads N           threads per rank: embed --torch-threads N, ingest --threads N,
#                         OMP_NUM_THREADS=N (default 1); ranks are not bound to cores
#                         (mpirun --bind-to none), so R x N should not exceed the cores
#   --parts P             cohort parts, run one after the other (default 1)
#   --tag T               embed output RUN/embed/T (default: the model name or file stem)
#   --aggregate NAME      also pool slide vectors: aggregate --name NAME (RUN/slides/NAME)
#   --slide-index NAME    also index them: ingest --level L --slides <--aggregate> --name NAME,
#                         L the level of --aggregate-args (--level slide|patient; default slide)
#   --patchgen-args 'OPTIONS', --embed-args 'OPTIONS', --aggregate-args 'OPTIONS',
#   --ingest-args 'OPTIONS'
#                         extra options of each stage (split on blanks; --ingest-args go to the
#                         patch-level ingest only)
#   --failed-slides continue|stop
#                         patchgen exit 3 (some slides failed): continue (default) with the
#                         slides that succeeded, or stop with exit 3
#   --build DIR           tessera build directory (default: ./build of the repository)
#   --list-stages         print the stages of the stage graph in chain order, how this launcher
#                         runs each (per-part, once, not-run) and its executable, and exit
# The stages, their order and executables come from the stage graph (tessera-status --graph;
# TESSERA_STATUS names another tessera-status). A stage of the graph this launcher does not know
# how to run is reported and skipped. A model must be named; built-ins (vit-tiny, vit-s16, ...)
# have random weights (demos, tests).
# Exit code: that of the first stage that failed, else 0; 2 for bad options.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build" ranks=2 threads=1 parts=1 run="" manifest="" model="" tag="" policy=continue
pg_args="" em_args="" ag_args="" in_args="" aggregate="" slide_index="" list=0
while (($#)); do
  case "$1" in
    --list-stages) list=1; shift; continue ;;
    --run) run="$2" ;;
    --manifest) manifest="$2" ;;
    --model) model="$2" ;;
    --tag) tag="$2" ;;
    --ranks) ranks="$2" ;;
    --threads) threads="$2" ;;
    --parts) parts="$2" ;;
    --aggregate) aggregate="$2" ;;
    --slide-index) slide_index="$2" ;;
    --patchgen-args) pg_args="$2" ;;
    --embed-args) em_args="$2" ;;
    --aggregate-args) ag_args="$2" ;;
    --ingest-args) in_args="$2" ;;
    --failed-slides) policy="$2" ;;
    --build) build="$2" ;;
    *) echo "chain.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  (($# >= 2)) || { echo "chain.sh: $1 needs a value" >&2; exit 2; }
  shift 2
done

# The stage graph: "name executable" per stage, in chain order.
status="${TESSERA_STATUS:-$build/stages/status/tessera-status}"
graph_text="$("$status" --graph)" || { echo "chain.sh: $status --graph failed" >&2; exit 2; }
mapfile -t graph < <(/usr/bin/python3 -c '
import json, sys
for s in json.load(sys.stdin)["stages"]:
    print(s["name"], s["executable"])' <<<"$graph_text")
# How this launcher runs each stage it knows: per part (one run per cohort part) or once.
how() {
  case "$1" in
    patchgen | embed) echo per-part ;;
    aggregate | ingest) echo once ;;
    *) echo not-run ;;
  esac
}
exe() { echo "$build/stages/$1/$1"; }

if ((list)); then
  for entry in "${graph[@]}"; do
    read -r name program <<<"$entry"
    echo "$name $(how "$name") $(exe "$program")"
  done
  exit 0
fi
if [[ -z "$run" || -z "$manifest" || -z "$model" ]]; then
  echo "chain.sh: --run, --manifest and --model are required (a model must be named)" >&2
  exit 2
fi
if [[ -n "$slide_index" && -z "$aggregate" ]]; then
  echo "chain.sh: --slide-index needs --aggregate NAME (the output it indexes)" >&2
  exit 2
fi
declare -A program=()
for entry in "${graph[@]}"; do
  read -r name prog <<<"$entry"
  program[$name]="$(exe "$prog")"
  if [[ "$(how "$name")" == not-run ]]; then
    echo "chain.sh: stage '$name' of the stage graph is not run by this launcher" >&2
  fi
done
for needed in patchgen embed ingest ${aggregate:+aggregate}; do
  [[ -n "${program[$needed]:-}" ]] || { echo "chain.sh: no stage '$needed' in the stage graph" >&2; exit 2; }
done
read -ra pg_extra <<<"$pg_args"
read -ra em_extra <<<"$em_args"
read -ra ag_extra <<<"$ag_args"
read -ra in_extra <<<"$in_args"
level=slide
for ((i = 0; i < ${#ag_extra[@]}; i++)); do
  case "${ag_extra[i]}" in
    --level) level="${ag_extra[i + 1]:-slide}" ;;
    --level=*) level="${ag_extra[i]#--level=}" ;;
  esac
done
tag_args=()
if [[ -n "$tag" ]]; then tag_args=(--tag "$tag"); fi
export OMP_NUM_THREADS="$threads"
mpi=(mpirun -np "$ranks" --oversubscribe --bind-to none)

# One run of `stage` (for cohort part `p` when it runs per part); the exit code policy applies.
run_stage() {
  local stage="$1" p="${2:-}" rc=0
  case "$stage" in
    patchgen)
      "${mpi[@]}" "${program[patchgen]}" --manifest "$manifest" --out "$run" \
        --part "$p" --parts "$parts" "${pg_extra[@]}" || rc=$?
      if ((rc == 3)) && [[ "$policy" == continue ]]; then
        echo "chain.sh: part $p: some slides failed (see its _SUCCESS); continuing with the others" >&2
        rc=0
      fi ;;
    embed)
      "${mpi[@]}" "${program[embed]}" --run "$run" --model "$model" "${tag_args[@]}" \
        --part "$p" --parts "$parts" --torch-threads "$threads" "${em_extra[@]}" || rc=$?
      if ((rc == 3)) && [[ "$policy" == continue ]]; then
        echo "chain.sh: part $p has no patches (its slides failed); continuing" >&2
        rc=0
      fi ;;
    aggregate)
      [[ -z "$aggregate" ]] && return 0
      "${mpi[@]}" "${program[aggregate]}" --run "$run" "${tag_args[@]}" --name "$aggregate" \
        "${ag_extra[@]}" || rc=$? ;;
    ingest)
      "${mpi[@]}" "${program[ingest]}" --run "$run" "${tag_args[@]}" --threads "$threads" \
        "${in_extra[@]}" || rc=$?
      if ((rc == 0)) && [[ -n "$slide_index" ]]; then
        "${mpi[@]}" "${program[ingest]}" --run "$run" --level "$level" --slides "$aggregate" \
          --name "$slide_index" --threads "$threads" || rc=$?
      fi ;;
  esac
  return "$rc"
}

rc=0
for ((p = 0; p < parts; p++)); do
  for entry in "${graph[@]}"; do
    read -r name _ <<<"$entry"
    if [[ "$(how "$name")" == per-part ]]; then run_stage "$name" "$p" || exit $?; fi
  done
done
for entry in "${graph[@]}"; do
  read -r name _ <<<"$entry"
  if [[ "$(how "$name")" == once ]]; then run_stage "$name" || exit $?; fi
done
exit "$rc"
