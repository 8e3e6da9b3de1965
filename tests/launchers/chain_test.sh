#!/usr/bin/env bash
# launchers/chain.sh and launchers/submit against the stage graph, and the chain with aggregate
# and a slide-level index run end to end on one machine (CTest chain_test):
#
#   chain_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
#
# 1. The launchers' stages are those of `tessera-status --graph`, in its order; a stage added to
#    the graph (a tessera-status whose graph has one more) is run by both, its command built from
#    its declaration.
# 2. Bad options exit 2; a stage that fails gives the chain its exit code.
# 3. patchgen -> embed -> aggregate -> ingest (patch level) -> ingest --level slide, P = 2; a
#    rerun redoes nothing.
# 4. With a second embed tag (so that a default tag is ambiguous), embed --overwrite of a part
#    makes the aggregate output and both indexes stale; a deleted
#    slide_catalog.json leaves the slide index incomplete: every `next` command tessera-status
#    prints is run as printed, and the run is complete afterwards.
set -euo pipefail
src="${1:?usage: chain_test.sh SOURCE_DIR BUILD_DIR WORK_DIR}"
build="${2:?}"
work="${3:?}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_rmaps_base_oversubscribe=1
chain="$src/launchers/chain.sh"
submit="$src/launchers/submit"
status="$build/stages/status/tessera-status"
fail() { echo "FAIL: $*" >&2; exit 1; }
log() { echo "-- $*" >&2; }
rm -rf "$work" && mkdir -p "$work"

log "the launchers' stages are the graph's"
names() { /usr/bin/python3 -c 'import json, sys; print(" ".join(s["name"] for s in json.load(sys.stdin)["stages"]))'; }
graph="$("$status" --graph | names)"
listed="$("$chain" --build "$build" --list-stages | awk '{print $1}' | xargs)"
[[ "$listed" == "$graph" ]] || fail "chain.sh lists '$listed', the graph has '$graph'"
listed="$("$submit" --build "$build" --list-stages | awk '{print $1}' | xargs)"
[[ "$listed" == "$graph" ]] || fail "submit lists '$listed', the graph has '$graph'"
# A tessera-status whose graph has a stage 'extra' before ingest: both launchers run it from its
# declaration alone (a new stage needs no launcher edit).
cat > "$work/status-extra" <<STUB
#!/bin/sh
[ "\$1" = --graph ] || exec "$status" "\$@"
"$status" --graph | /usr/bin/python3 -c '
import json, sys
g = json.load(sys.stdin)
g["stages"].insert(3, {"name": "extra", "folder": "extra", "kind": "named_parts",
                       "name_option": "--name", "reads": ["embed"], "executable": "extra",
                       "run_option": "--run", "launch": "once", "chain_options": ["--model"],
                       "threads_option": "--workers"})
print(json.dumps(g))'
STUB
chmod +x "$work/status-extra"
listed="$(TESSERA_STATUS="$work/status-extra" "$chain" --build "$build" --list-stages)"
grep -qx "extra once $build/stages/extra/extra" <<<"$listed" || fail "chain.sh: $listed"
with_extra="$("$work/status-extra" --graph | names)"
[[ "$(awk '{print $1}' <<<"$listed" | xargs)" == "$with_extra" ]] ||
  fail "chain.sh does not keep the graph's order ($with_extra): $listed"
listed="$("$submit" --build "$build" --status-tool "$work/status-extra" --list-stages)"
grep -qx "extra job extra" <<<"$listed" || fail "submit: $listed"
# Its command: run option, chain option, --tag (it reads embed), its name, threads, its args; it
# runs after the per-part stages and before ingest.
TESSERA_STATUS="$work/status-extra" "$chain" --build "$build" --run /r --manifest /m.csv \
  --model vit-tiny --tag t --threads 3 --ranks 1 --extra-args "--x 1" --dry-run > "$work/extra.sh" ||
  fail "chain.sh --dry-run exited $?"
# Every stage not run only when named, in the graph's order (per-part ones: one part).
unnamed="$("$work/status-extra" --graph | /usr/bin/python3 -c '
import json, sys
print(" ".join(s["name"] for s in json.load(sys.stdin)["stages"] if s["launch"] != "when_named"))')"
[[ "$(awk '{print $7}' "$work/extra.sh" | xargs -n1 basename | xargs)" == "$unnamed" ]] ||
  fail "chain.sh --dry-run runs other than $unnamed: $(cat "$work/extra.sh")"
grep -qx -- "mpirun -np 1 --oversubscribe --bind-to none $build/stages/extra/extra --run /r --model vit-tiny --tag t --workers 3 --x 1" \
  "$work/extra.sh" || fail "chain.sh runs extra as: $(grep extra/extra "$work/extra.sh")"
"$submit" --build "$build" --status-tool "$work/status-extra" --run "$work/dry" \
  --manifest "$work/m.csv" --parts 2 --model vit-tiny --extra-sbatch "--mem=1G" --dry-run > "$work/extra-submit.sh" ||
  fail "submit --dry-run exited $?"
# shellcheck disable=SC2016  # the dry run prints shell variables
grep -q -- 'TESSERA_STAGE=extra,TESSERA_RUN_OPTION=--run,TESSERA_PER_PART=0,TESSERA_THREADS_OPTION=--workers,.*--job-name=tessera-extra .*--dependency=afterok:${embed}" --mem=1G .*/slurm/stage.sbatch --run [^ ]*/dry --model vit-tiny --tag vit-tiny)$' \
  "$work/extra-submit.sh" || fail "submit runs extra as: $(cat "$work/extra-submit.sh")"
[[ "$(grep -o 'job-name=tessera-[a-z]*' "$work/extra-submit.sh" | sed 's/job-name=tessera-//' | xargs)" == \
   "$unnamed" ]] || fail "submit's order is not $unnamed: $(cat "$work/extra-submit.sh")"

# Where the layout puts aggregate's outputs (RUN/<folder>/<name>).
agg="$("$status" --graph | /usr/bin/python3 -c '
import json, sys
print([s["folder"] for s in json.load(sys.stdin)["stages"] if s["name"] == "aggregate"][0])')"

log "a cohort of 4 slides, 2 per part"
mkdir -p "$work/slides"
{
  echo "slide_id,path,patient_id,diagnosis"
  for i in 1 2 3 4; do
    "$build/tests/synthslide/synthslide" --out "$work/slides/s$i.tif" --width $((1200 + 100 * i)) \
      --height 1000 --seed "$i" >/dev/null
    echo "s$i,slides/s$i.tif,p$(((i + 1) / 2)),d$((i % 2))"
  done
} > "$work/manifest.csv"
run="$work/run"
chain_run() {  # extra chain.sh options
  "$chain" --build "$build" --run "$run" --manifest "$work/manifest.csv" --model vit-tiny \
    --parts 2 --patchgen-args "--patch-size 64" --embed-args "--batch-size 8" \
    --aggregate mean --slide-index mean-idx "$@"
}

log "bad options exit 2"
rc=0; "$chain" --build "$build" --run "$run" --bogus x 2>/dev/null || rc=$?
((rc == 2)) || fail "an unknown option exited $rc"
rc=0; "$chain" --build "$build" --run "$run" --manifest "$work/manifest.csv" --model vit-tiny \
  --slide-index x 2>/dev/null || rc=$?
((rc == 2)) || fail "--slide-index without --aggregate exited $rc"
[[ ! -e "$run" ]] || fail "a refused chain wrote $run"

log "the chain with aggregate and a slide-level index"
chain_run > "$work/chain.log" 2>&1 || fail "chain.sh exited $? (log: $work/chain.log)"
for d in patchgen/part-00000-of-00002 patchgen/part-00001-of-00002 \
         embed/vit-tiny/part-00000-of-00002 embed/vit-tiny/part-00001-of-00002 \
         "$agg/mean" ingest/vit-tiny/gen-00000 ingest/mean-idx; do
  [[ -f "$run/$d/_SUCCESS" ]] || fail "$run/$d/_SUCCESS missing"
done
[[ -f "$run/$agg/mean/slides.h5" && -f "$run/ingest/mean-idx/slide_catalog.json" ]] ||
  fail "no cohort file or slide catalog"
"$status" "$run" > "$work/status.txt" || fail "tessera-status exited $? after the chain"
grep -q "^ingest     mean-idx  *slide   complete" "$work/status.txt" || fail "$(cat "$work/status.txt")"
grep -q "^next:" "$work/status.txt" && fail "next commands after a complete chain: $(cat "$work/status.txt")"
cp "$run/$agg/mean/_SUCCESS" "$work/aggregate_SUCCESS"
chain_run > "$work/rerun.log" 2>&1 || fail "the rerun exited $?"
cmp -s "$work/aggregate_SUCCESS" "$run/$agg/mean/_SUCCESS" || fail "the rerun redid aggregate"

log "a stage that fails gives its exit code"
rc=0; chain_run --aggregate bad --aggregate-args "--pooling bogus" > "$work/bad.log" 2>&1 || rc=$?
((rc == 2)) || fail "aggregate --pooling bogus: chain.sh exited $rc"
grep -q "invalid --pooling" "$work/bad.log" || fail "no reason in $work/bad.log"

# Runs every `next` command tessera-status prints, as printed (the build's stages on PATH); each
# must succeed and the run be complete afterwards.
run_every_next() {
  local code=0 n=0 cmd
  "$status" "$run" --json > "$work/before.json" || code=$?
  ((code == 4)) || fail "tessera-status exited $code before the reruns"
  while IFS= read -r cmd; do
    log "next: $cmd"
    PATH="$build/stages/patchgen:$build/stages/embed:$build/stages/aggregate:$build/stages/ingest:$PATH" \
      bash -c "$cmd" < /dev/null > "$work/next.log" 2>&1 || fail "'$cmd' exited $? ($(tail -3 "$work/next.log"))"
    n=$((n + 1))
  done < <(/usr/bin/python3 -c 'import json, sys; print("\n".join(json.load(sys.stdin)["next"]))' \
             < "$work/before.json")
  "$status" "$run" > "$work/after.txt" || fail "not complete after $n next commands: $(cat "$work/after.txt")"
  grep -q "^next:" "$work/after.txt" && fail "next commands left: $(cat "$work/after.txt")"
  echo "$n"
}

log "a second embed tag: the aggregate output's config.ini (tag left to its default) is ambiguous now"
for p in 0 1; do
  mpirun -np 2 "$build/stages/embed/embed" --run "$run" --model vit-tiny --tag second \
    --batch-size 8 --part "$p" --parts 2 > "$work/second.log" 2>&1 || fail "embed --tag second exited $?"
done
log "embed --overwrite of part 1: aggregate output and indexes stale"
mpirun -np 2 "$build/stages/embed/embed" --config "$run/embed/vit-tiny/part-00001-of-00002/config.ini" \
  --overwrite > "$work/overwrite.log" 2>&1 || fail "embed --overwrite exited $?"
incomplete="$("$status" "$run" --incomplete || true)"
[[ "$incomplete" == $'aggregate mean 0 1 stale\ningest mean-idx 0 1 stale\ningest vit-tiny 0 1 stale' ]] ||
  fail "expected aggregate and both indexes stale, got: $incomplete"
# What submit --rerun-failed would resubmit (a dry run needs no cluster): aggregate, the slide
# index after it, and the patch index afresh (--append refuses a stale index); not patchgen or
# embed, which are complete.
mkdir -p "$run/slurm"
/usr/bin/python3 - "$run/slurm/submit.json" "$work/manifest.csv" <<'PY'
import json, sys
keys = ["manifest", "parts", "model", "tag", "name", "gpu", "failed_slides", "sbatch", "build",
        "scripts", "srun_mpi", "slide_index", "args", "stage_sbatch", "named"]
cfg = dict.fromkeys(keys)
cfg.update(manifest=sys.argv[2], parts=2, model="vit-tiny", tag="vit-tiny", name="vit-tiny",
           gpu=False, failed_slides="continue", named={"aggregate": "mean"}, slide_index="mean-idx")
json.dump(cfg, open(sys.argv[1], "w"))
PY
"$submit" --rerun-failed "$run" --build "$build" --dry-run > "$work/rerun.sh" 2> "$work/rerun.err" ||
  fail "submit --rerun-failed --dry-run exited $? ($(cat "$work/rerun.err"))"
[[ "$(grep -o 'job-name=tessera-[a-z]*' "$work/rerun.sh" | xargs)" == \
   "job-name=tessera-aggregate job-name=tessera-ingest job-name=tessera-ingest" ]] ||
  fail "unexpected resubmission: $(cat "$work/rerun.sh")"
grep -q -- 'ingest.sbatch --run [^ ]* --tag vit-tiny --name vit-tiny)$' "$work/rerun.sh" ||
  fail "the stale patch index is not resubmitted afresh: $(cat "$work/rerun.sh")"
# shellcheck disable=SC2016  # the dry run prints shell variables
grep -q -- '--dependency=afterok:${aggregate}.*--level slide --slides mean --name mean-idx' \
  "$work/rerun.sh" || fail "the slide index does not wait for aggregate: $(cat "$work/rerun.sh")"
# A submit.json of the launcher before its options were per stage of the graph gives the same.
/usr/bin/python3 - "$run/slurm/submit.json" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg.update(aggregate=cfg.pop("named")["aggregate"], patchgen_args=None, ingest_args=None)
for k in ("args", "stage_sbatch"):
    del cfg[k]
json.dump(cfg, open(sys.argv[1], "w"))
PY
"$submit" --rerun-failed "$run" --build "$build" --dry-run > "$work/rerun-old.sh" 2>/dev/null ||
  fail "submit --rerun-failed of an old submit.json exited $?"
cmp -s "$work/rerun.sh" "$work/rerun-old.sh" || fail "an old submit.json resubmits otherwise: $(diff "$work/rerun.sh" "$work/rerun-old.sh")"
rm -r "$run/slurm"
n="$(run_every_next)"
# aggregate, the slide index, the patch index, and the suggested ingest of tag 'second'.
((n == 4)) || fail "expected 4 next commands, ran $n"
grep -q -- "aggregate --config $run/$agg/mean/config.ini --tag vit-tiny --name mean" \
  "$work/before.json" || fail "the stale aggregate's command does not name its tag"

log "slide_catalog.json deleted: the slide index is rebuilt"
rm "$run/ingest/mean-idx/slide_catalog.json"
[[ "$("$status" "$run" --incomplete || true)" == "ingest mean-idx 0 1 incomplete" ]] ||
  fail "a slide index without its catalog: $("$status" "$run" --incomplete)"
n="$(run_every_next)"
((n == 1)) || fail "expected 1 next command, ran $n"
grep -q -- '--overwrite' <<<"$(/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["next"])' < "$work/before.json")" ||
  fail "the rebuild is not an --overwrite"

log "a slide index killed before _SUCCESS resumes"
rm "$run/ingest/mean-idx/_SUCCESS"
n="$(run_every_next)"
((n == 1)) || fail "expected 1 next command, ran $n"
echo "PASS: chain_test"
