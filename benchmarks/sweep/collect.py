#!/usr/bin/python3
"""Strong-scaling sweep collector (benchmarks/sweep/README.md).

  collect.py collect DIR [DIR...] [--out DIR] [--fit-ranks cores|all] [--no-plots]
      Reads every stage benchmark report (*.json with a "benchmark" key) under the DIRs and
      their launches.jsonl (run_sweep.sh), and writes to --out (default: the first DIR):
        sweep.csv            one row per (stage, R): medians of every repetition
        sweep_points.csv     one row per timed repetition (the fit's input)
        sweep_summary.json   the table, the fits, the machine, load averages, revisions
        sweep_<metric>.png   speedup, efficiency, throughput, I/O fraction against R (gnuplot)
      and fits T(R) = N / (R c) + N B / BW per stage by least squares.

  collect.py predict --summary sweep_summary.json --stage STAGE --patches 170e6 --slides 4185
                     --nodes 8 --ranks-per-node 4 --bandwidth-gbs 10 [--rate-per-rank C]
                     [--bytes-per-item B]
      T for N items on nodes x ranks-per-node ranks with storage bandwidth BW, from the fitted c
      and B of STAGE (or the given ones).

The model: T(R) = a / R + b, linear in 1/R, with a = N / c and b = N B / BW (c: items per second
of one rank, B: bytes moved through storage per item, BW: effective storage bandwidth). The rank
count where storage becomes the bound is where the terms are equal: R* = a / b = BW / (c B).
Standard errors come from the least-squares covariance (residual variance, n - 2 degrees of
freedom), propagated to c, BW and R* to first order.
"""

import argparse
import csv
import glob
import json
import math
import os
import statistics
import subprocess
import sys

import numpy as np

STAGES = ("patchgen", "embed", "ingest")
# One-sided 95 % quantiles of Student's t (degrees of freedom 1..30; 1.645 beyond).
T95 = [6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771,
       1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706,
       1.703, 1.701, 1.699, 1.697]


def t95(dof):
    return T95[dof - 1] if 1 <= dof <= len(T95) else 1.645


# ---- reading the drivers' reports: one point per timed repetition ----

def points_patchgen(doc):
    """patchgen_bench: the patchgen run of each repetition (wall between barriers, in-process)."""
    params = doc["parameters"]
    slide_bytes = doc["slide"]["info"]["bytes"]
    out = []
    for rep in doc["repetitions"]:
        pg = rep["patchgen"]
        n = pg["patches"]
        split = pg["time_split_s"]
        out.append({
            "ranks": params["ranks"], "items": n, "wall_s": pg["wall_s"],
            # Written: the shards; read: the slide file (an upper bound: OpenSlide reads only the
            # level-0 tiles under the grid, and the file holds the pyramid too).
            "bytes_written_per_item": pg["shard_bytes"] / n,
            "bytes_read_per_item": slide_bytes / n,
            "io_fraction": pg["io_fraction"],
            "io_note": "(read_decode + write) / (R x wall); read_decode includes JPEG decoding",
            "read_s": split["read_decode"], "write_s": split["write"],
            "cpu_s_per_rank": pg["cpu_s"] / params["ranks"],  # user + system, mean of the ranks
            "load_1min": (rep.get("load_average_at_start") or [None])[0],
        })
    return out


def points_embed(doc):
    """embed_bench: the store mode of each repetition (the stage's own loop over the HDF5 store)."""
    params = doc["parameters"]
    run = doc["run"]
    n = params["patches"]
    channels = 3
    pixel_bytes = run["patch_size"] ** 2 * channels if run.get("encoding") == "raw" else None
    dim = (params.get("model_fingerprint") or {}).get("output_dim")
    dtype_bytes = {"fp32": 4, "fp16": 2, "bf16": 2}.get(params.get("store_dtype"), 4)
    out = []
    for rep in doc["repetitions"]:
        m = rep["modes"]["store"]
        split = m.get("infer_rank0", {})
        total = split.get("total_s") or 0
        out.append({
            "ranks": params["ranks"], "items": n, "wall_s": m["seconds"],
            "bytes_read_per_item": pixel_bytes,
            "bytes_written_per_item": dim * dtype_bytes if dim else None,
            "io_fraction": (split.get("read_s", 0) + split.get("write_s", 0)) / total if total else None,
            "io_note": "rank 0: (read + write) / loop time; reading overlaps forward passes",
            "read_s": split.get("read_s"), "write_s": split.get("write_s"),
            "cpu_s_per_rank": m.get("cpu_s_max_rank"),  # the busiest rank, both its threads
            "load_1min": (rep.get("load_average_at_start") or [None])[0],
        })
    return out


def points_ingest(doc):
    """ingest_bench: every ingest run of the first size (wall of the mpirun command)."""
    out = []
    size = doc["sizes"][0]
    gen = size.get("generate", {})
    for entry in size.get("ingest", []):
        for rep in entry["repetitions"]:
            for key, m in rep["ingest"].items():
                r, n = m["ranks"], m["rows"]
                summed = m["seconds_summed_over_ranks"]
                dim = entry["dim"]
                out.append({
                    "ranks": r, "items": n, "wall_s": m["wall_s"], "index": entry["index"],
                    "bytes_read_per_item": gen.get("embeddings_bytes", 0) / n or None,
                    # Flat: the vectors and the id in index.faiss; meta.h5 adds a few dozen bytes.
                    "bytes_written_per_item": dim * 4 + 8,
                    "io_fraction": (summed.get("read_s", 0) + summed.get("write_s", 0)) / (r * m["wall_s"]),
                    "io_note": "(read + write summed over ranks) / (R x wall); wall includes mpirun start",
                    "read_s": summed.get("read_s"), "write_s": summed.get("write_s"),
                    "cpu_s_per_rank": None,  # the ingest markers carry no CPU time
                    "load_1min": (rep.get("load_average_at_start") or [None])[0],
                })
    return out


READERS = {"patchgen": points_patchgen, "embed": points_embed, "ingest": points_ingest}


def load(dirs):
    """Points (one per repetition), report metadata and launch records of every DIR."""
    points, reports, launches = [], [], {}
    for d in dirs:
        path = os.path.join(d, "launches.jsonl")
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    if line.strip():
                        rec = json.loads(line)
                        launches[os.path.realpath(rec["report"])] = rec
        for path in sorted(glob.glob(os.path.join(d, "*.json"))):
            if os.path.basename(path).startswith("sweep_"):
                continue
            with open(path) as f:
                try:
                    doc = json.load(f)
                except json.JSONDecodeError:
                    continue
            stage = doc.get("benchmark") if isinstance(doc, dict) else None
            if stage not in READERS or "repetitions" not in doc and stage != "ingest":
                continue
            launch = launches.get(os.path.realpath(path), {})
            cores = (doc.get("machine") or {}).get("logical_cores")
            for p in READERS[stage](doc):
                p.update(stage=stage, report=os.path.basename(path), cores=cores,
                         oversubscribed=launch.get("oversubscribed",
                                                   bool(cores) and p["ranks"] > cores),
                         binding=launch.get("binding"),
                         threads_per_rank=launch.get("threads_per_rank"))
                points.append(p)
            reports.append({"stage": stage, "report": path, "date": doc.get("date"),
                            "git_revision": (doc.get("versions") or {}).get("git_revision"),
                            "machine": doc.get("machine"), "load_average": doc.get("load_average"),
                            "launch": launch or None})
    return points, reports


# ---- the table and the fit ----

def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def table(points):
    rows = []
    for stage in STAGES:
        mine = [p for p in points if p["stage"] == stage]
        if not mine:
            continue
        by_r = {}
        for p in mine:
            by_r.setdefault(p["ranks"], []).append(p)
        items = {p["items"] for p in mine}
        if len(items) != 1:
            sys.exit(f"error: {stage} reports disagree on the item count ({sorted(items)}): "
                     "a strong-scaling sweep needs one fixed input")
        base = median(p["wall_s"] for p in by_r[min(by_r)])
        for r in sorted(by_r):
            ps = by_r[r]
            n = ps[0]["items"]
            walls = [p["wall_s"] for p in ps]
            t = median(walls)
            b_read, b_written = median(p["bytes_read_per_item"] for p in ps), median(
                p["bytes_written_per_item"] for p in ps)
            speedup = base / t if min(by_r) == 1 else None
            rows.append({
                "stage": stage, "ranks": r, "items": n,
                "bytes_per_item": (b_read or 0) + (b_written or 0),
                "bytes_read_per_item": b_read, "bytes_written_per_item": b_written,
                "reps": len(ps), "wall_s_median": t, "wall_s_min": min(walls),
                "wall_s_max": max(walls), "throughput_items_per_s": n / t,
                "throughput_per_rank": n / t / r,
                "speedup": speedup, "efficiency": speedup / r if speedup else None,
                "io_fraction": median(p["io_fraction"] for p in ps),
                "cpu_share_per_rank": median(p["cpu_s_per_rank"] / p["wall_s"] for p in ps
                                             if p["cpu_s_per_rank"] is not None),
                "items_per_cpu_s_per_rank": median(p["items"] / r / p["cpu_s_per_rank"] for p in ps
                                                   if p["cpu_s_per_rank"]),
                "oversubscribed": any(p["oversubscribed"] for p in ps),
                "cores": ps[0]["cores"], "threads_per_rank": ps[0]["threads_per_rank"],
                "load_1min_median": median(p["load_1min"] for p in ps),
                "load_1min_max": max((p["load_1min"] for p in ps if p["load_1min"] is not None),
                                     default=None),
            })
    return rows


def fit(points, n, bytes_per_item, key="wall_s"):
    """Least squares of T = a / R + b over the points (T = p[key]); c, BW and R* with standard
    errors."""
    points = [p for p in points if p.get(key) is not None]
    if not points:
        return {"ok": False, "reason": f"the reports hold no {key}"}
    ranks = np.array([p["ranks"] for p in points], dtype=float)
    t = np.array([p[key] for p in points], dtype=float)
    if len(set(ranks)) < 2:
        return {"ok": False, "reason": "fewer than two rank counts"}
    x = np.column_stack([1.0 / ranks, np.ones_like(ranks)])
    coef, _, _, _ = np.linalg.lstsq(x, t, rcond=None)
    a, b = float(coef[0]), float(coef[1])
    dof = len(t) - 2
    resid = t - x @ coef
    out = {"ok": True, "points": len(t), "ranks": sorted({int(r) for r in ranks}), "dof": dof,
           "a_s": a, "b_s": b, "items": n, "bytes_per_item": bytes_per_item,
           "rms_residual_s": float(math.sqrt(float(resid @ resid) / len(t)))}
    if dof > 0:
        s2 = float(resid @ resid) / dof
        cov = s2 * np.linalg.inv(x.T @ x)
        se_a, se_b, cov_ab = math.sqrt(cov[0, 0]), math.sqrt(cov[1, 1]), float(cov[0, 1])
    else:
        se_a = se_b = cov_ab = float("nan")
    out.update(se_a_s=se_a, se_b_s=se_b)
    out["c_items_per_s_per_rank"] = n / a if a > 0 else None
    out["se_c"] = n * se_a / a ** 2 if a > 0 else None
    upper_b = b + t95(dof) * se_b if dof > 0 else float("nan")
    significant = dof > 0 and b - t95(dof) * se_b > 0
    out["b_significant"] = significant
    out["b_upper95_s"] = upper_b
    out["a_positive"] = a > 0
    if bytes_per_item is None:
        out["r_star"] = a / b if a > 0 and b > 0 else None
        return out
    nb = n * bytes_per_item
    if b > 0:
        out["bw_bytes_per_s"] = nb / b
        out["se_bw"] = nb * se_b / b ** 2
        r_star = a / b if a > 0 else None
        var = (se_a / b) ** 2 + (a * se_b / b ** 2) ** 2 - 2 * a / b ** 3 * cov_ab
        out["r_star"] = r_star
        out["se_r_star"] = math.sqrt(var) if var >= 0 and a > 0 else None
    else:
        out["bw_bytes_per_s"] = out["se_bw"] = out["r_star"] = out["se_r_star"] = None
    # With b not significantly > 0 the data bound BW and R* from below only.
    out["bw_lower95_bytes_per_s"] = nb / upper_b if upper_b > 0 else None
    out["r_star_lower95"] = a / upper_b if upper_b > 0 and a > 0 else None
    return out


def fits(points, rows, fit_ranks):
    result = {}
    for stage in STAGES:
        mine = [p for p in points if p["stage"] == stage]
        if not mine:
            continue
        row = next(r for r in rows if r["stage"] == stage)
        cores = row["cores"] or max(p["ranks"] for p in mine)
        use = mine if fit_ranks == "all" else [p for p in mine if p["ranks"] <= cores]
        result[stage] = {
            "ranks_used": fit_ranks, "cores": cores,
            "within_cores": fit(use, row["items"], row["bytes_per_item"]),
            "all_ranks": fit(mine, row["items"], row["bytes_per_item"]),
            # The same model over CPU seconds per rank instead of wall time: what T would be if
            # every rank had a core of its own (CPU-bound work), on a machine shared with others.
            # b is then CPU work every rank repeats, not storage: no BW.
            "cpu_time": fit(use, row["items"], None, key="cpu_s_per_rank"),
        }
    return result


# ---- output ----

CSV_COLUMNS = ["stage", "ranks", "items", "bytes_per_item", "bytes_read_per_item",
               "bytes_written_per_item", "reps", "wall_s_median", "wall_s_min", "wall_s_max",
               "throughput_items_per_s", "throughput_per_rank", "speedup", "efficiency",
               "io_fraction", "cpu_share_per_rank", "items_per_cpu_s_per_rank", "oversubscribed", "cores", "threads_per_rank", "load_1min_median",
               "load_1min_max"]
POINT_COLUMNS = ["stage", "ranks", "items", "wall_s", "cpu_s_per_rank", "io_fraction", "read_s",
                 "write_s",
                 "load_1min", "oversubscribed", "binding", "report"]


def write_csv(path, rows, columns):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else
                            f"{r[k]:.6g}" if isinstance(r.get(k), float) else r[k]) for k in columns})


PLOTS = [("speedup", "speedup T(1) / T(R)", "speedup"),
         ("efficiency", "parallel efficiency speedup / R", "efficiency"),
         ("throughput", "items per second (log scale)", "throughput_items_per_s"),
         ("io_fraction", "I/O fraction of rank time", "io_fraction"),
         ("cpu_share", "CPU seconds per rank / wall seconds", "cpu_share_per_rank")]


def plot(out_dir, rows, fit_result):
    """PNG plots with gnuplot: one line per stage, the model's speedup dashed."""
    stages = [s for s in STAGES if any(r["stage"] == s for r in rows)]
    max_r = max(r["ranks"] for r in rows)
    cores = max((r["cores"] or 0) for r in rows)
    written = []
    for name, ylabel, key in PLOTS:
        data = os.path.join(out_dir, f"sweep_{name}.dat")
        with open(data, "w") as f:
            for s in stages:
                f.write(f"# {s}\n")
                for r in rows:
                    if r["stage"] == s and r.get(key) is not None:
                        f.write(f"{r['ranks']} {r[key]:.6g}\n")
                f.write("\n\n")
        png = os.path.join(out_dir, f"sweep_{name}.png")
        cmds = ["set terminal pngcairo size 720,480 font ',10'", f"set output '{png}'",
                "set key top left", "set grid", "set xlabel 'ranks R'", f"set ylabel '{ylabel}'",
                "set logscale x 2", f"set xrange [0.8:{max_r * 1.25}]",
                f"set title 'tessera strong scaling ({cores} cores; R > {cores} oversubscribed)'"]
        if cores:
            edge = cores * math.sqrt(2)  # halfway to the next power of two on the log axis
            cmds.append(f"set arrow from {edge:.3f},graph 0 to {edge:.3f},graph 1 nohead dt 3")
        if name == "throughput":
            cmds.append("set logscale y 10")
        if name in ("efficiency", "io_fraction", "cpu_share"):
            cmds.append("set yrange [0:*]")
        series = [f"'{data}' index {i} with linespoints lw 2 pt 7 title '{s}'"
                  for i, s in enumerate(stages)]
        if name == "speedup":
            series.append("x with lines dt 2 lc 'gray' title 'ideal'")
            for s in stages:
                fr = fit_result.get(s, {}).get("within_cores", {})
                if fr.get("ok") and fr.get("a_positive"):
                    a, b = fr["a_s"], fr["b_s"]
                    series.append(f"(({a:.6g})+({b:.6g}))/(({a:.6g})/x+({b:.6g})) with lines dt 4 "
                                  f"title '{s} model (fit R<={cores})'")
        if name == "efficiency":
            series.append("1 with lines dt 2 lc 'gray' title 'ideal'")
        cmds.append("plot " + ", ".join(series))
        try:
            subprocess.run(["gnuplot"], input="\n".join(cmds) + "\n", text=True, check=True)
            written.append(os.path.basename(png))
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"warning: gnuplot failed for {png}: {e} (apt-get install gnuplot-nox)",
                  file=sys.stderr)
        os.remove(data)
    return written


def g(x, spec=".4g", scale=1.0):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x / scale, spec)


def fmt_fit(stage, f):
    if not f.get("ok"):
        return f"{stage}: no fit ({f.get('reason')})"
    text = (f"{stage}: a = {g(f['a_s'], '.3g')} +- {g(f['se_a_s'], '.2g')} s, b = "
            f"{g(f['b_s'], '.3g')} +- {g(f['se_b_s'], '.2g')} s over R = {f['ranks']} "
            f"({f['points']} points); c = {g(f['c_items_per_s_per_rank'])} +- {g(f['se_c'], '.2g')}"
            " items/s per rank; ")
    if not f["a_positive"]:
        return text + "T does not fall with R (a <= 0): the model does not describe these runs"
    if f["bytes_per_item"] is None:
        return text + f"R* = a / b = {g(f['r_star'], '.3g')}"
    if f["b_significant"]:
        text += (f"BW = {g(f['bw_bytes_per_s'], '.4g', 1e6)} +- {g(f['se_bw'], '.2g', 1e6)} MB/s, "
                 f"R* = {g(f['r_star'], '.3g')} +- {g(f['se_r_star'], '.2g')}")
    else:
        text += (f"b not significantly > 0: BW >= {g(f['bw_lower95_bytes_per_s'], '.4g', 1e6)} "
                 f"MB/s, R* >= {g(f['r_star_lower95'], '.3g')} (95 %)")
    return text


def cmd_collect(args):
    out_dir = args.out or args.dirs[0]
    os.makedirs(out_dir, exist_ok=True)
    points, reports = load(args.dirs)
    if not points:
        sys.exit("error: no stage benchmark reports found in " + ", ".join(args.dirs))
    rows = table(points)
    fit_result = fits(points, rows, args.fit_ranks)
    write_csv(os.path.join(out_dir, "sweep.csv"), rows, CSV_COLUMNS)
    write_csv(os.path.join(out_dir, "sweep_points.csv"), points, POINT_COLUMNS)
    plots = [] if args.no_plots else plot(out_dir, rows, fit_result)
    summary = {"model": "T(R) = N / (R c) + N B / BW = a / R + b; c = N / a, BW = N B / b, "
                        "R* = a / b = BW / (c B)",
               "table": rows, "fits": fit_result, "plots": plots, "reports": reports}
    with open(os.path.join(out_dir, "sweep_summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    for r in rows:
        print(f"{r['stage']:9s} R={r['ranks']:<3d} T={r['wall_s_median']:.3f} s "
              f"[{r['wall_s_min']:.3f}, {r['wall_s_max']:.3f}] x{r['reps']}  "
              f"{r['throughput_items_per_s']:.4g} items/s  S={r['speedup'] or 0:.2f} "
              f"E={r['efficiency'] or 0:.2f}  io={r['io_fraction'] or 0:.3f}  "
              f"cpu/rank={g(r['cpu_share_per_rank'], '.2f')}"
              f"{'  (oversubscribed)' if r['oversubscribed'] else ''}")
    for stage, f in fit_result.items():
        print(fmt_fit(stage, f["within_cores"]))
        print("  with every R: " + fmt_fit(stage, f["all_ranks"]))
        print("  CPU seconds per rank: " + fmt_fit(stage, f["cpu_time"]))
    print(f"wrote {out_dir}/sweep.csv, sweep_points.csv, sweep_summary.json, " + ", ".join(plots))


def cmd_predict(args):
    c = args.rate_per_rank
    se_c = 0.0
    b_item = args.bytes_per_item
    if args.summary:
        with open(args.summary) as f:
            fits_of = json.load(f)["fits"][args.stage]
        f_stage = fits_of["within_cores" if args.fit == "wall" else "cpu_time"]
        if c is None:
            if not f_stage.get("a_positive"):
                sys.exit(f"error: the {args.fit} fit of {args.stage} has no compute term (a <= 0); "
                         "try --fit cpu or give --rate-per-rank")
            c, se_c = f_stage["c_items_per_s_per_rank"], f_stage["se_c"]
        if b_item is None:
            b_item = fits_of["within_cores"]["bytes_per_item"]
    if c is None or b_item is None:
        sys.exit("error: give --summary or both --rate-per-rank and --bytes-per-item")
    n, ranks, bw = args.patches, args.nodes * args.ranks_per_node, args.bandwidth_gbs * 1e9
    compute = n / (ranks * c)
    storage = n * b_item / bw
    total = compute + storage
    se_total = n * se_c / (ranks * c ** 2) if se_c else 0.0
    r_star = bw / (c * b_item)
    result = {"stage": args.stage, "patches": n, "slides": args.slides,
              "patches_per_slide": n / args.slides if args.slides else None,
              "nodes": args.nodes, "ranks_per_node": args.ranks_per_node, "ranks": ranks,
              "bandwidth_bytes_per_s": bw, "c_items_per_s_per_rank": c, "se_c": se_c,
              "bytes_per_item": b_item, "compute_s": compute, "storage_s": storage,
              "total_s": total, "se_total_s": se_total, "r_star": r_star,
              "bound": "storage" if storage > compute else "compute"}
    print(json.dumps(result, indent=2) if args.json else
          f"{args.stage}: {n:.4g} items on {args.nodes} x {args.ranks_per_node} = {ranks} ranks "
          f"at c = {c:.4g} items/s per rank, B = {b_item / 1e3:.4g} kB, BW = {args.bandwidth_gbs} "
          f"GB/s: T = {compute:.4g} s compute + {storage:.4g} s storage = {total / 3600:.3g} h "
          f"(+- {se_total / 3600:.2g} h from c); {result['bound']}-bound; storage binds from "
          f"R* = {r_star:.4g} ranks")
    if args.slides and ranks > args.slides:
        print(f"note: {ranks} ranks > {args.slides} slides", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="CSV, plots, fits from sweep folders")
    c.add_argument("dirs", nargs="+")
    c.add_argument("--out")
    c.add_argument("--fit-ranks", choices=("cores", "all"), default="cores",
                   help="fit over R <= the machine's cores (default) or every R")
    c.add_argument("--no-plots", action="store_true")
    c.set_defaults(func=cmd_collect)
    q = sub.add_parser("predict", help="predicted T for a cohort on a cluster")
    q.add_argument("--summary", help="sweep_summary.json of `collect`")
    q.add_argument("--stage", required=True, choices=STAGES)
    q.add_argument("--patches", type=float, default=170e6)
    q.add_argument("--slides", type=int, default=4185)
    q.add_argument("--nodes", type=int, required=True)
    q.add_argument("--ranks-per-node", type=int, required=True)
    q.add_argument("--bandwidth-gbs", type=float, required=True, help="storage bandwidth, GB/s")
    q.add_argument("--fit", choices=("wall", "cpu"), default="wall",
                   help="c from the wall-time fit (default) or the CPU-seconds fit")
    q.add_argument("--rate-per-rank", type=float, help="c, items/s per rank (default: the fit's)")
    q.add_argument("--bytes-per-item", type=float, help="B (default: the sweep's)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_predict)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
