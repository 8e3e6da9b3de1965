#!/usr/bin/env bash
# One error style (CTest error_style_test): an invalid option, found before the run, and invalid
# input found by the run are both one log line of rank 0 ("[time] [error] [rank 0/1] ..."), not
# "error: ..." for one and a log line for the other.
#
#   error_style_test.sh BUILD_DIR WORK_DIR
set -euo pipefail
build="${1:?usage: error_style_test.sh BUILD_DIR WORK_DIR}"
work="${2:?}"
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work"
query="$build/stages/query/query"
line='^\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]+\] \[error\] \[rank 0/1\] '
check() {  # check WHAT EXPECTED_TEXT ARGS...
  local what="$1" text="$2" code=0; shift 2
  "$query" "$@" > "$work/out" 2> "$work/err" || code=$?
  ((code == 2)) || fail "$what: exit $code, expected 2: $(cat "$work/err")"
  grep -qE "$line.*$text" "$work/err" || fail "$what: not a log line of rank 0 saying '$text': $(cat "$work/err")"
  ! grep -q '^error: ' "$work/err" || fail "$what: 'error: ' style: $(cat "$work/err")"
}
check "an unknown option" "unrecognised option|unknown option|unrecognized option" --no-such-option
check "a missing index" "holds no catalog.json" --index "$work" --patch 1
echo "-- ok"
