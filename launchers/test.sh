#!/usr/bin/env bash
# Installs what is missing, builds tessera and runs every test (unit, MPI 1..3 ranks, end to end).
# Usage: launchers/test.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
"$root/.ci/bootstrap"
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$(nproc)"
# Each test declares the cores it keeps busy (PROCESSORS: an MPI job's ranks count), but spends
# much of its time waiting (mpirun, fsync, servers, a browser): three slots a core keep the cores
# busy, and the longest tests start first (COST; docs/operations.md, "Building and testing").
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "$build" --output-on-failure --timeout 1200 -j "$((3 * $(nproc)))"
