#!/usr/bin/env bash
# Strong-scaling sweep of one stage (benchmarks/sweep/README.md): runs the stage's benchmark driver
# on the same input at every R of --ranks, ROUNDS times with the rank counts interleaved (round 1:
# R = 1, 2, 4; round 2: 1, 2, 4; ...) so that drift of a shared machine hits every R alike. Each run
# writes the driver's JSON report to OUT/<stage>_npR_rK.json and appends one line to
# OUT/launches.jsonl (the launcher command, binding, oversubscription, load average before and
# after, wall time, exit code); the driver's output goes to OUT/logs/. benchmarks/sweep/collect.py
# turns OUT into a CSV, plots and the model fit.
#
#   benchmarks/sweep/run_sweep.sh --stage patchgen|embed|ingest --ranks 1,2,4 --out DIR
#       [--build DIR] [--rounds N] [--threads T] [--cores C] [--launcher mpirun|srun]
#       [-- extra driver options]
#
# --threads T: threads of each rank (embed: --torch-threads T; ingest: T FAISS threads per rank;
# patchgen ranks are single-threaded). mpirun binds each rank to its T cores (--map-by slot:PE=T
# --bind-to core) while R x T <= C cores (default: nproc); beyond that it runs --oversubscribe
# --bind-to none, and launches.jsonl says "oversubscribed": true. --launcher srun (inside a Slurm
# allocation, see sweep.sbatch) uses srun -n R --cpus-per-task=T --cpu-bind=cores (ingest: mpirun
# with the allocation's hosts, bound to cores).
# What each driver gets from this script:
#   patchgen  mpirun -np R patchgen_bench --work OUT/work/patchgen --out ...
#   embed     mpirun -np R embed_bench --run OUT/work/embed/run --torch-threads T --out ...
#   ingest    ingest_bench --ranks R --threads R*T --mpirun '<launcher>' --scratch
#             OUT/work/ingest-npR --skip-query --out ...   (ingest_bench starts mpirun itself)
# Environment: MPIEXEC_FLAGS (added to mpirun, default "--mca btl self,vader"), TESSERA_SRUN_MPI
# (srun --mpi plugin, e.g. pmix).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
stage="" ranks="" out="" build="$root/build" rounds=1 threads=1 cores="$(nproc)" launcher=mpirun
while (($#)); do
  case "$1" in
    --stage) stage="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --cores) cores="$2"; shift 2 ;;
    --launcher) launcher="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *) echo "error: unknown option '$1'" >&2; usage ;;
  esac
done
extra=("$@")
[[ "$stage" =~ ^(patchgen|embed|ingest)$ ]] || { echo "error: --stage patchgen|embed|ingest" >&2; exit 2; }
[[ "$ranks" =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "error: --ranks 1,2,4,..." >&2; exit 2; }
[[ -n "$out" ]] || { echo "error: --out DIR is required" >&2; exit 2; }
[[ "$launcher" =~ ^(mpirun|srun)$ ]] || { echo "error: --launcher mpirun|srun" >&2; exit 2; }
driver="$build/benchmarks/${stage}_bench"
[[ -x "$driver" ]] || { echo "error: '$driver' not found; configure with -DTESSERA_BUILD_BENCHMARKS=ON and build ${stage}_bench" >&2; exit 2; }
mkdir -p "$out/logs"
out="$(cd "$out" && pwd)"
IFS=, read -r -a rank_list <<< "$ranks"
read -r -a mpi_extra <<< "${MPIEXEC_FLAGS:---mca btl self,vader}"

# Sets `launch` (argv prefix that starts R ranks), `binding` and `oversubscribed` for R ranks.
launch_for() {
  local r="$1"
  oversubscribed=false
  if [[ "$launcher" == srun && "$stage" != ingest ]]; then
    launch=(srun -n "$r" --cpus-per-task="$threads" --cpu-bind=cores)
    if [[ -n "${TESSERA_SRUN_MPI:-}" ]]; then launch+=(--mpi="$TESSERA_SRUN_MPI"); fi
    binding="srun --cpu-bind=cores, $threads cpus per task"
    return
  fi
  launch=(mpirun --report-bindings -x "OMP_NUM_THREADS=$threads" "${mpi_extra[@]}")
  if [[ $(id -u) -eq 0 && "$stage" != ingest ]]; then launch+=(--allow-run-as-root); fi
  # Under Slurm (ingest_bench's mpirun) the allocation decides where ranks go.
  if [[ "$launcher" == srun ]] || ((r * threads <= cores)); then
    launch+=(--map-by "slot:PE=$threads" --bind-to core)
    binding="core, $threads per rank"
  else
    launch+=(--oversubscribe --bind-to none)
    binding="none ($r ranks x $threads threads > $cores cores)"
    oversubscribed=true
  fi
  # ingest_bench appends -np R itself.
  if [[ "$stage" != ingest ]]; then launch+=(-np "$r"); fi
}

json_string() { local s="${1//\\/\\\\}"; s="${s//\"/\\\"}"; printf '"%s"' "$s"; }
load_average() { read -r a b c _ < /proc/loadavg; printf '[%s, %s, %s]' "$a" "$b" "$c"; }

status=0
for round in $(seq 1 "$rounds"); do
  for r in "${rank_list[@]}"; do
    name="${stage}_np${r}_r${round}"
    report="$out/$name.json"
    log="$out/logs/$name.log"
    launch_for "$r"
    case "$stage" in
      patchgen) cmd=("${launch[@]}" "$driver" --work "$out/work/patchgen" --out "$report" "${extra[@]}") ;;
      embed) cmd=("${launch[@]}" "$driver" --run "$out/work/embed/run" --torch-threads "$threads"
                  --out "$report" "${extra[@]}") ;;
      ingest) cmd=("$driver" --bin-dir "$build" --ranks "$r" --threads "$((r * threads))"
                   --mpirun "${launch[*]}" --scratch "$out/work/ingest-np$r" --skip-query
                   --out "$report" "${extra[@]}") ;;
    esac
    echo "sweep: $stage R=$r round $round/$rounds (binding: $binding): ${cmd[*]}" >&2
    load_before="$(load_average)"
    start_utc="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    start=$(date +%s.%N)
    rc=0
    OMP_NUM_THREADS="$threads" "${cmd[@]}" > "$log" 2>&1 || rc=$?
    end=$(date +%s.%N)
    if ((rc != 0)); then
      echo "sweep: $name failed with exit code $rc; see $log" >&2
      status=1
    fi
    {
      printf '{"stage": "%s", "ranks": %d, "round": %d, "threads_per_rank": %d, "cores": %d, ' \
        "$stage" "$r" "$round" "$threads" "$cores"
      printf '"launcher": %s, "binding": %s, "oversubscribed": %s, "command": %s, ' \
        "$(json_string "$launcher")" "$(json_string "$binding")" "$oversubscribed" \
        "$(json_string "${cmd[*]}")"
      printf '"report": %s, "log": %s, "start_utc": "%s", "wall_s": %s, "exit_code": %d, ' \
        "$(json_string "$report")" "$(json_string "$log")" "$start_utc" \
        "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')" "$rc"
      printf '"load_average_before": %s, "load_average_after": %s}\n' \
        "$load_before" "$(load_average)"
    } >> "$out/launches.jsonl"
  done
done
exit "$status"
