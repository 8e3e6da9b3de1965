#!/usr/bin/env bash
# launchers/demo.sh end to end on this build (CTest demo_test):
#
#   demo_test.sh SOURCE_DIR WORK_DIR
#
# The stages run quietly: standard error holds one line per step and standard output the
# summary, with no log line (timestamps, ranks) and no raw JSON; the summary has its sections, the
# random-weight notice of the built-in model (atop the query table and at the end), a status
# table that is all complete, and the files it names exist.
set -euo pipefail
src="${1:?usage: demo_test.sh SOURCE_DIR WORK_DIR}"
work="${2:?}"
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work"
# vit-tiny: the demo's steps and summary as with its default vit-s16, at a fraction of the compute.
"$src/launchers/demo.sh" --no-build --model vit-tiny "$work/demo" > "$work/out" 2> "$work/err" \
  || fail "demo.sh exited $?: $(tail -20 "$work/err")"
out="$(cat "$work/out")"
err="$(cat "$work/err")"
echo "$out"
! grep -nE '^\[20[0-9]{2}-|\[rank [0-9]|\(rank [0-9]+\)|": .*,$' "$work/out" \
  || fail "log lines or raw JSON in the summary"
[[ "$(grep -c . "$work/err")" == 3 ]] || fail "standard error is not one line per step: $err"
for s in "Patches most like S0001" "Slides most like S0001 (other patients), by slide vector" \
         "by mosaic voting" "The run" "all 5 stage directories complete" \
         "patchgen: 311 patches from 8 slides (0 failed)"; do
  [[ "$out" == *"$s"* ]] || fail "no '$s' in the summary"
done
[[ "$(grep -c "^NOTE: built-in model 'vit-tiny' has random weights" "$work/out")" == 2 ]] \
  || fail "the query tables do not open with the random-weight notice"
[[ "$out" == *"NOTE: vit-tiny is a built-in model with random weights"* ]] \
  || fail "no random-weight notice at the end"
for f in "$work/demo/query-mosaic.png" "$work/demo/run/ingest/vit-tiny/catalog.json" \
         "$work/demo/demo.log"; do
  [[ -s "$f" ]] || fail "$f is missing"
done
echo "-- ok"
