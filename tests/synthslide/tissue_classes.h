// Tissue classes of a labelled synthetic slide: which class each part of the tissue is (a Voronoi
// partition of the tissue into regions, each of one class) and how each class looks. The classes
// differ in what any image feature sees: stain hue, nuclear density, nuclear size and shape, and
// texture.
//
//   1 tumour    dense, small, round, dark blue-purple nuclei on purple cytoplasm
//   2 stroma    sparse spindle-shaped nuclei on fibrous, strongly eosinophilic pink
//   3 fat       large white vacuoles separated by thin salmon-pink membranes, almost no nuclei
//   4 necrosis  dull yellow-brown granular debris with scattered tiny dark fragments
// The hues are far apart on purpose (necrosis is browner than real necrotic debris): the built-in
// models have random weights, and what such a model sees most reliably is the hue of a patch.
//
// Class 0 is background. The class of a level-0 point is the class of the layout cell holding it,
// so the class mask (one pixel per layout cell) is the exact ground truth of every pixel.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/slide/png_io.h"
#include "tests/synthslide/tissue_layout.h"

namespace tessera::synth {

inline constexpr int kTissueClasses = 4;

// "tumour", "stroma", "fat", "necrosis" for 1..4; "background" for 0.
const char* tissue_class_name(int tissue_class);

// The class named `name` (as above, case-sensitive), or 0 when there is none.
int tissue_class_from_name(const std::string& name);

// Parses "tumour:4,stroma:1,necrosis:1" (class name, optionally ":count" regions, default 1) into
// the list of region classes, one entry per region in the order given. Throws InvalidInput naming
// the text for an unknown class, a count outside 1..64 or more than 256 regions in all.
std::vector<int> parse_region_classes(const std::string& text);

class ClassMap {
 public:
  // Places one region seed per entry of `region_classes` (values 1..kTissueClasses) on a tissue
  // cell of `layout` chosen from `seed`, and gives every cell the class of its nearest seed
  // (Euclidean, in cells; ties to the lower seed). A layout without tissue gets class 0
  // everywhere. `layout` must outlive the map. Deterministic; 1 byte per cell.
  ClassMap(const TissueLayout& layout, const std::vector<int>& region_classes, uint64_t seed);

  // Class of the cell holding level-0 point (x, y) (x, y inside the slide): the class the
  // renderer draws there when the point is tissue.
  int class_at(int64_t x, int64_t y) const {
    const int ds = layout_.downsample();
    return classes_[static_cast<size_t>((y / ds) * layout_.grid_width() + x / ds)];
  }

  // The ground truth: one pixel per cell, the class id (1..4) of tissue cells, 0 elsewhere.
  Image8 mask() const;

  // Share of tissue cells of each class 1..4 (all zero without tissue).
  std::array<double, kTissueClasses> fractions() const;

 private:
  const TissueLayout& layout_;
  std::vector<uint8_t> classes_;  // per cell, for tissue and background cells alike
};

// How the renderer shades class tissue: colour of the level-0 point (x, y) of class
// `tissue_class` (1..4) into px[0..2]. `lum` is the pixel's luminance noise (-6..6), `texture` a
// fibrous texture value (0..255) at the point, `stain` an RGB offset added to every colour (a
// patient's or site's stain variation). Deterministic in `key`; thread-safe.
void shade_class(int tissue_class, int64_t x, int64_t y, int lum, int texture, uint64_t key,
                 const std::array<int, 3>& stain, uint8_t* px);

}  // namespace tessera::synth
