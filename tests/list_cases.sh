#!/usr/bin/env bash
# Lists every test case of a build, one "program: Suite.Case" line each, sorted: what the suite
# covers, to compare two builds (`diff <(tests/list_cases.sh A) <(tests/list_cases.sh B)`) when
# tests are moved, merged or sharded. Usage: tests/list_cases.sh [BUILD_DIR]   (default: build)
set -euo pipefail
build="${1:-$(cd "$(dirname "$0")/.." && pwd)/build}"
find "$build" -type f -executable -name '*_test' -print0 | sort -z |
  while IFS= read -r -d '' exe; do
    "$exe" --gtest_list_tests 2>/dev/null |
      awk -v program="$(basename "$exe")" '/^[^ ]/ { suite = $1 } /^  / { print program ": " suite $1 }'
  done | sort
