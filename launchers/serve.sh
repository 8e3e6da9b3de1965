#!/usr/bin/env bash
# Serves an ingest output of a run on this machine and prints its URL:
#
#   launchers/serve.sh RUN [NAME] [--ranks R] [--build DIR] [SERVE_OPTIONS] [-- SERVE_OPTIONS]
#
# NAME is the folder under RUN/ingest (default: the only one there). R MPI ranks (default 1) hold
# the shards; rank 0 answers http://127.0.0.1:8470/ unless serve's options say --port/--bind.
# Every other option is serve's (`build/stages/serve/serve --help`; each takes a value, as
# `--port 8471` or `--port=8471`), before or after `--`. Stop it with Ctrl-C (or SIGTERM): the
# ranks stop together and the script exits 0.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build" ranks=1 run="" name="" extra=() help=0
usage="usage: launchers/serve.sh RUN [NAME] [--ranks R] [--build DIR] [SERVE_OPTIONS] [-- SERVE_OPTIONS]"
while (($#)); do
  case "$1" in
    -h|--help) help=1 ;;
    --ranks|--build)
      (($# >= 2)) || { echo "serve.sh: $1 needs a value" >&2; exit 2; }
      if [[ "$1" == --ranks ]]; then ranks="$2"; else build="$2"; fi
      shift ;;
    --ranks=*) ranks="${1#*=}" ;;
    --build=*) build="${1#*=}" ;;
    --) shift; extra+=("$@"); break ;;
    --*=*) extra+=("$1") ;;
    -*)
      (($# >= 2)) || { echo "serve.sh: serve's option $1 needs a value (see --help)" >&2; exit 2; }
      extra+=("$1" "$2"); shift ;;
    *) if [[ -z "$run" ]]; then run="$1"; elif [[ -z "$name" ]]; then name="$1"; else
         echo "serve.sh: too many arguments: '$1' (see --help)" >&2; exit 2; fi ;;
  esac
  shift
done
if ((help)); then
  echo "$usage"
  sed -n '5,10p' "$0" | sed 's/^# \{0,1\}//'
  if [[ -x "$build/stages/serve/serve" ]]; then
    printf "\nserve's options (%s):\n" "$build/stages/serve/serve"
    "$build/stages/serve/serve" --help
  fi
  exit 0
fi
[[ -n "$run" ]] || { echo "$usage" >&2; exit 2; }
[[ "$ranks" =~ ^[1-9][0-9]*$ ]] || { echo "serve.sh: --ranks must be a positive integer, got '$ranks'" >&2; exit 2; }
[[ -x "$build/stages/serve/serve" ]] || {
  echo "serve.sh: $build/stages/serve/serve is not built (cmake --build $build --target serve, or --build DIR)" >&2
  exit 2
}
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
