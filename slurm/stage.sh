# shellcheck shell=bash
# The part every tessera sbatch script shares: each sources it after its #SBATCH lines, from the
# folder in TESSERA_SCRIPTS (launchers/submit sets it) or, as Slurm runs a copy of the script from
# its spool folder, from the folder of the job's Command (scontrol show job); run by hand
# (bash slurm/X.sbatch), from the script's own folder. It defines, for the script's command line:
#   has_opt OPTION ARGS...  whether ARGS give OPTION (as "--x v" or "--x=v")
#   args                    "$@", plus --part TASK --parts PARTS in an array job with PARTS set
#   threads                 the cores of one task (SLURM_CPUS_PER_TASK), also OMP_NUM_THREADS
#   srun_args               srun's options (--cpus-per-task, --mpi=$TESSERA_SRUN_MPI)
#   run_stage PROGRAM ARGS  srun in the background, so that the USR1 trap runs while it does
#   per_part_exit RC        RC, but 0 for exit 3 (some slides failed, or none left: recorded in
#                           _SUCCESS) when TESSERA_ON_FAILED_SLIDES is continue (the default)
#   TESSERA_BUILD           the build folder (default: ./build of the submit directory)
# and requeues the job when Slurm signals USR1 near the time limit (--signal=B:USR1@...), unless
# TESSERA_NO_REQUEUE is set; the next start resumes from the markers.
has_opt() { local o="$1" a; shift; for a in "$@"; do [[ "$a" == "$o" || "$a" == "$o="* ]] && return 0; done; return 1; }
job_id="${SLURM_ARRAY_JOB_ID:+${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}}"
job_id="${job_id:-${SLURM_JOB_ID:-}}"
# shellcheck disable=SC2317  # called by the trap
requeue() { echo "tessera: time limit near, requeueing job $job_id" >&2; scontrol requeue "$job_id"; }
if [[ -z "${TESSERA_NO_REQUEUE:-}" ]]; then trap requeue USR1; fi
threads="${SLURM_CPUS_PER_TASK:-1}"
export OMP_NUM_THREADS="$threads" SRUN_CPUS_PER_TASK="$threads"
srun_args=(--cpus-per-task="$threads")
if [[ -n "${TESSERA_SRUN_MPI:-}" ]]; then srun_args+=(--mpi="$TESSERA_SRUN_MPI"); fi
run_stage() {
  srun "${srun_args[@]}" "$@" & local pid=$! rc
  while true; do
    set +e; wait "$pid"; rc=$?; set -e
    if ((rc > 128)) && kill -0 "$pid" 2>/dev/null; then continue; fi
    return "$rc"
  done
}
per_part_exit() {
  if (($1 == 3)) && [[ "${TESSERA_ON_FAILED_SLIDES:-continue}" == continue ]]; then
    echo "tessera: exit 3, some slides of this part failed or it has no patches (see its" \
      "_SUCCESS); continuing with the others" >&2
    return 0
  fi
  return "$1"
}
# shellcheck disable=SC2034  # used by the script that sources this file
args=("$@")
if [[ -n "${PARTS:-}" && -n "${SLURM_ARRAY_TASK_ID:-}" ]] && ! has_opt --part "$@"; then
  args+=(--part "$SLURM_ARRAY_TASK_ID" --parts "$PARTS")
fi
TESSERA_BUILD="${TESSERA_BUILD:-$PWD/build}"
echo "tessera: job $job_id on $(hostname), attempt $((${SLURM_RESTART_COUNT:-0} + 1))" >&2
