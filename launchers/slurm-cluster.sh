#!/usr/bin/env bash
# A single-node Slurm cluster on localhost for tests and trials: munged, slurmctld and slurmd run
# as the calling user (root) with every file (key, sockets, state, logs, slurm.conf) under one
# directory; no systemd, no host name dependence. Needs Debian's slurmctld, slurmd, slurm-client
# and munge packages (.ci/bootstrap installs them).
#
#   launchers/slurm-cluster.sh start|stop|status|env [DIR]   (default DIR: $TESSERA_SLURM_DIR,
#                                                             else /tmp/tessera-slurm)
# start   writes DIR/slurm.conf, starts the daemons, waits until the node is idle (exit 1 if not
#         within 60 s, with the logs' tails), prints `export SLURM_CONF=DIR/slurm.conf`
# stop    ends the daemons started from DIR (by their pid files) and their jobs
# status  prints sinfo and squeue; exit 0 when the cluster answers, 1 otherwise
# env     prints `export SLURM_CONF=DIR/slurm.conf` (for eval)
# Client commands (sbatch, squeue, scontrol) find the cluster through SLURM_CONF.
# TESSERA_SLURM_CPUS (default 8) is the node's CPU count as Slurm sees it: more than the machine
# has, so that the parts of a test chain run side by side.
set -euo pipefail
cmd="${1:?usage: slurm-cluster.sh start|stop|status|env [DIR]}"
dir="$(realpath -m "${2:-${TESSERA_SLURM_DIR:-/tmp/tessera-slurm}}")"
conf="$dir/slurm.conf"

pid_of() { [[ -f "$dir/$1.pid" ]] && cat "$dir/$1.pid"; }
alive() { local pid; pid="$(pid_of "$1")" && [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; }

stop() {
  local name pid i
  for name in slurmd slurmctld munged; do
    alive "$name" || continue
    pid="$(pid_of "$name")"
    kill "$pid"
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fi
  done
}

write_conf() {
  local cpus="${TESSERA_SLURM_CPUS:-8}" mem
  mem="$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')"
  cat > "$conf" <<EOF
# Written by launchers/slurm-cluster.sh; every path is under $dir.
ClusterName=tessera-local
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=${TESSERA_SLURM_PORT:-6817}
SlurmdPort=$(( ${TESSERA_SLURM_PORT:-6817} + 1 ))
SlurmUser=$(id -un)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
DependencyParameters=kill_invalid_depend
SlurmdParameters=config_overrides
MinJobAge=3600
ReturnToService=2
JobRequeue=1
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MailProg=/bin/true
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
  if alive slurmctld && alive slurmd && alive munged; then
    echo "slurm-cluster: already running from $dir" >&2
    echo "export SLURM_CONF=$conf"
    return 0
  fi
  stop
  rm -rf "$dir/ctld" "$dir/spool"
  mkdir -p "$dir/munge" "$dir/ctld" "$dir/spool"
  chmod 755 "$dir" "$dir/munge"
  if [[ ! -f "$dir/munge/munge.key" ]]; then
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chmod 600 "$dir/munge/munge.key"
  fi
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed"
  write_conf
  export SLURM_CONF="$conf"
  slurmctld -f "$conf"
  slurmd -f "$conf" -N localhost
  local i state=""
  for ((i = 0; i < 600; i++)); do
    state="$(sinfo -h -N -o %T 2>/dev/null | head -n 1 || true)"
    if [[ "$state" == idle* || "$state" == mix* || "$state" == alloc* ]]; then
      echo "export SLURM_CONF=$conf"
      return 0
    fi
    sleep 0.1
  done
  echo "slurm-cluster: node not idle after 60 s (state '$state'); logs in $dir" >&2
  tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" "$dir/munged.log" >&2 || true
  return 1
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  status)
    export SLURM_CONF="$conf"
    sinfo && squeue
    ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *) echo "usage: slurm-cluster.sh start|stop|status|env [DIR]" >&2; exit 2 ;;
esac
