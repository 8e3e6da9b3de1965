#!/usr/bin/env bash
# Integration tests of slurm/*.sbatch and launchers/submit on a real one-node Slurm cluster
# (launchers/slurm-cluster.sh). Run by CTest (tests/slurm/CMakeLists.txt, label slurm):
#
#   slurm_test.sh CASE   with TESSERA_SOURCE_DIR, TESSERA_BUILD_DIR, TESSERA_SLURM_WORK set
#
# Cases: start, stop (the cluster fixture); scripts (no cluster: dry run and refusals); chain (a
# clean P = 2 chain with aggregate and a slide-level index, the reference of the others; a killed
# slide index resubmitted alone); rerun_failed (an embed part killed, a rerun
# with fewer ranks refused, --rerun-failed redoes only that part and ingest); requeue (a running
# embed part requeued resumes). Every case fails with a message naming what differs.
set -euo pipefail
case_name="${1:?usage: slurm_test.sh start|stop|scripts|chain|rerun_failed|requeue}"
src="${TESSERA_SOURCE_DIR:?}"
build="${TESSERA_BUILD_DIR:?}"
work="${TESSERA_SLURM_WORK:?}"
# Unix socket paths are short: the cluster lives under /tmp, named after the work folder.
key="$(printf '%s' "$work" | cksum | cut -d' ' -f1)"
cluster="/tmp/tessera-slurm-$key"
export TESSERA_SLURM_PORT=$((20000 + key % 20000 * 2))
export SLURM_CONF="$cluster/slurm.conf"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
submit="$src/launchers/submit"

fail() { echo "FAIL: $*" >&2; exit 1; }
log() { echo "-- $*" >&2; }

cohort() {  # 4 small slides, 2 per part
  local dir="$work/cohort" i
  [[ -f "$dir/manifest.csv" ]] && return 0
  mkdir -p "$dir/slides"
  {
    echo "slide_id,path,patient_id"
    for i in 1 2 3 4; do
      "$build/tests/synthslide/synthslide" --out "$dir/slides/s$i.tif" --width $((1400 + 100 * i)) \
        --height 1200 --seed "$i" >/dev/null
      echo "s$i,slides/s$i.tif,p$(((i + 1) / 2))"
    done
  } > "$dir/manifest.csv.tmp"
  mv "$dir/manifest.csv.tmp" "$dir/manifest.csv"
}

submit_chain() {  # RUN EXTRA_EMBED_ARGS [SUBMIT OPTIONS]: prints the job ids (patchgen embed ...)
  cohort
  "$submit" --run "$1" --manifest "$work/cohort/manifest.csv" --parts 2 --model vit-tiny \
    --build "$build" --srun-mpi pmix --patchgen-args "--patch-size 64" \
    --embed-args "--batch-size 8 $2" --ingest-args "--shards 2" "${@:3}" \
    --sbatch "--ntasks-per-node=2 --cpus-per-task=1 --mem=1G --time=10:00" | tee "$1.jobs" >&2
  awk '{print $2}' "$1.jobs"
}

# Waits until none of the jobs is queued or running (at most 240 s).
wait_jobs() {
  local i left
  for ((i = 0; i < 2400; i++)); do
    left="$(squeue -h -o '%F %i %T' | awk -v ids=" $* " 'index(ids, " " $1 " ")' || true)"
    [[ -z "$left" ]] && return 0
    sleep 0.1
  done
  fail "jobs still queued after 240 s: $left"
}

# States of every task of the jobs, one "id state" a line.
states() {
  local j
  for j in "$@"; do
    scontrol show job -o "$j" | sed -n 's/.*JobId=\([0-9]*\) .*JobState=\([A-Z_]*\).*/\1 \2/p'
  done
}

expect_all_completed() {
  local bad
  bad="$(states "$@" | grep -v ' COMPLETED$' || true)"
  [[ -z "$bad" ]] || fail "jobs not COMPLETED: $bad"
}

# Waits until array task JOB_TASK runs and FILE exists.
wait_running() {
  local i
  for ((i = 0; i < 1200; i++)); do
    if [[ "$(squeue -h -j "$1" -o %T 2>/dev/null)" == RUNNING && -f "$2" ]]; then return 0; fi
    sleep 0.1
  done
  fail "$1 not running with $2 after 120 s"
}

expect_complete_run() {  # RUN
  local d
  for d in patchgen/part-0000{0,1}-of-00002 embed/vit-tiny/part-0000{0,1}-of-00002 \
           ingest/vit-tiny/gen-00000; do
    [[ -f "$1/$d/_SUCCESS" ]] || fail "$1/$d/_SUCCESS missing"
  done
}

query() {  # RUN: the 5 nearest patches of a point of s1, as CSV
  "$build/stages/query/query" --index "$1/ingest/vit-tiny" --slide s1 --x 700 --y 600 -k 5 \
    --format csv
}

# The outputs of RUN equal those of the clean chain: embeddings of each part, index files, query.
expect_same_as_clean() {
  local clean="$work/clean/run"
  /usr/bin/python3 - "$clean" "$1" <<'EOF' || fail "outputs of $1 differ from the clean run's"
import json, sys
import h5py, numpy as np
a, b = sys.argv[1:3]
for part in ("part-00000-of-00002", "part-00001-of-00002"):
    fa = h5py.File(f"{a}/embed/vit-tiny/{part}/embeddings.h5", "r")
    fb = h5py.File(f"{b}/embed/vit-tiny/{part}/embeddings.h5", "r")
    names = []
    fa.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
    assert names, "no datasets in embeddings.h5"
    for n in names:
        if not np.array_equal(fa[n][()], fb[n][()]):
            sys.exit(f"{part}: dataset {n} differs")
def files(run):
    c = json.load(open(f"{run}/ingest/vit-tiny/catalog.json"))
    return [(s["shard"], s["rows"], g["index"]["xxh3"]) for s in c["shards"] for g in s["segments"]]
if files(a) != files(b):
    sys.exit(f"index shards differ: {files(a)} vs {files(b)}")
EOF
  [[ "$(query "$clean")" == "$(query "$1")" ]] || fail "query results of $1 differ from the clean run's"
}

case "$case_name" in
  start)
    [[ $(id -u) -eq 0 ]] || fail "the Slurm tests start slurmd and need root"
    "$src/launchers/slurm-cluster.sh" start "$cluster"
    rm -rf "$work" && mkdir -p "$work"
    ;;
  stop)
    "$src/launchers/slurm-cluster.sh" stop "$cluster"
    ;;

  scripts)
    cohort
    out="$("$submit" --run "$work/dry/run" --manifest "$work/cohort/manifest.csv" --parts 3 \
      --model vit-tiny --build "$build" --dry-run)"
    echo "$out"
    grep -q -- '--array=0-2 .*patchgen.sbatch --out [^ ]* --manifest' <<<"$out" || fail "no patchgen array"
    # shellcheck disable=SC2016  # the dry run prints shell variables
    grep -q -- '--dependency=aftercorr:${patchgen}.*embed.sbatch' <<<"$out" || fail "no aftercorr"
    # shellcheck disable=SC2016
    grep -q -- '--dependency=afterok:${embed}.*ingest.sbatch' <<<"$out" || fail "no afterok"
    [[ ! -e "$work/dry/run" ]] || fail "--dry-run wrote $work/dry/run"
    rc=0; "$submit" --run "$work/dry/run" --manifest "$work/cohort/manifest.csv" --parts 3 \
      --dry-run 2>/dev/null || rc=$?
    ((rc == 2)) || fail "submit without --model exited $rc, expected 2"
    rc=0; msg="$(RUN=/nonexistent bash "$src/slurm/embed.sbatch" 2>&1)" || rc=$?
    if ((rc != 2)) || ! grep -q "name a model" <<<"$msg"; then
      fail "embed.sbatch without a model: $rc $msg"
    fi
    rc=0; "$submit" --rerun-failed "$work/dry/run" 2>/dev/null || rc=$?
    ((rc == 2)) || fail "--rerun-failed of a run never submitted exited $rc, expected 2"
    for s in "$src"/slurm/*.sbatch; do bash -n "$s" || fail "$s: syntax"; done
    # aggregate after every embed task, the slide-level index after aggregate.
    out="$("$submit" --run "$work/dry/run" --manifest "$work/cohort/manifest.csv" --parts 3 \
      --model vit-tiny --build "$build" --aggregate mean --aggregate-args "--level patient" \
      --slide-index mean-idx --dry-run)"
    # shellcheck disable=SC2016
    grep -q -- '--dependency=afterok:${embed}.*aggregate.sbatch --run .* --name mean --level patient' \
      <<<"$out" || fail "no aggregate job after embed: $out"
    # shellcheck disable=SC2016
    grep -q -- '--dependency=afterok:${aggregate}.*ingest.sbatch --run .* --level patient --slides mean --name mean-idx' \
      <<<"$out" || fail "no slide-level ingest after aggregate: $out"
    rc=0; "$submit" --run "$work/dry/run" --manifest "$work/cohort/manifest.csv" --parts 3 \
      --model vit-tiny --build "$build" --slide-index x --dry-run 2>/dev/null || rc=$?
    ((rc == 2)) || fail "--slide-index without --aggregate exited $rc, expected 2"
    # The stages submitted are the stage graph's, in its order.
    graph="$("$build/stages/status/tessera-status" --graph |
      /usr/bin/python3 -c 'import json, sys; print(" ".join(s["name"] for s in json.load(sys.stdin)["stages"]))')"
    [[ "$("$submit" --build "$build" --list-stages | awk '{print $1}' | xargs)" == "$graph" ]] ||
      fail "submit --list-stages differs from the graph ($graph)"
    ;;

  chain)
    run="$work/clean/run"
    rm -rf "$work/clean" && mkdir -p "$work/clean"
    # With aggregate and a slide-level index: patchgen embed aggregate ingest ingest.
    mapfile -t jobs < <(submit_chain "$run" "" --aggregate mean --slide-index mean-idx)
    ((${#jobs[@]} == 5)) || fail "expected 5 job ids, got ${jobs[*]}"
    wait_jobs "${jobs[@]}"
    expect_all_completed "${jobs[@]}"
    expect_complete_run "$run"
    agg="$("$build/stages/status/tessera-status" --graph | /usr/bin/python3 -c '
import json, sys
print([s["folder"] for s in json.load(sys.stdin)["stages"] if s["name"] == "aggregate"][0])')"
    for d in "$agg/mean" ingest/mean-idx; do
      [[ -f "$run/$d/_SUCCESS" ]] || fail "$run/$d/_SUCCESS missing"
    done
    status="$build/stages/status/tessera-status"
    if [[ -x "$status" ]]; then
      "$status" "$run" || fail "tessera-status $run exited $?"
    else
      log "tessera-status not built: the status table is not checked"
    fi
    "$submit" --rerun-failed "$run" | grep -q "nothing to submit" || fail "rerun of a complete run submitted jobs"
    # A slide index killed before its _SUCCESS: --rerun-failed resubmits only that ingest.
    rm "$run/ingest/mean-idx/_SUCCESS"
    "$submit" --rerun-failed "$run" | tee "$work/clean/index.jobs"
    [[ "$(awk '{print $1}' "$work/clean/index.jobs" | xargs)" == ingest ]] ||
      fail "expected the slide-level ingest only, got: $(cat "$work/clean/index.jobs")"
    mapfile -t again < <(awk '{print $2}' "$work/clean/index.jobs")
    wait_jobs "${again[@]}"
    expect_all_completed "${again[@]}"
    [[ -f "$run/ingest/mean-idx/_SUCCESS" ]] || fail "the slide index was not finished"
    "$submit" --rerun-failed "$run" | grep -q "nothing to submit" || fail "a third rerun submitted jobs"
    query "$run" | tee "$work/clean/query.csv"
    (($(wc -l < "$work/clean/query.csv") >= 6)) || fail "query returned fewer than 5 rows"
    ;;

  rerun_failed)
    [[ -f "$work/clean/query.csv" ]] || fail "needs the chain case first"
    run="$work/fault/run"
    rm -rf "$work/fault" && mkdir -p "$work/fault"
    part1="$run/embed/vit-tiny/part-00001-of-00002"
    mapfile -t jobs < <(submit_chain "$run" "--debug-pause-before-marker 5")
    wait_running "${jobs[1]}_1" "$part1/run.json"
    log "killing embed part 1 (${jobs[1]}_1)"
    scancel --signal=KILL "${jobs[1]}_1"
    wait_jobs "${jobs[@]}"
    states "${jobs[@]}"
    [[ -f "$run/embed/vit-tiny/part-00000-of-00002/_SUCCESS" && ! -f "$part1/_SUCCESS" ]] ||
      fail "expected embed part 0 complete and part 1 not"
    cp "$run/embed/vit-tiny/part-00000-of-00002/_SUCCESS" "$work/fault/embed0_SUCCESS"
    cp "$run/patchgen/part-00001-of-00002/_SUCCESS" "$work/fault/patchgen1_SUCCESS"

    log "a rerun with fewer ranks is refused"
    "$submit" --rerun-failed "$run" --embed-sbatch "--ntasks-per-node=1" | tee "$work/fault/fewer.jobs"
    mapfile -t fewer < <(awk '{print $2}' "$work/fault/fewer.jobs")
    wait_jobs "${fewer[@]}"
    grep -q "was run with 2 ranks, this run has 1" "$run/slurm/logs/tessera-embed-${fewer[0]}_1.out" ||
      fail "no refusal of a resume with 1 rank in the embed log"

    log "--rerun-failed"
    "$submit" --rerun-failed "$run" | tee "$work/fault/rerun.jobs"
    [[ "$(awk '{print $1, $4}' "$work/fault/rerun.jobs")" == $'embed 1)\ningest ' ]] ||
      fail "expected embed part 1 and ingest only, got: $(cat "$work/fault/rerun.jobs")"
    mapfile -t rerun < <(awk '{print $2}' "$work/fault/rerun.jobs")
    wait_jobs "${rerun[@]}"
    expect_all_completed "${rerun[@]}"
    expect_complete_run "$run"
    grep -q "(resuming)" "$run/slurm/logs/tessera-embed-${rerun[0]}_1.out" || fail "part 1 did not resume"
    cmp -s "$work/fault/embed0_SUCCESS" "$run/embed/vit-tiny/part-00000-of-00002/_SUCCESS" ||
      fail "embed part 0 was redone"
    cmp -s "$work/fault/patchgen1_SUCCESS" "$run/patchgen/part-00001-of-00002/_SUCCESS" ||
      fail "patchgen part 1 was redone"
    expect_same_as_clean "$run"
    "$submit" --rerun-failed "$run" | grep -q "nothing to submit" || fail "second rerun submitted jobs"
    ;;

  requeue)
    [[ -f "$work/clean/query.csv" ]] || fail "needs the chain case first"
    run="$work/requeue/run"
    rm -rf "$work/requeue" && mkdir -p "$work/requeue"
    mapfile -t jobs < <(submit_chain "$run" "--debug-pause-before-marker 5")
    wait_running "${jobs[1]}_0" "$run/embed/vit-tiny/part-00000-of-00002/run.json"
    log "requeueing embed part 0 (${jobs[1]}_0)"
    scontrol requeue "${jobs[1]}_0"
    # Slurm makes a requeued job eligible only 2 minutes later; the test need not wait for that.
    for ((i = 0; i < 600; i++)); do
      [[ "$(squeue -h -j "${jobs[1]}_0" -o %T)" == PENDING ]] && break
      sleep 0.1
    done
    # But slurmd refuses a credential made in the second it revoked the old one ("Job credential
    # revoked", and the task ends FAILED): start it 2 s later.
    sleep 2
    scontrol update JobId="${jobs[1]}_0" StartTime=now
    wait_jobs "${jobs[@]}"
    expect_all_completed "${jobs[@]}"
    scontrol show job -o "${jobs[1]}_0" | grep -q "Restarts=1" || fail "embed part 0 was not requeued"
    logf="$run/slurm/logs/tessera-embed-${jobs[1]}_0.out"
    if ! grep -q "attempt 2" "$logf" || ! grep -q "(resuming)" "$logf"; then
      fail "no resumed attempt in $logf"
    fi
    expect_complete_run "$run"
    expect_same_as_clean "$run"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
