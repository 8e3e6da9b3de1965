#!/usr/bin/env bash
# The commands README.md and docs/ show run as printed from the source folder (CTest
# doc_commands_test):
#
#   doc_commands_test.sh SOURCE_DIR
#
# Every command line of a code block that starts with mpirun, or with a stage's name followed by
# an option or a path (not a row of a table it prints), names the program by its path
# (build/stages/<stage>/<stage>, launchers/...): a bare `serve` or `embed` is
# not on PATH after a build. A `-np` of more than 4 literal ranks (more than a laptop's slots) is
# refused unless it is a variable ($R) or the text says so (the word "slots" in the same file).
set -euo pipefail
src="${1:?usage: doc_commands_test.sh SOURCE_DIR}"
/usr/bin/python3 - "$src" <<'PY'
import pathlib, re, sys
src = pathlib.Path(sys.argv[1])
stages = {"patchgen", "embed", "aggregate", "ingest", "query", "serve", "tessera-status",
          "embed-image"}
bad = []
files = [src / "README.md", src / "slurm" / "README.md", *sorted((src / "docs").glob("*.md"))]
for f in files:
    text = f.read_text()
    in_fence = False
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        code = in_fence or line.startswith("    ")
        if not code:
            continue
        words = line.strip().lstrip("[").split()
        if not words:
            continue
        program = None
        if words[0] == "mpirun":
            rest = words[1:]
            while rest and rest[0].startswith("-"):
                option = rest.pop(0)
                if option in ("-np", "-n", "--map-by", "--bind-to", "--mca") and rest:
                    value = rest.pop(0)
                    if option in ("-np", "-n") and value.isdigit() and int(value) > 4 \
                            and "slots" not in text:
                        bad.append(f"{f}:{n}: -np {value} without a word on slots: {line.strip()}")
            program = rest[0].rstrip("]") if rest else None
        elif words[0] in stages and len(words) > 1 and re.match(r"(--|/|RUN\b)", words[1]):
            program = words[0]  # a command (options or a path follow), not a row of its output
        if program in stages:
            bad.append(f"{f}:{n}: bare '{program}' is not on PATH: {line.strip()}")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
echo "-- ok"
