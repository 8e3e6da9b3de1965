#!/usr/bin/env bash
# Compares patchgen's partitions of the patch list over ranks with both readers on a cohort of
# many generated slides (docs/performance.md, "patchgen: partition and reader"): for each
# repetition, each rank count, partition and reader in turn (interleaved), one patchgen run; records
# the wall time, the ranks' read seconds, the JPEG tiles the direct reader decoded (summed over
# ranks: a tile touched by several ranks is decoded by each) and a content digest of the patches
# (sha256 of every patch's pixels in patch_id order: equal for every partition, reader and rank
# count). Writes one JSON with every repetition, medians, min/max, parameters and versions.
#
#   benchmarks/run_patchgen_partition_bench.sh [OUT.json]
#
# Environment: BUILD (default <repo>/build), SLIDES (8), WIDTH (12000), HEIGHT (9000), REPS (2),
# RANKS ("1 2 4"; more ranks than cores run oversubscribed and unbound, and then show the tiles
# decoded, not the speed), PARTITIONS ("cyclic block-cyclic:64 contiguous"), READERS ("direct
# openslide"), WORK (<repo>/bench-out/partition-bench), MPIEXEC_FLAGS (default
# "--allow-run-as-root --mca btl self,vader").
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD:-$root/build}"
work="${WORK:-$root/bench-out/partition-bench}"
out="${1:-$work/patchgen_partition_bench.json}"
read -r -a mpi_flags <<< "${MPIEXEC_FLAGS:---allow-run-as-root --mca btl self,vader}"
cores="$(nproc)"
for exe in "$build/stages/patchgen/patchgen" "$build/tests/synthslide/synthslide"; do
  [[ -x "$exe" ]] || { echo "error: '$exe' not found; build it first" >&2; exit 2; }
done

mkdir -p "$work/cohort"
manifest="$work/cohort/manifest.csv"
if [[ ! -f "$manifest" ]]; then
  {
    echo "slide_id,path"
    for i in $(seq 1 "${SLIDES:-8}"); do
      "$build/tests/synthslide/synthslide" --out "$work/cohort/s$i.tif" --width "${WIDTH:-12000}" \
        --height "${HEIGHT:-9000}" --seed "$i" > /dev/null
      echo "s$i,$work/cohort/s$i.tif"
    done
  } > "$manifest.tmp"
  mv "$manifest.tmp" "$manifest"
fi

records="$work/records.txt"
: > "$records"
for rep in $(seq 1 "${REPS:-2}"); do
  for ranks in ${RANKS:-1 2 4}; do
    # A lone rank gets every core for its reader and writer threads; more ranks one core each;
    # more ranks than cores run oversubscribed.
    if ((ranks > cores)); then bind=(--oversubscribe --bind-to none)
    elif ((ranks == 1)); then bind=(--bind-to none)
    else bind=(--bind-to core); fi
    for partition in ${PARTITIONS:-cyclic block-cyclic:64 contiguous}; do
      for reader in ${READERS:-direct openslide}; do
        run="$work/run"
        start=$(date +%s.%N)
        mpirun -np "$ranks" "${bind[@]}" "${mpi_flags[@]}" "$build/stages/patchgen/patchgen" \
          --manifest "$manifest" --out "$run" --overwrite --partition "$partition" \
          --reader "$reader" --log-level warn
        end=$(date +%s.%N)
        echo "$rep $ranks $partition $reader $start $end" >> "$records"
        /usr/bin/python3 - "$run/patchgen" >> "$records" <<'PY'
import glob, hashlib, json, sys
import h5py, numpy as np
stage = sys.argv[1]
markers = [json.load(open(p))["stats"] for p in sorted(glob.glob(stage + "/markers/rank-*.json"))]
rows = []
for path in sorted(glob.glob(stage + "/shards/rank-*.h5")):
    with h5py.File(path, "r") as f:
        ids = f["patch_id"][()]
        for start in range(0, len(ids), 512):
            block = f["patches"][start:start + 512]
            rows += [(int(i), hashlib.sha256(p.tobytes()).digest())
                     for i, p in zip(ids[start:start + 512], block)]
digest = hashlib.sha256(b"".join(h for _, h in sorted(rows))).hexdigest()
print("STATS " + json.dumps({"patches": len(rows), "pixels_sha256": digest, "ranks": markers}))
PY
      done
    done
  done
done

/usr/bin/python3 - "$records" "$out" "$(git -C "$root" rev-parse HEAD)" "$cores" \
  "${SLIDES:-8}" "${WIDTH:-12000}" "${HEIGHT:-9000}" <<'PY'
import json, platform, statistics, subprocess, sys
records, out, revision, cores, slides, width, height = sys.argv[1:8]
reps, lines = [], open(records).read().splitlines()
for head, stats in zip(lines[0::2], lines[1::2]):
    rep, ranks, partition, reader, start, end = head.split()
    s = json.loads(stats[len("STATS "):])
    wall = float(end) - float(start)
    reps.append({"rep": int(rep), "ranks": int(ranks), "partition": partition, "reader": reader,
                 "wall_s": wall, "patches": s["patches"], "patches_per_s": s["patches"] / wall,
                 "tiles_decoded": sum(r.get("tiles_decoded", 0) for r in s["ranks"]),
                 "read_s_max_rank": max(r["read_s"] for r in s["ranks"]),
                 "read_s_sum": sum(r["read_s"] for r in s["ranks"]),
                 "pixels_sha256": s["pixels_sha256"], "per_rank": s["ranks"]})
groups = {}
for r in reps:
    groups.setdefault((r["ranks"], r["partition"], r["reader"]), []).append(r)
def stat(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}
summary = [{"ranks": k[0], "partition": k[1], "reader": k[2],
            **{m: stat([r[m] for r in rs]) for m in
               ("wall_s", "patches_per_s", "tiles_decoded", "read_s_max_rank")}}
           for k, rs in sorted(groups.items())]
digests = sorted({r["pixels_sha256"] for r in reps})
openslide = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "libopenslide0"],
                           capture_output=True, text=True).stdout
report = {"benchmark": "patchgen_partition", "git_revision": revision,
          "machine": {"cores": int(cores), "cpu": platform.processor() or platform.machine()},
          "versions": {"libopenslide0": openslide},
          "parameters": {"slides": int(slides), "width": int(width), "height": int(height),
                         "note": "ranks above the core count run oversubscribed and unbound"},
          "repetitions": reps, "summary": summary,
          "output": {"pixels_sha256": digests, "identical_across_configurations": len(digests) == 1}}
json.dump(report, open(out, "w"), indent=2)
print(f"{'R':>2} {'partition':<16} {'reader':<9} {'patches/s':>10} {'tiles decoded':>14} {'read s (max rank)':>18}")
for s in summary:
    print(f"{s['ranks']:>2} {s['partition']:<16} {s['reader']:<9} {s['patches_per_s']['median']:>10.1f} "
          f"{s['tiles_decoded']['median']:>14.0f} {s['read_s_max_rank']['median']:>18.2f}")
print("pixels identical across configurations:", len(digests) == 1)
PY
