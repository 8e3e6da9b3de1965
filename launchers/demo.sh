#!/usr/bin/env bash
# Runs the whole pipeline on a generated, labelled demo cohort: 8 synthetic slides of 5 patients,
# each patient with a diagnosis (tumour, stroma, fat or necrosis) that dominates its slides;
# patchgen, embed and ingest with 2 ranks each, then a patch query whose table is printed and
# whose mosaic is written; then slide vectors (aggregate), a slide index, and the slides nearest
# a slide, by slide vector and by mosaic voting. The built-in model has random weights: the hits
# are alike because the tissue classes look different, not because the model knows pathology.
# Usage: launchers/demo.sh [DEMO_DIR]   (default: demo-run)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
demo="$(realpath -m "${1:-$root/demo-run}")"
build="$root/build"
"$root/.ci/bootstrap"
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$(nproc)" --target synthcohort patchgen embed aggregate ingest query \
  tessera-status
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# slides/S000N.tif with their class masks, manifest.csv (slide_id,path,patient_id,diagnosis) and
# truth.csv (each slide's share of every class).
[[ -f "$demo/cohort/manifest.csv" ]] || "$build/tests/synthslide/synthcohort" --out "$demo/cohort" \
  --slides 8 --patients 5 --width 2000 --height 1500 --seed 1 --threads "$(nproc)" >&2

# patchgen, embed and ingest with 2 ranks of 1 thread each (launchers/chain.sh). The index has two
# shards, each rank building one; cosine similarity over unit-length vectors.
"$root/launchers/chain.sh" --build "$build" --run "$demo/run" --manifest "$demo/cohort/manifest.csv" \
  --model vit-s16 --ranks 2 --threads 1 --embed-args "--precision fp32 --batch-size 16" \
  --ingest-args "--shards 2 --normalize"
# The patches most like one in a stroma region of S0001 (patient P001, diagnosis stroma), from
# the other patients' slides: the diagnosis column shows where they come from (the class under
# every patch is in the class masks, cohort/slides/*.classes.png).
"$build/stages/query/query" --index "$demo/run/ingest/vit-s16" --slide S0001 --x 1300 --y 870 \
  -k 8 --exclude-same-patient --mosaic "$demo/query-mosaic.png"

# Slide vectors (mean of each slide's patch features; TRIDENT's slide_features_mean-vit-s16/),
# a slide index, and the slides nearest S0001 from other patients: by slide vector, then by
# the votes of a mosaic of S0001's patches searched over the patch index (Yottixel).
mpirun -np 2 --bind-to none "$build/stages/aggregate/aggregate" --run "$demo/run" --tag vit-s16
"$build/stages/ingest/ingest" --run "$demo/run" --level slide --slides mean-vit-s16 --normalize
echo
"$build/stages/query/query" --index "$demo/run/ingest/mean-vit-s16" --similar-slide S0001 -k 4 \
  --exclude-same-patient
echo
"$build/stages/query/query" --index "$demo/run/ingest/vit-s16" --slide S0001 --mosaic-vote -k 4 \
  --exclude-same-patient

echo
"$build/stages/status/tessera-status" "$demo/run"
echo
echo "patchgen summary ($demo/run/patchgen/_SUCCESS):"
grep -E '"(patches|slides_ok|slides_failed)"' "$demo/run/patchgen/_SUCCESS"
echo "QC images: $demo/run/patchgen/qc/"
echo "embeddings: $demo/run/embed/vit-s16/embeddings.h5, per slide: $demo/run/embed/vit-s16/features/"
echo "index: $demo/run/ingest/vit-s16/catalog.json; query mosaic: $demo/query-mosaic.png"
echo "slide vectors: $demo/run/slides/mean-vit-s16/slides.h5; class ground truth: $demo/cohort/truth.csv"
echo
echo "serve the index with its slide viewer (then open http://127.0.0.1:8470/ in a browser):"
echo "  $root/launchers/serve.sh $demo/run vit-s16 --build $build"
