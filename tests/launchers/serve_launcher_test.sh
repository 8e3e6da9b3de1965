#!/usr/bin/env bash
# launchers/serve.sh's command line and its stop (CTest serve_launcher_test), against a stand-in
# for serve in a build folder of its own, so that no index is needed:
#
#   serve_launcher_test.sh SOURCE_DIR WORK_DIR
#
# 1. --help prints the usage and serve's own options, exit 0.
# 2. serve's options reach serve whether they come before or after `--`, with the launcher's own
#    options anywhere; a missing value, a third positional argument or a bad --ranks exit 2.
# 3. Ctrl-C (SIGINT) and SIGTERM to the launcher stop the ranks, and the launcher exits 0.
set -euo pipefail
src="${1:?usage: serve_launcher_test.sh SOURCE_DIR WORK_DIR}"
work="${2:?}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
serve="$src/launchers/serve.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
log() { echo "-- $*" >&2; }
rm -rf "$work" && mkdir -p "$work/build/stages/serve" "$work/run/ingest/uni"
echo "{}" > "$work/run/ingest/uni/catalog.json"  # the only index: NAME may be left out
# The stand-in: --help prints a line; otherwise it writes its arguments, one a line, and, when
# $work/stay exists, runs until SIGTERM, which it answers with exit 0 (as serve's ranks do).
cat > "$work/build/stages/serve/serve" <<STUB
#!/usr/bin/env bash
if [[ "\${1:-}" == --help ]]; then echo "stand-in serve options"; exit 0; fi
printf '%s\n' "\$@" > "$work/args.tmp" && mv "$work/args.tmp" "$work/args"
if [[ -e "$work/stay" ]]; then
  trap 'echo stopping >&2; exit 0' TERM
  while :; do sleep 0.1; done
fi
STUB
chmod +x "$work/build/stages/serve/serve"
b=(--build "$work/build")

log "--help"
out="$("$serve" --help "${b[@]}")" || fail "--help exited $?"
[[ "$out" == *"usage: launchers/serve.sh RUN"* ]] || fail "--help shows no usage: $out"
[[ "$out" == *"stand-in serve options"* ]] || fail "--help shows no serve options: $out"

log "serve's options before and after --"
expect_args() {  # the stand-in's arguments, space-separated
  local got
  got="$(xargs < "$work/args")"
  [[ "$got" == "$1" ]] || fail "serve got '$got', expected '$1'"
}
rm -f "$work/args"
"$serve" "$work/run" --port 8471 "${b[@]}" || fail "RUN --port 8471 exited $?"
expect_args "--index $work/run/ingest/uni --port 8471"
rm -f "$work/args"
"$serve" --ranks 1 "$work/run" uni --max-k=5 "${b[@]}" -- --port 8472 --bind 127.0.0.1 \
  || fail "options on both sides of -- exited $?"
expect_args "--index $work/run/ingest/uni --max-k=5 --port 8472 --bind 127.0.0.1"

log "bad command lines exit 2"
expect_2() {
  local code=0
  "$serve" "$@" "${b[@]}" > "$work/out" 2>&1 || code=$?
  ((code == 2)) || fail "'$*' exited $code, expected 2: $(cat "$work/out")"
}
expect_2 "$work/run" --port
expect_2 "$work/run" uni extra
expect_2 "$work/run" --ranks 0
expect_2

log "Ctrl-C and SIGTERM stop the ranks; the launcher exits 0"
touch "$work/stay"
set -m  # job control: the launcher in the background keeps SIGINT, as in a terminal
for signal in INT TERM; do
  rm -f "$work/args"
  "$serve" "$work/run" --ranks 2 "${b[@]}" > "$work/out" 2>&1 &
  pid=$!
  for _ in $(seq 600); do [[ -e "$work/args" ]] && break; sleep 0.1; done
  [[ -e "$work/args" ]] || fail "the stand-in did not start: $(cat "$work/out")"
  sleep 0.5  # both ranks started
  kill -s "$signal" "$pid"
  code=0
  wait "$pid" || code=$?
  ((code == 0)) || fail "SIG$signal: the launcher exited $code: $(cat "$work/out")"
  [[ "$(grep -c stopping "$work/out")" == 2 ]] || fail "SIG$signal: not both ranks stopped: $(cat "$work/out")"
done
log "ok"
