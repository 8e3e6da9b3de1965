#!/usr/bin/env bash
# Compares embed's partitions of the index rows over ranks (docs/performance.md): runs the embed
# stage on one completed patch run with each --partition in turn, REPS times interleaved, and
# writes every repetition's per-rank read/forward/total seconds (from the rank markers), the wall
# time, medians and the git revision as JSON.
#
#   benchmarks/run_embed_partition_bench.sh RUN [OUT.json]
#
# Environment: BUILD (default <repo>/build), RANKS (2), REPS (3), MODEL (vit-tiny), BATCH (64),
# PARTITIONS ("cyclic contiguous"), MPIEXEC_FLAGS (default "--allow-run-as-root --bind-to core").
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
run="$(realpath "$1")"
out="${2:-$root/bench-out/embed_partition_bench.json}"
build="${BUILD:-$root/build}"
read -r -a mpi_flags <<< "${MPIEXEC_FLAGS:---allow-run-as-root --bind-to core}"
scratch="$(mktemp -d)"
records="$scratch/records"
for rep in $(seq 1 "${REPS:-3}"); do
  for partition in ${PARTITIONS:-cyclic contiguous}; do
    tag="partition-bench-$partition"
    rm -rf "$run/embed/$tag"
    start=$(date +%s.%N)
    mpirun -np "${RANKS:-2}" "${mpi_flags[@]}" "$build/stages/embed/embed" --run "$run" \
      --model "${MODEL:-vit-tiny}" --tag "$tag" --partition "$partition" \
      --batch-size "${BATCH:-64}" --torch-threads 1 --log-level warn
    end=$(date +%s.%N)
    cp -r "$run/embed/$tag/markers" "$scratch/markers-$rep-$partition"
    echo "$rep $partition $start $end $scratch/markers-$rep-$partition" >> "$records"
  done
done
/usr/bin/python3 - "$records" "$out" "$(git -C "$root" describe --always --dirty)" <<'PY'
import glob, json, statistics, sys
records, out, revision = sys.argv[1:4]
reps, by = [], {}
for line in open(records):
    rep, partition, start, end, markers = line.split()
    ranks = []
    for path in sorted(glob.glob(markers + "/rank-*.json")):
        m = json.load(open(path))
        ranks.append({k: m["stats"][k] for k in ("patches", "read_s", "forward_s", "total_s")})
    r = {"rep": int(rep), "partition": partition, "wall_s": float(end) - float(start),
         "read_s_max_rank": max(x["read_s"] for x in ranks), "ranks": ranks,
         "embeddings_xxh3": [json.load(open(p))["outputs"][0]["xxh3"]
                             for p in sorted(glob.glob(markers + "/rank-*.json"))]}
    reps.append(r)
    by.setdefault(partition, []).append(r)
summary = {p: {k: {"median": statistics.median(x[k] for x in rs), "min": min(x[k] for x in rs),
                   "max": max(x[k] for x in rs)} for k in ("wall_s", "read_s_max_rank")}
           for p, rs in by.items()}
json.dump({"benchmark": "embed_partition", "git_revision": revision, "repetitions": reps,
           "summary": summary}, open(out, "w"), indent=2)
print(json.dumps(summary, indent=2))
PY
rm -rf "$scratch"
