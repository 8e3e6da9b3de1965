#!/usr/bin/env bash
# Runs the whole pipeline on a generated, labelled demo cohort: 8 synthetic slides of 5 patients,
# each patient with a diagnosis (tumour, stroma, fat or necrosis) that dominates its slides;
# patchgen, embed and ingest with 2 ranks each, then a patch query whose table is printed and
# whose mosaic is written; then slide vectors (aggregate), a slide index, and the slides nearest
# a slide, by slide vector and by mosaic voting. The built-in model has random weights: the hits
# are alike because the tissue classes look different, not because the model knows pathology.
# The stages run quietly (their log goes to DEMO_DIR/demo.log); the results follow as a summary.
# Usage: launchers/demo.sh [--no-build] [--model NAME] [DEMO_DIR]   (default: demo-run)
#   --no-build   use the build as it is (no package check, no cmake): for tests
#   --model NAME another built-in model than vit-s16 (tests take the smaller vit-tiny)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_it=1 model=vit-s16
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --no-build) build_it=0; shift ;;
    --model) model="${2:?--model needs a built-in model name}"; shift 2 ;;
    *) echo "demo.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
demo="$(realpath -m "${1:-$root/demo-run}")"
build="$root/build"
if ((build_it)); then
  "$root/.ci/bootstrap"
  generator=()
  if command -v ninja >/dev/null; then generator=(-G Ninja); fi
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  cmake --build "$build" -j "$(nproc)" --target synthcohort patchgen embed aggregate ingest query \
    tessera-status
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$demo"
log="$demo/demo.log"
: > "$log"
quiet=(--log-level warn)
# Runs a step with its output in the log; on failure shows the log's end and stops.
step() {
  local what="$1"; shift
  printf '%-58s' "$what" >&2
  local start=$SECONDS
  if ! "$@" >> "$log" 2>&1; then
    echo " failed; the end of $log:" >&2
    tail -20 "$log" >&2
    exit 1
  fi
  echo " $((SECONDS - start)) s" >&2
}
section() { printf '\n== %s ==\n\n' "$1"; }

# slides/S000N.tif with their class masks, manifest.csv (slide_id,path,patient_id,diagnosis) and
# truth.csv (each slide's share of every class).
if [[ ! -f "$demo/cohort/manifest.csv" ]]; then
  step "synthetic cohort (8 slides, 5 patients)" "$build/tests/synthslide/synthcohort" \
    --out "$demo/cohort" --slides 8 --patients 5 --width 2000 --height 1500 --seed 1 \
    --threads "$(nproc)"
fi
# patchgen, embed and ingest with 2 ranks of 1 thread each (launchers/chain.sh). The index has two
# shards, each rank building one; cosine similarity over unit-length vectors.
step "patchgen, embed ($model), ingest: 2 ranks each" "$root/launchers/chain.sh" --build "$build" \
  --run "$demo/run" --manifest "$demo/cohort/manifest.csv" --model "$model" --ranks 2 --threads 1 \
  --patchgen-args "${quiet[*]}" --embed-args "--precision fp32 --batch-size 16 ${quiet[*]}" \
  --ingest-args "--shards 2 --normalize ${quiet[*]}"
# Slide vectors (mean of each slide's patch features; TRIDENT's slide_features_mean-$model/) and
# a slide index of them.
slide_vectors() {
  mpirun -np 2 --bind-to none "$build/stages/aggregate/aggregate" --run "$demo/run" --tag "$model" \
    "${quiet[@]}"
  "$build/stages/ingest/ingest" --run "$demo/run" --level slide --slides "mean-$model" --normalize \
    "${quiet[@]}"
}
step "aggregate (slide means), slide index" slide_vectors

# The patches most like one in a stroma region of S0001 (patient P001, diagnosis stroma), from
# the other patients' slides: the diagnosis column shows where they come from (the class under
# every patch is in the class masks, cohort/slides/*.classes.png).
section "Patches most like S0001 at (1300, 870), a stroma region, from other patients"
"$build/stages/query/query" --index "$demo/run/ingest/$model" --slide S0001 --x 1300 --y 870 \
  -k 8 --exclude-same-patient --mosaic "$demo/query-mosaic.png" "${quiet[@]}"
echo "(their mosaic: $demo/query-mosaic.png)"
# The slides nearest S0001 from other patients: by slide vector, then by the votes of a mosaic of
# S0001's patches searched over the patch index (Yottixel).
section "Slides most like S0001 (other patients), by slide vector"
"$build/stages/query/query" --index "$demo/run/ingest/mean-$model" --similar-slide S0001 -k 4 \
  --exclude-same-patient "${quiet[@]}"
section "Slides and patients most like S0001 (other patients), by mosaic voting"
"$build/stages/query/query" --index "$demo/run/ingest/$model" --slide S0001 --mosaic-vote -k 4 \
  --exclude-same-patient "${quiet[@]}"

section "The run"
"$build/stages/status/tessera-status" "$demo/run"
/usr/bin/python3 - "$demo/run/patchgen/_SUCCESS" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"\npatchgen: {s['patches']} patches from {s['slides_ok']} slides"
      f" ({s['slides_failed']} failed)")
PY
cat <<EOF
QC images:     $demo/run/patchgen/qc/
embeddings:    $demo/run/embed/$model/embeddings.h5 (per slide: features/)
patch index:   $demo/run/ingest/$model/catalog.json
slide vectors: $demo/run/slides/mean-$model/slides.h5
ground truth:  $demo/cohort/truth.csv (each slide's share of every tissue class)
stage logs:    $log

NOTE: $model is a built-in model with random weights. Its hits are alike because the synthetic
tissue classes look different, not because it knows pathology; use a real model for science
(docs/operations.md, "Models").

Serve the index with its slide viewer, then open http://127.0.0.1:8470/ in a browser:
  $root/launchers/serve.sh $demo/run $model --build $build
EOF
