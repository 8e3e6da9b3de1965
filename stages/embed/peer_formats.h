// The layouts of embed's outputs that CLAM (mahmoodlab/CLAM) and TRIDENT (mahmoodlab/TRIDENT) read
// as their own: what each peer's attributes say about a slide, derived from the patch index, the
// per-slide patch (coordinate) files, the TRIDENT encoder names of our presets, and the per-slide
// status table. Torch-free; the CLAM .pt tensors are written by common/store/pt_tensor.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/store/index.h"
#include "common/store/slide_features.h"

namespace tessera::embed {

// Which peer layouts embed writes besides features/ (--peer-layouts).
struct PeerLayouts {
  bool clam = true;     // clam/pt_files, clam/h5_files, clam/patches
  bool trident = true;  // features_<encoder>/, patches/<slide_id>_patches.h5

  // "clam,trident" (any order, each at most once), "clam", "trident" or "none". Throws
  // InvalidInput naming --peer-layouts otherwise.
  static PeerLayouts parse(const std::string& text);
  // Canonical form: "clam,trident", "clam", "trident" or "none".
  std::string to_string() const;
};

// TRIDENT's patch-encoder name for the model a preset describes, or "" when TRIDENT has no encoder
// of the same weights and output (uni -> uni_v1, uni2-h -> uni_v2, conch -> conch_v1,
// prov-gigapath -> gigapath, virchow2 -> virchow2, h-optimus-0 -> hoptimus0, h-optimus-1 ->
// hoptimus1, phikon-v2 -> phikon_v2). Thread-safe.
std::string trident_encoder_alias(const std::string& preset_name);

// The encoder name embed writes (folder features_<name>/, attribute `encoder`): the TRIDENT alias
// of the preset for a TorchScript model (the exported weights), otherwise the tag (built-in
// models carry seeded random weights, not the named model's).
std::string trident_encoder_name(const nlohmann::json& model_fingerprint, const std::string& tag);

// What a slide's rows are to the peers.
enum class SlideOutcome {
  kPatches,    // patches embedded: features of [n, D]
  kEmpty,      // opened, but no tissue or no patch reaching --min-tissue: (0, D) files
  kFailed,     // patchgen could not make patches of it: no files
  kOtherPart   // not in this part
};
SlideOutcome slide_outcome(const SlideTable& slides, size_t s);
std::string outcome_name(SlideOutcome outcome);  // "ok", "empty", "failed", "other_part"

// Everything the peers' attributes say about one slide, derived from the index.
struct SlideGeometry {
  std::string name;              // slide_id
  int64_t patch_size = 0;        // S: pixels per side at the target resolution (TRIDENT)
  int64_t patch_level = 0;       // pyramid level read (CLAM)
  int64_t read_size = 0;         // pixels per side read at patch_level (CLAM's patch_size)
  int64_t patch_size_level0 = 0; // round(S x downsample): level-0 pixels per side
  double downsample = 0;         // level-0 pixels per stored pixel
  double level0_magnification = 0;  // 10 / mpp_x (0 when the mpp is unknown)
  double target_magnification = 0;  // 10 / target mpp
  int64_t overlap = 0;           // target pixels shared by neighbours: max(0, S - stride)
  int64_t level0_width = 0, level0_height = 0;
};

// For a slide of the part that is not kFailed. An empty slide has no level of its own: it is
// described as read at level 0 with its level-0 footprint (downsample = target mpp / mpp_x).
SlideGeometry slide_geometry(const IndexInfo& info, size_t s, int64_t overlap);

// Attribute names written on a TRIDENT `coords` dataset (features and patch files).
std::vector<std::string> trident_coords_attribute_names();

// TRIDENT's coords attributes of a slide (below; store's set_coords_attributes writes them).
CoordsAttributes trident_coords(const SlideGeometry& g);

// Writes `path` (via path.tmp, renamed when complete) holding /coords int64 [n, 2] (`xy` holds
// 2n values) with TRIDENT's coords attributes: patch_size (S), patch_size_level0,
// level0_magnification, target_magnification, overlap, level0_width, level0_height, name.
// Throws IoError naming the file.
void write_trident_patch_file(const std::string& path, const std::vector<int64_t>& xy,
                              const SlideGeometry& g);

// Writes `path` (via path.tmp) holding /coords int64 [n, 2] with CLAM's coords attributes:
// patch_size = read_size (pixels read at patch_level), patch_level, downsample (level-0 pixels per
// pixel read, a scalar where CLAM stores the level's (x, y) pair), name. CLAM reads read_region(coord, patch_level, (patch_size, patch_size)).
void write_clam_patch_file(const std::string& path, const std::vector<int64_t>& xy,
                           const SlideGeometry& g);

// Makes `link` name the same file as `target` (a hard link, made under link.tmp and renamed over
// any previous `link`, so it survives a moved run directory); copies where the file system refuses
// hard links. Throws IoError naming both paths.
void link_or_copy(const std::string& target, const std::string& link);

// The status table slides.csv: header `slide_id,status,patches,reason`, one row per slide of the
// part in manifest order; status as outcome_name; reason quoted per RFC 4180 where needed.
std::string status_table_csv(const SlideTable& slides);

}  // namespace tessera::embed
