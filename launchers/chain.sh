#!/usr/bin/env bash
# Runs the chain of the stage graph (patchgen -> embed -> [aggregate ->] ingest) on this machine
# with mpirun: the local counterpart of launchers/submit (same stages, same parts, same resume from
# markers when rerun).
#
#   launchers/chain.sh --run RUN --manifest CSV --model NAME|FILE.pt [options]
#   launchers/chain.sh --list-stages [--build DIR]
#
#   --ranks R             MPI ranks per stage (default 2)
#   --threads N           threads per rank: each stage's threads option (embed --torch-threads N,
#                         ingest --threads N), OMP_NUM_THREADS=N (default 1); ranks are not bound
#                         to cores (mpirun --bind-to none), so R x N should not exceed the cores
#   --parts P             cohort parts, run one after the other (default 1)
#   --tag T               embed output RUN/embed/T (default: the model name or file stem), given
#                         to every stage that reads embed's outputs
#   --STAGE NAME          run a stage the graph runs only when named, into its folder NAME:
#                         --aggregate NAME pools slide vectors into RUN/slides/NAME
#   --STAGE-args 'OPTIONS'
#                         extra options of a stage of the graph (split on blanks), e.g.
#                         --patchgen-args, --embed-args, --aggregate-args, --ingest-args
#   --slide-index NAME    also index the --aggregate output: ingest --level L --slides <aggregate>
#                         --name NAME, L the level of --aggregate-args (default slide)
#   --failed-slides continue|stop
#                         exit 3 of a per-part stage (some slides failed, or a part has no
#                         patches; recorded in its _SUCCESS): continue (default) with the slides
#                         that succeeded, or stop with exit 3
#   --build DIR           tessera build directory (default: ./build of the repository)
#   --dry-run             print the commands, one a line, and run none
#   --list-stages         print the stages of the stage graph in chain order, how this launcher
#                         runs each (per_part, once, when_named) and its executable, and exit
# Every command is built from the stage graph alone (tessera-status --graph; TESSERA_STATUS names
# another tessera-status): the stage's run option and RUN, the chain options it takes (--manifest,
# --model), --tag for a stage that reads embed, its name when named, --part p --parts P when per
# part, its threads option, then its --STAGE-args. A model must be named: built-ins (vit-tiny,
# vit-s16, ...) have random weights (demos, tests).
# Exit code: that of the first stage that failed, else 0; 2 for bad options.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build" ranks=2 threads=1 parts=1 run="" tag="" policy=continue slide_index="" list=0 dry=0
declare -A given=()   # chain options a stage may take: --manifest, --model
declare -A extra=()   # STAGE -> its --STAGE-args
declare -A named=()   # STAGE -> NAME for stages run only when named
while (($#)); do
  case "$1" in
    --list-stages) list=1; shift; continue ;;
    --dry-run) dry=1; shift; continue ;;
    --run) run="$2" ;;
    --manifest | --model) given[$1]="$2" ;;
    --tag) tag="$2" ;;
    --ranks) ranks="$2" ;;
    --threads) threads="$2" ;;
    --parts) parts="$2" ;;
    --slide-index) slide_index="$2" ;;
    --failed-slides) policy="$2" ;;
    --build) build="$2" ;;
    --*-args) extra[${1:2:-5}]="$2" ;;
    --?*) named[${1:2}]="$2" ;;
    *) echo "chain.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  (($# >= 2)) || { echo "chain.sh: $1 needs a value" >&2; exit 2; }
  shift 2
done

# The stage graph, one stage a line in chain order:
# name executable launch run_option name_option threads_option reads_embed chain_options...
status="${TESSERA_STATUS:-$build/stages/status/tessera-status}"
graph_text="$("$status" --graph)" || { echo "chain.sh: $status --graph failed" >&2; exit 2; }
mapfile -t graph < <(/usr/bin/python3 -c '
import json, sys
for s in json.load(sys.stdin)["stages"]:
    print(s["name"], s["executable"], s["launch"], s["run_option"], s["name_option"] or "-",
          s["threads_option"] or "-", int("embed" in s["reads"]), *s["chain_options"])' <<<"$graph_text")
exe() { echo "$build/stages/$1/$1"; }

if ((list)); then
  for entry in "${graph[@]}"; do
    read -r name program launch _ <<<"$entry"
    echo "$name $launch $(exe "$program")"
  done
  exit 0
fi
declare -A stage_of=()
for entry in "${graph[@]}"; do read -r name _ <<<"$entry"; stage_of[$name]=1; done
for s in "${!extra[@]}" "${!named[@]}"; do
  [[ -n "${stage_of[$s]:-}" ]] || { echo "chain.sh: no stage '$s' in the stage graph (option --$s...)" >&2; exit 2; }
done
if [[ -z "$run" ]]; then echo "chain.sh: --run is required" >&2; exit 2; fi
if [[ -n "$slide_index" && -z "${named[aggregate]:-}" ]]; then
  echo "chain.sh: --slide-index needs --aggregate NAME (the output it indexes)" >&2
  exit 2
fi
# The stages this chain runs, and the chain options they need.
runs=()
for entry in "${graph[@]}"; do
  read -r name _ launch _ _ _ _ options <<<"$entry"
  if [[ "$launch" == when_named && -z "${named[$name]:-}" ]]; then continue; fi
  if [[ "$launch" != when_named && -n "${named[$name]:-}" ]]; then
    echo "chain.sh: stage '$name' always runs; name it with --$name-args instead" >&2; exit 2
  fi
  for o in $options; do
    [[ -n "${given[$o]:-}" ]] || { echo "chain.sh: $name needs $o (a model must be named)" >&2; exit 2; }
  done
  runs+=("$entry")
done
export OMP_NUM_THREADS="$threads"
mpi=(mpirun -np "$ranks" --oversubscribe --bind-to none)

go() { if ((dry)); then printf '%q ' "$@" | sed 's/ $//'; echo; else "$@"; fi; }

# The command of one stage (for cohort part `p` when it runs per part), from its graph entry.
command_of() {
  local entry="$1" p="${2:-}" name program launch run_option name_option threads_option reads_embed
  local options o words
  read -r name program launch run_option name_option threads_option reads_embed options <<<"$entry"
  cmd=("${mpi[@]}" "$(exe "$program")" "$run_option" "$run")
  for o in $options; do cmd+=("$o" "${given[$o]}"); done
  if [[ -n "$tag" && ("$name_option" == --tag || "$reads_embed" == 1) ]]; then cmd+=(--tag "$tag"); fi
  if [[ "$launch" == when_named ]]; then cmd+=("$name_option" "${named[$name]}"); fi
  if [[ "$launch" == per_part ]]; then cmd+=(--part "$p" --parts "$parts"); fi
  if [[ "$threads_option" != - ]]; then cmd+=("$threads_option" "$threads"); fi
  read -ra words <<<"${extra[$name]:-}"
  cmd+=("${words[@]}")
}

# Runs one stage; exit 3 of a per-part stage continues under --failed-slides continue.
run_stage() {
  local entry="$1" p="${2:-}" rc=0 launch
  read -r _ _ launch _ <<<"$entry"
  command_of "$entry" "$p"
  go "${cmd[@]}" || rc=$?
  if ((rc == 3)) && [[ "$launch" == per_part && "$policy" == continue ]]; then
    echo "chain.sh: ${entry%% *} part $p exited 3 (failed slides or no patches, see its _SUCCESS); continuing with the others" >&2
    rc=0
  fi
  return "$rc"
}

# The slide-level index of the --aggregate output: a second run of ingest.
slide_index_run() {
  local level=slide words i
  read -ra words <<<"${extra[aggregate]:-}"
  for ((i = 0; i < ${#words[@]}; i++)); do
    case "${words[i]}" in
      --level) level="${words[i + 1]:-slide}" ;;
      --level=*) level="${words[i]#--level=}" ;;
    esac
  done
  go "${mpi[@]}" "$(exe ingest)" --run "$run" --level "$level" --slides "${named[aggregate]}" \
    --name "$slide_index" --threads "$threads"
}

for ((p = 0; p < parts; p++)); do
  for entry in "${runs[@]}"; do
    [[ "$(cut -d' ' -f3 <<<"$entry")" == per_part ]] && { run_stage "$entry" "$p" || exit $?; }
  done
done
for entry in "${runs[@]}"; do
  [[ "$(cut -d' ' -f3 <<<"$entry")" == per_part ]] && continue
  run_stage "$entry" || exit $?
  if [[ "${entry%% *}" == ingest && -n "$slide_index" ]]; then slide_index_run || exit $?; fi
done
exit 0
