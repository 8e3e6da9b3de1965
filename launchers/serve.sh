#!/usr/bin/env bash
# Serves an ingest output of a run on this machine and prints its URL:
#
#   launchers/serve.sh RUN [NAME] [--ranks R] [--build DIR] [-- SERVE_OPTIONS]
#
# NAME is the folder under RUN/ingest (default: the only one there). R MPI ranks (default 1) hold
# the shards; rank 0 answers http://127.0.0.1:8470/ unless SERVE_OPTIONS say --port/--bind.
# Stop it with Ctrl-C.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build" ranks=1 run="" name="" extra=()
while (($#)); do
  case "$1" in
    --ranks) ranks="$2"; shift ;;
    --build) build="$2"; shift ;;
    --) shift; extra=("$@"); break ;;
    -*) echo "serve.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
    *) if [[ -z "$run" ]]; then run="$1"; elif [[ -z "$name" ]]; then name="$1"; else
         echo "serve.sh: too many arguments" >&2; exit 2; fi ;;
  esac
  shift
done
[[ -n "$run" ]] || { echo "usage: launchers/serve.sh RUN [NAME] [--ranks R] [-- SERVE_OPTIONS]" >&2; exit 2; }
if [[ -z "$name" ]]; then
  shopt -s nullglob
  catalogs=("$run"/ingest/*/catalog.json)
  if ((${#catalogs[@]} != 1)); then
    echo "serve.sh: $run/ingest holds ${#catalogs[@]} indexes; name one of them" >&2; exit 2
  fi
  name="$(basename "$(dirname "${catalogs[0]}")")"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
# mpirun in a session of its own, so that Ctrl-C (or SIGTERM) reaches this script only, which
# passes SIGTERM to the ranks (mpirun's children) themselves: they stop together and mpirun exits
# with their code (0). mpirun signalled itself ends the job as an abort and exits 1.
setsid mpirun -np "$ranks" --bind-to none "$build/stages/serve/serve" --index "$run/ingest/$name" \
  "${extra[@]}" &
job=$!
# shellcheck disable=SC2317  # called by the trap
stop_ranks() { pkill -TERM -P "$job" || kill -TERM "$job" 2>/dev/null || true; }
trap stop_ranks INT TERM
status=0
wait "$job" || status=$?
while kill -0 "$job" 2>/dev/null; do  # a trapped signal ended the wait, not the job
  status=0
  wait "$job" || status=$?
done
exit "$status"
