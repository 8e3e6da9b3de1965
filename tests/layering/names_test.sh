#!/usr/bin/env bash
# The files two stages exchange have one owner: common/store for the HDF5 files and their names,
# common/vector for the FAISS indexes and catalogs. This test fails when production code anywhere
# else (common/, stages/, benchmarks/; tests spell the documented names on purpose, as readers
# independent of the writers, like the h5py tests):
#   1. spells an HDF5 dataset or group name of an exchanged file in an HDF5 call;
#   2. spells an exchanged file name (a name with an extension: index.h5, embeddings.h5,
#      slide_catalog.json, ...) in a string literal, alone or inside a path ("/embeddings.h5");
#   3. spells an exchanged folder (features, shards, plans) as a path component of a literal
#      ("features/", "/features") or joins it into a path (`/ "features"`);
#   4. opens or creates an HDF5 file, or reads or writes a group or dataset, by hand (h5::File,
#      h5::Group, h5::Dataset), but for the files named in `own_h5` below, each of which owns an
#      HDF5 file no other stage reads.
#   5. spells a file or folder the skeleton keeps in every stage directory (run.json, config.ini,
#      _SUCCESS, _STALE, .lock, .ranks.lock, progress.jsonl, markers, failures) in a literal
#      outside common/stage: the layout (common/stage/layout.h, stage_file) owns those paths.
# The names are collected from the headers of store and vector (`inline constexpr const char* kX
# = "name";`), and the skeleton's from those of common/stage (kXFile, kXDir). Usage:
# names_test.sh SOURCE_DIR
set -euo pipefail
src="$1"
cd "$src"
owners='^(common/(store|vector|h5)/)'
# HDF5 files that are no exchanged file: each is written and read by one stage, or is a user's.
own_h5=(
  stages/patchgen/plan.cpp     # plans/<slide_id>.h5: patchgen's resume state, read by patchgen
  stages/embed/peer_formats.cpp  # CLAM's and TRIDENT's patch files: read by those tools only
  stages/query/inputs.cpp      # a user's vector file given to --vectors
  benchmarks/patchgen/run.cpp   # its own plan of the benchmark slide (through plan.cpp)
)
mapfile -t names < <(grep -hoE 'inline constexpr const char\* k[A-Za-z0-9]+ = "[^"]+"' \
  common/store/*.h common/vector/*.h | sed -E 's/.*= "([^"]+)"/\1/' | sort -u)
if ((${#names[@]} < 15)); then
  echo "names_test: found only ${#names[@]} names in common/store and common/vector headers:" \
    "the pattern is stale" >&2
  exit 1
fi
files=() folders=()
for n in "${names[@]}"; do
  if [[ "$n" == *.* ]]; then files+=("$n"); fi
done
# The exchanged folders files.h declares (kPlansDir, kShardsDir, kFeaturesDir).
mapfile -t folders < <(grep -hoE 'inline constexpr const char\* k[A-Za-z0-9]+Dir = "[^"]+"' \
  common/store/files.h | sed -E 's/.*= "([^"]+)"/\1/')
if ((${#files[@]} < 8 || ${#folders[@]} < 3)); then
  echo "names_test: found ${#files[@]} file and ${#folders[@]} folder names: the pattern is stale" >&2
  exit 1
fi
# The skeleton's files and folders (layout.h's kRunFile ... kMarkerDir, failure.h's kFailureDir);
# kServicesDir ("serve") names a folder of the run, not of a stage directory.
mapfile -t skeleton < <(grep -hoE 'inline constexpr const char\* k[A-Za-z]+(File|Dir) = "[^"]+"' \
  common/stage/*.h | grep -v kServicesDir | sed -E 's/.*= "([^"]+)"/\1/' | sort -u)
if ((${#skeleton[@]} < 9)); then
  echo "names_test: found only ${#skeleton[@]} skeleton names in common/stage headers" >&2
  exit 1
fi
quote() { printf '%s|' "$@" | sed 's/[.]/[.]/g; s/|$//'; }
all=$(quote "${names[@]}")
file_re=$(quote "${files[@]}")
folder_re=$(quote "${folders[@]}")
production() {
  grep -rnE --include='*.cpp' --include='*.h' "$1" common stages benchmarks |
    grep -vE "$owners" | grep -vE '^[^:]*_test[a-z_]*\.(cpp|h):' |
    grep -vE 'constexpr const char\*' || true
}
calls='open_dataset|create_appendable|create_dataset|write_dataset|write_strings|write_vector|open_group|create_group|has_dataset|link_exists|exists'
problems=""
add() { if [[ -n "$2" ]]; then problems+="$1:"$'\n'"$2"$'\n'; fi; }
add "an exchanged dataset or group name in an HDF5 call" \
  "$(production "($calls)\\(\"($all)\"")"
add "an exchanged file name in a literal" \
  "$(production "\"([^\"]*/)?($file_re)\"")"
own=$(printf '%s|' "${own_h5[@]}" | sed 's/[.]/[.]/g; s/|$//')
# (An object path "/features" inside a file of `own_h5` is that file's own dataset.)
add "an exchanged folder in a literal or joined into a path" \
  "$(production "(\"($folder_re)/|/($folder_re)(/[^\"]*)?\"|/ *\"($folder_re)\"|\"($folder_re)\" */)" |
     grep -vE "^($own):[0-9]+:.*\"/($folder_re)\"" || true)"
add "an HDF5 file, group or dataset handled by hand (ask common/store)" \
  "$(production 'h5::(File|Group|Dataset)\b' | grep -vE "^($own):" || true)"
# Names with a dot or an underscore (run.json, _SUCCESS, .lock) in any literal; the folders
# (markers, failures: also plain words) as a path component or joined into a path.
mapfile -t skeleton_files < <(printf '%s\n' "${skeleton[@]}" | grep -E '[._]')
mapfile -t skeleton_dirs < <(printf '%s\n' "${skeleton[@]}" | grep -vE '[._]')
skeleton_file_re=$(quote "${skeleton_files[@]}")
skeleton_dir_re=$(quote "${skeleton_dirs[@]}")
add "a skeleton file of a stage directory spelled by hand (ask the layout: stage_file)" \
  "$( (production "\"([^\"]*/)?($skeleton_file_re)\"";
       production "(\"($skeleton_dir_re)/|/($skeleton_dir_re)(/[^\"]*)?\"|(/|,) *\"($skeleton_dir_re)\"|\"($skeleton_dir_re)\" */)") |
     grep -vE '^common/stage/' || true)"
if [[ -n "$problems" ]]; then
  echo "exchanged files opened or named outside common/store and common/vector:"
  printf '%s' "$problems"
  exit 1
fi
echo "names_test: no exchanged file opened or named outside common/store and common/vector" \
  "(${#names[@]} names, ${#files[@]} files, ${#folders[@]} folders, ${#skeleton[@]} skeleton names" \
  "checked)"
