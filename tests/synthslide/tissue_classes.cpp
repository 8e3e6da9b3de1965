#include "tests/synthslide/tissue_classes.h"

#include <algorithm>
#include <limits>

#include "common/core/error.h"
#include "tests/synthslide/hash.h"
#include "tests/synthslide/pixel.h"

namespace tessera::synth {
namespace {

constexpr std::array<const char*, kTissueClasses + 1> kNames = {"background", "tumour", "stroma",
                                                                "fat", "necrosis"};
constexpr int kMaxRegions = 256;
constexpr uint64_t kSaltSeeds = 0xc1a5'0000;

inline void put(uint8_t* px, const Rgb& c, int lum, const std::array<int, 3>& stain) {
  px[0] = clamp_byte(c.r + lum + stain[0]);
  px[1] = clamp_byte(c.g + lum + stain[1]);
  px[2] = clamp_byte(c.b + lum + stain[2]);
}

inline Rgb mix(const Rgb& light, const Rgb& dark, int t) {
  return {light.r + (((dark.r - light.r) * t) >> 8), light.g + (((dark.g - light.g) * t) >> 8),
          light.b + (((dark.b - light.b) * t) >> 8)};
}

// An elliptic blob in a square cell of `cell` level-0 pixels, present with probability
// `presence`: semi-axes rx in [rx_min, rx_min + rx_range), ry likewise (or equal to rx when
// `round`); the whole ellipse lies inside the cell. True when (x, y) falls inside it.
struct BlobShape {
  int cell;
  double presence;
  int rx_min, rx_range, ry_min, ry_range;
  bool round;
};

bool in_blob(const BlobShape& s, uint64_t key, int64_t x, int64_t y, int* shade) {
  const int64_t cx = x / s.cell;
  const int64_t cy = y / s.cell;
  const uint64_t h = hash2(key, cx, cy);
  if (unit_double(h) >= s.presence) return false;
  const int rx = s.rx_min + static_cast<int>((h >> 8) % s.rx_range);
  const int ry = s.round ? rx : s.ry_min + static_cast<int>((h >> 14) % s.ry_range);
  const bool swap = s.round ? false : ((h >> 60) & 1) != 0;  // spindles lie either way
  const int ax = swap ? ry : rx;
  const int ay = swap ? rx : ry;
  const int ox = ax + static_cast<int>((h >> 20) % std::max(1, s.cell - 2 * ax));
  const int oy = ay + static_cast<int>((h >> 36) % std::max(1, s.cell - 2 * ay));
  const int64_t dx = x - cx * s.cell - ox;
  const int64_t dy = y - cy * s.cell - oy;
  const int64_t ax2 = int64_t{ax} * ax;
  const int64_t ay2 = int64_t{ay} * ay;
  if (dx * dx * ay2 + dy * dy * ax2 > ax2 * ay2) return false;
  *shade = static_cast<int>((h >> 52) % 31) - 15;
  return true;
}

constexpr BlobShape kTumourNucleus = {12, 0.85, 3, 2, 3, 2, true};
constexpr BlobShape kStromaNucleus = {40, 0.22, 9, 5, 2, 2, false};
constexpr BlobShape kFatVacuole = {48, 0.97, 15, 4, 15, 4, true};
constexpr BlobShape kFatNucleus = {112, 0.08, 3, 2, 2, 1, false};
constexpr BlobShape kDebris = {9, 0.45, 1, 2, 1, 2, true};

constexpr Rgb kTumourLight = {170, 120, 192};
constexpr Rgb kTumourDark = {140, 88, 172};
constexpr Rgb kTumourNucleusRgb = {50, 30, 112};
constexpr Rgb kStromaClassLight = {246, 176, 204};
constexpr Rgb kStromaClassDark = {222, 100, 150};
constexpr Rgb kStromaNucleusRgb = {112, 58, 140};
constexpr Rgb kFatWhite = {247, 245, 246};
constexpr Rgb kFatMembrane = {234, 124, 116};
constexpr Rgb kNecrosisLight = {198, 178, 132};
constexpr Rgb kNecrosisDark = {168, 144, 104};
constexpr Rgb kDebrisRgb = {82, 60, 52};

}  // namespace

const char* tissue_class_name(int tissue_class) {
  return tissue_class >= 0 && tissue_class <= kTissueClasses ? kNames[tissue_class] : "unknown";
}

int tissue_class_from_name(const std::string& name) {
  for (int c = 1; c <= kTissueClasses; ++c) {
    if (name == kNames[c]) return c;
  }
  return 0;
}

std::vector<int> parse_region_classes(const std::string& text) {
  std::vector<int> regions;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const size_t colon = item.find(':');
    const std::string name = item.substr(0, colon);
    const int tissue_class = tissue_class_from_name(name);
    if (tissue_class == 0) {
      fail<InvalidInput>("invalid tissue classes '{}': unknown class '{}' (tumour, stroma, fat, "
                         "necrosis)",
                         text, name);
    }
    int count = 1;
    if (colon != std::string::npos) {
      try {
        size_t used = 0;
        count = std::stoi(item.substr(colon + 1), &used);
        if (used != item.size() - colon - 1) count = 0;
      } catch (const std::exception&) {
        count = 0;
      }
      if (count < 1 || count > 64) {
        fail<InvalidInput>("invalid tissue classes '{}': region count of '{}' is not in 1..64",
                           text, item);
      }
    }
    regions.insert(regions.end(), static_cast<size_t>(count), tissue_class);
    if (regions.size() > kMaxRegions) {
      fail<InvalidInput>("invalid tissue classes '{}': more than {} regions", text, kMaxRegions);
    }
    start = comma + 1;
  }
  return regions;
}

ClassMap::ClassMap(const TissueLayout& layout, const std::vector<int>& region_classes,
                   uint64_t seed)
    : layout_(layout),
      classes_(static_cast<size_t>(layout.grid_width() * layout.grid_height()), 0) {
  std::vector<int64_t> tissue;
  for (int64_t j = 0; j < layout.grid_height(); ++j) {
    for (int64_t i = 0; i < layout.grid_width(); ++i) {
      if (layout.cell_is_tissue(i, j)) tissue.push_back(j * layout.grid_width() + i);
    }
  }
  if (tissue.empty() || region_classes.empty()) return;
  const uint64_t key = salted(seed, kSaltSeeds);
  std::vector<std::pair<int64_t, int64_t>> seeds;
  for (size_t k = 0; k < region_classes.size(); ++k) {
    const int64_t cell = tissue[mix64(key ^ k) % tissue.size()];
    seeds.emplace_back(cell % layout.grid_width(), cell / layout.grid_width());
  }
  for (int64_t j = 0; j < layout.grid_height(); ++j) {
    for (int64_t i = 0; i < layout.grid_width(); ++i) {
      int64_t best = std::numeric_limits<int64_t>::max();
      int best_class = 0;
      for (size_t k = 0; k < seeds.size(); ++k) {
        const int64_t dx = i - seeds[k].first;
        const int64_t dy = j - seeds[k].second;
        if (dx * dx + dy * dy < best) {
          best = dx * dx + dy * dy;
          best_class = region_classes[k];
        }
      }
      classes_[static_cast<size_t>(j * layout.grid_width() + i)] =
          static_cast<uint8_t>(best_class);
    }
  }
}

Image8 ClassMap::mask() const {
  Image8 image{static_cast<int>(layout_.grid_width()), static_cast<int>(layout_.grid_height()), 1,
               std::vector<uint8_t>(classes_.size(), 0)};
  for (int64_t j = 0; j < layout_.grid_height(); ++j) {
    for (int64_t i = 0; i < layout_.grid_width(); ++i) {
      const size_t c = static_cast<size_t>(j * layout_.grid_width() + i);
      if (layout_.cell_is_tissue(i, j)) image.pixels[c] = classes_[c];
    }
  }
  return image;
}

std::array<double, kTissueClasses> ClassMap::fractions() const {
  std::array<double, kTissueClasses> counts{};
  double total = 0;
  const Image8 m = mask();
  for (const uint8_t c : m.pixels) {
    if (c == 0) continue;
    counts[c - 1] += 1;
    total += 1;
  }
  if (total > 0) {
    for (double& v : counts) v /= total;
  }
  return counts;
}

void shade_class(int tissue_class, int64_t x, int64_t y, int lum, int texture, uint64_t key,
                 const std::array<int, 3>& stain, uint8_t* px) {
  int shade = 0;
  switch (tissue_class) {
    case 1:
      if (in_blob(kTumourNucleus, key ^ 0x1, x, y, &shade)) {
        put(px, kTumourNucleusRgb, lum + shade, stain);
      } else {
        put(px, mix(kTumourLight, kTumourDark, texture), lum, stain);
      }
      return;
    case 2:
      if (in_blob(kStromaNucleus, key ^ 0x2, x, y, &shade)) {
        put(px, kStromaNucleusRgb, lum + shade, stain);
      } else {
        put(px, mix(kStromaClassLight, kStromaClassDark, texture), lum, stain);
      }
      return;
    case 3:
      if (in_blob(kFatNucleus, key ^ 0x3, x, y, &shade)) {
        put(px, kStromaNucleusRgb, lum + shade, stain);
      } else if (in_blob(kFatVacuole, key ^ 0x4, x, y, &shade)) {
        put(px, kFatWhite, lum / 2, stain);
      } else {
        put(px, kFatMembrane, lum, stain);
      }
      return;
    default: {
      if (in_blob(kDebris, key ^ 0x5, x, y, &shade)) {
        put(px, kDebrisRgb, lum + shade, stain);
        return;
      }
      // Granular: the texture broken into 3 x 3 px grains of random darkness.
      const int grain = static_cast<int>(hash2(key ^ 0x6, x / 3, y / 3) & 0x7f);
      put(px, mix(kNecrosisLight, kNecrosisDark, (texture + grain * 2) / 2), lum, stain);
      return;
    }
  }
}

}  // namespace tessera::synth
