#include "benchmarks/synthetic_run.h"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

namespace tessera::bench {

namespace fs = std::filesystem;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double synthetic_uniform(uint64_t seed, int64_t slide, uint64_t draw) {
  const uint64_t h = splitmix64(splitmix64(seed ^ splitmix64(static_cast<uint64_t>(slide))) + draw);
  return (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53;
}

patchgen::Manifest synthetic_manifest(int slides, const std::string& dir) {
  patchgen::Manifest m;
  m.path = (fs::path(dir) / "synthetic-manifest.csv").string();  // never written or read
  m.metadata_columns = {"site"};
  for (int k = 0; k < slides; ++k) {
    patchgen::SlideEntry e;
    e.index = k;
    e.slide_id = fmt::format("slide-{:05d}", k);
    e.path = (fs::path(dir) / "synthetic-slides" / (e.slide_id + ".svs")).string();
    e.path_as_written = e.path;
    e.patient_id = fmt::format("patient-{:05d}", k / 2);
    e.metadata = {fmt::format("site-{:02d}", k % 37)};
    m.slides.push_back(std::move(e));
  }
  return m;
}

patchgen::SlidePlan synthetic_plan(uint64_t seed, int k, int64_t count) {
  const auto cols = static_cast<int64_t>(std::ceil(std::sqrt(count * 4.0 / 3.0)));
  const int64_t rows = (count + cols - 1) / cols;
  patchgen::SlidePlan p;
  p.index = k;
  p.ok = true;
  p.width = (cols + 1) * kSyntheticFootprint;
  p.height = (rows + 1) * kSyntheticFootprint;
  p.mpp_x = p.mpp_y = kSyntheticSlideMpp;
  p.mpp_source = "synthetic";
  p.vendor = "synthetic";
  p.level.level = 0;
  p.level.level_downsample = 1;
  p.level.level_mpp = kSyntheticSlideMpp;
  p.level.read_size = static_cast<int>(kSyntheticFootprint);
  p.level.resample = true;
  p.level.footprint = static_cast<double>(kSyntheticFootprint);
  p.patch_count = count;
  p.tissue_pixels = count * 196;  // 14 x 14 detection pixels per footprint at downsample 32
  p.patches.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const float tissue = static_cast<float>(0.25 + 0.75 * synthetic_uniform(seed, k, 2 + i));
    p.patches[i] = {(i % cols) * kSyntheticFootprint, (i / cols) * kSyntheticFootprint, tissue};
  }
  return p;
}

}  // namespace tessera::bench
