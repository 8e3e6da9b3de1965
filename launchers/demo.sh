#!/usr/bin/env bash
# Runs the whole pipeline on a generated demo cohort: 3 synthetic slides, patchgen, embed and ingest
# with 2 ranks each, then a query whose table is printed and whose mosaic is written.
# Usage: launchers/demo.sh [DEMO_DIR]   (default: demo-run)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
demo="$(realpath -m "${1:-$root/demo-run}")"
build="$root/build"
"$root/.ci/bootstrap"
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$(nproc)" --target synthslide patchgen embed ingest query tessera-status
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

mkdir -p "$demo/slides"
{
  echo "slide_id,path,patient_id,site"
  for i in 1 2 3; do
    slide="$demo/slides/demo-$i.tif"
    [[ -f "$slide" ]] || "$build/tests/synthslide/synthslide" --out "$slide" --width 4000 \
      --height 3000 --seed "$i" --mask-out "$demo/slides/demo-$i.mask.png" >&2
    echo "demo-$i,slides/demo-$i.tif,patient-$(( (i + 1) / 2 )),site-$i"
  done
} > "$demo/manifest.csv"

# patchgen, embed and ingest with 2 ranks of 1 thread each (launchers/chain.sh). The index has two
# shards, each rank building one; cosine similarity over unit-length vectors.
"$root/launchers/chain.sh" --build "$build" --run "$demo/run" --manifest "$demo/manifest.csv" \
  --model vit-s16 --ranks 2 --threads 1 --embed-args "--precision fp32 --batch-size 16" \
  --ingest-args "--shards 2 --normalize"
# The patches most like the one at the centre of demo-1, from the other patients' slides.
"$build/stages/query/query" --index "$demo/run/ingest/vit-s16" --slide demo-1 --x 2000 --y 1500 \
  -k 8 --exclude-same-patient --mosaic "$demo/query-mosaic.png"

echo
"$build/stages/status/tessera-status" "$demo/run"
echo
echo "patchgen summary ($demo/run/patchgen/_SUCCESS):"
grep -E '"(patches|slides_ok|slides_failed)"' "$demo/run/patchgen/_SUCCESS"
echo "QC images: $demo/run/patchgen/qc/"
echo "embeddings: $demo/run/embed/vit-s16/embeddings.h5, per slide: $demo/run/embed/vit-s16/features/"
echo "index: $demo/run/ingest/vit-s16/catalog.json; query mosaic: $demo/query-mosaic.png"
echo
echo "serve the index with its slide viewer (then open http://127.0.0.1:8470/ in a browser):"
echo "  $root/launchers/serve.sh $demo/run vit-s16 --build $build"
