#!/usr/bin/python3
"""Summarises one run_clam_compare.sh run: reads OUT_DIR/times.tsv and the per-repetition files
(clam.json, clam_model_only.json, embed_bench.json, tessera's embed markers), writes one JSON
(every repetition, median/min/max, ratios, parameters, versions) and prints a short table.

Rates: e2e tiles/s are patches / wall seconds of the processes as launched (tessera: patchgen +
embed under mpirun; clam: the python process, interpreter start and imports included); the
in-process numbers of each side are kept beside them.
"""
import argparse
import csv
import datetime
import json
import os
import statistics
import subprocess


def stats(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def load(path):
    with open(path) as f:
        return json.load(f)


def command_output(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"unavailable: {e}"


def embed_stats(run):
    """Per-rank stats of tessera's embed markers (forward_s etc.), slowest rank first."""
    markers = os.path.join(run, "embed", "resnet50-trunc", "markers")
    ranks = [load(os.path.join(markers, m))["stats"] for m in sorted(os.listdir(markers))]
    return sorted(ranks, key=lambda s: -s["total_s"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name in ("out-dir", "build", "slide", "patchgen-args", "mpiexec-flags", "git-revision",
                 "json"):
        p.add_argument("--" + name, required=name not in ("patchgen-args",), default="")
    for name in ("reps", "width", "height", "seed", "model-patches", "batch-size", "num-workers"):
        p.add_argument("--" + name, type=int, required=True)
    a = p.parse_args()
    out = a.out_dir

    with open(os.path.join(out, "coords.csv")) as f:
        patches = sum(1 for _ in csv.DictReader(f))
    seconds = {}
    with open(os.path.join(out, "times.tsv")) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            seconds[(int(row["rep"]), row["case"], row["step"])] = float(row["seconds"])

    reps = []
    for r in range(a.reps):
        d = os.path.join(out, f"rep{r}")
        rep = {"rep": r}
        for case in ("tessera-np1", "tessera-np2"):
            pg, em = seconds[(r, case, "patchgen")], seconds[(r, case, "embed")]
            ranks = embed_stats(os.path.join(d, case))
            rep[case] = {"patchgen_s": pg, "embed_s": em, "total_s": pg + em,
                         "tiles_per_s": patches / (pg + em),
                         "embed_only_tiles_per_s": patches / em,
                         "slowest_rank_embed_stats": ranks[0]}
        clam = load(os.path.join(d, "clam.json"))
        wall = seconds[(r, "clam", "extract")]
        rep["clam"] = {"process_s": wall, "tiles_per_s": clam["patches"] / wall,
                       "in_process_s": clam["total_s"],
                       "in_process_tiles_per_s": clam["tiles_per_s"],
                       "setup_s": clam["setup_s"], "load_s": clam["load_s"],
                       "forward_s": clam["forward_s"], "write_s": clam["write_s"],
                       "patches": clam["patches"]}
        bench = load(os.path.join(d, "embed_bench.json"))
        mo = bench["repetitions"][0]["modes"]["model-only"]
        tv = load(os.path.join(d, "clam_model_only.json"))
        rep["model_only"] = {"tessera_tiles_per_s": mo["tiles_per_s"], "tessera_s": mo["seconds"],
                             "torchvision_tiles_per_s": tv["tiles_per_s"],
                             "torchvision_s": tv["forward_s"]}
        rep["ratios"] = {
            "e2e_np1_vs_clam": rep["tessera-np1"]["tiles_per_s"] / rep["clam"]["tiles_per_s"],
            "e2e_np2_vs_clam": rep["tessera-np2"]["tiles_per_s"] / rep["clam"]["tiles_per_s"],
            "model_only_tessera_vs_torchvision":
                mo["tiles_per_s"] / tv["tiles_per_s"]}
        reps.append(rep)

    def col(*keys):
        vals = []
        for rep in reps:
            v = rep
            for k in keys:
                v = v[k]
            vals.append(v)
        return stats(vals)

    summary = {
        "tessera_np1_tiles_per_s": col("tessera-np1", "tiles_per_s"),
        "tessera_np1_total_s": col("tessera-np1", "total_s"),
        "tessera_np1_patchgen_s": col("tessera-np1", "patchgen_s"),
        "tessera_np1_embed_s": col("tessera-np1", "embed_s"),
        "tessera_np1_embed_only_tiles_per_s": col("tessera-np1", "embed_only_tiles_per_s"),
        "tessera_np2_tiles_per_s": col("tessera-np2", "tiles_per_s"),
        "tessera_np2_total_s": col("tessera-np2", "total_s"),
        "tessera_np2_patchgen_s": col("tessera-np2", "patchgen_s"),
        "tessera_np2_embed_s": col("tessera-np2", "embed_s"),
        "tessera_np2_embed_only_tiles_per_s": col("tessera-np2", "embed_only_tiles_per_s"),
        "clam_tiles_per_s": col("clam", "tiles_per_s"),
        "clam_process_s": col("clam", "process_s"),
        "clam_in_process_tiles_per_s": col("clam", "in_process_tiles_per_s"),
        "clam_load_s": col("clam", "load_s"),
        "clam_forward_s": col("clam", "forward_s"),
        "clam_write_s": col("clam", "write_s"),
        "model_only_tessera_tiles_per_s": col("model_only", "tessera_tiles_per_s"),
        "model_only_torchvision_tiles_per_s": col("model_only", "torchvision_tiles_per_s"),
        "ratio_e2e_np1_vs_clam_per_rep": col("ratios", "e2e_np1_vs_clam"),
        "ratio_e2e_np2_vs_clam_per_rep": col("ratios", "e2e_np2_vs_clam"),
        "ratio_model_only_per_rep": col("ratios", "model_only_tessera_vs_torchvision"),
    }
    med = {k: v["median"] for k, v in summary.items()}
    ratios = {
        "e2e_tessera_np1_vs_clam": med["tessera_np1_tiles_per_s"] / med["clam_tiles_per_s"],
        "e2e_tessera_np2_vs_clam": med["tessera_np2_tiles_per_s"] / med["clam_tiles_per_s"],
        "embed_only_np1_vs_clam":
            med["tessera_np1_embed_only_tiles_per_s"] / med["clam_tiles_per_s"],
        "embed_only_np2_vs_clam":
            med["tessera_np2_embed_only_tiles_per_s"] / med["clam_tiles_per_s"],
        "model_only_tessera_vs_torchvision":
            med["model_only_tessera_tiles_per_s"] / med["model_only_torchvision_tiles_per_s"],
    }

    clam0 = load(os.path.join(out, "rep0", "clam.json"))
    bench0 = load(os.path.join(out, "rep0", "embed_bench.json"))
    embed = os.path.join(a.build, "stages", "embed", "embed")
    report = {
        "benchmark": "clam_compare",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_revision": a.git_revision,
        "parameters": {
            "build_dir": a.build, "reps": a.reps, "order": "rotated by one case per repetition",
            "slide": a.slide, "slide_width": a.width, "slide_height": a.height,
            "slide_seed": a.seed, "patches": patches, "patch_size": clam0["patch_size"],
            "level": clam0["level"], "model": "resnet50-trunc (1024-d)", "device": "cpu",
            "precision": "fp32", "batch_size": a.batch_size,
            "clam_num_workers": a.num_workers, "clam_threads": clam0["threads"],
            "tessera_np1": "mpirun -np 1 --bind-to none, --torch-threads 2",
            "tessera_np2": "mpirun -np 2 --bind-to core, --torch-threads 1",
            "model_only_patches": a.model_patches,
            "model_only_tessera": "embed_bench --reps 1 --warmup 0 --torch-threads 2, mode "
                                  "model-only",
            "model_only_torchvision": "clam_extract.py --model-only --threads 2, no warm-up",
            "patchgen_args": a.patchgen_args, "mpiexec_flags": a.mpiexec_flags,
        },
        "versions": {
            "tessera_embed": command_output([embed, "--version"]),
            "tessera_embed_bench": bench0.get("versions"),
            "python_side": clam0["versions"],
            "mpirun": command_output(["mpirun", "--version"]).splitlines()[0:1],
        },
        "machine": {"logical_cores": os.cpu_count(), "load_average_end": os.getloadavg()},
        "repetitions": reps,
        "summary": summary,
        "ratios_of_medians": ratios,
    }
    with open(a.json, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")

    def row(name, key):
        s = summary[key]
        return f"{name:<40} {s['median']:>9.3f}  [{s['min']:.3f}, {s['max']:.3f}]"

    print(f"\n{patches} patches of {a.width}x{a.height}, {a.reps} repetitions, median [min, max]")
    print(row("tessera np1 e2e tiles/s", "tessera_np1_tiles_per_s"))
    print(row("tessera np2 e2e tiles/s", "tessera_np2_tiles_per_s"))
    print(row("clam-like e2e tiles/s", "clam_tiles_per_s"))
    print(row("tessera np1 embed step tiles/s", "tessera_np1_embed_only_tiles_per_s"))
    print(row("tessera np2 embed step tiles/s", "tessera_np2_embed_only_tiles_per_s"))
    print(row("model-only tessera tiles/s", "model_only_tessera_tiles_per_s"))
    print(row("model-only torchvision tiles/s", "model_only_torchvision_tiles_per_s"))
    for k, v in ratios.items():
        print(f"{k:<40} {v:>9.3f}")
    print(f"report: {a.json}")


if __name__ == "__main__":
    main()
