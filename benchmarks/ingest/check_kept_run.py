"""Reads `tessera-status RUN --json` on stdin and exits 0 when the run is complete and each stage
row holds the expected number of rows (ingest_bench --keep's test: what is kept is a usable run).

Usage: tessera-status RUN --json | check_kept_run.py ROWS
"""
import json
import sys


def main(expected_rows):
    status = json.load(sys.stdin)
    rows = [s["rows"] for s in status["stages"]]
    if not status["complete"] or len(rows) != 3 or any(r != expected_rows for r in rows):
        sys.exit("kept run {}: complete {}, rows {} (expected 3 stages of {})".format(
            status["run"], status["complete"], rows, expected_rows))


if __name__ == "__main__":
    main(int(sys.argv[1]))
