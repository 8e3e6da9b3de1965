#!/usr/bin/python3
"""Process start-up of tessera executables: wall time of `BINARY --version` (or any arguments),
repeated and interleaved over several binaries so that machine load affects them alike. Writes a
JSON report like the other drivers: every repetition, median, min, max, the shared libraries each
binary loads, parameters, git revision and host.

  benchmarks/startup_bench.py --out startup.json --reps 20 \
      --binary before=/tmp/query_old --binary after=build/stages/query/query [--args --version]

With --query-work, each run's output is read for query's own timings ("... loaded in Xs"
and "N queries in Y s"), and "overhead" is the wall time minus X and Y: the process overhead of a
first answer (library loading, MPI set-up, catalog, output, exit), e.g.

  benchmarks/startup_bench.py --out first.json --reps 10 --query-work \
      --binary before=... --binary after=build/stages/query/query \
      --args --index RUN/ingest/ivf1024 --vectors q.npy -k 10 --verify cheap --threads 2
"""
import argparse
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import time


def git_revision(root):
    try:
        return subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def shared_libraries(binary):
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    return sum(1 for line in out.splitlines() if "=>" in line or line.strip().startswith("/"))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--binary", action="append", required=True, help="NAME=PATH, repeatable")
    p.add_argument("--args", nargs=argparse.REMAINDER, default=["--version"])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--out", required=True)
    p.add_argument("--query-work", action="store_true",
                   help="subtract query's logged load and search seconds (see above)")
    a = p.parse_args()
    binaries = dict(b.split("=", 1) for b in a.binary)
    times = {name: [] for name in binaries}
    overheads = {name: [] for name in binaries}
    for rep in range(a.warmup + a.reps):
        for name, path in binaries.items():
            start = time.perf_counter()
            done = subprocess.run([path] + a.args, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, check=True)
            elapsed = time.perf_counter() - start
            if rep < a.warmup:
                continue
            times[name].append(elapsed)
            if a.query_work:
                load = re.search(r"loaded in ([0-9.]+)\s*s", done.stdout)
                search = re.search(r"queries in ([0-9.]+) s", done.stdout)
                if not load or not search:
                    raise SystemExit(f"{name}: no load or search time in its log:\n{done.stdout}")
                overheads[name].append(elapsed - float(load.group(1)) - float(search.group(1)))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    report = {
        "benchmark": "startup_bench",
        "parameters": {"args": a.args, "reps": a.reps, "warmup": a.warmup},
        "git_revision": git_revision(root),
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
        "results": {
            name: {"binary": binaries[name], "shared_libraries": shared_libraries(binaries[name]),
                   "seconds": times[name], "median_s": statistics.median(times[name]),
                   "min_s": min(times[name]), "max_s": max(times[name])}
            for name in binaries},
    }
    if a.query_work:
        for name, o in overheads.items():
            report["results"][name].update({"overhead_s": o, "overhead_median_s": statistics.median(o),
                                            "overhead_min_s": min(o), "overhead_max_s": max(o)})
    with open(a.out, "w") as f:
        json.dump(report, f, indent=2)
    for name, r in report["results"].items():
        print(f"{name}: median {r['median_s']:.3f} s (min {r['min_s']:.3f}, max {r['max_s']:.3f}), "
              f"{r['shared_libraries']} shared libraries")
        if a.query_work:
            print(f"{name}: overhead median {r['overhead_median_s']:.3f} s "
                  f"(min {r['overhead_min_s']:.3f}, max {r['overhead_max_s']:.3f})")


if __name__ == "__main__":
    main()
