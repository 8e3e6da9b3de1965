#include "tests/synthslide/tissue_classes.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/core/error.h"
#include "common/slide/png_io.h"
#include "tests/synthslide/cohort.h"
#include "tests/synthslide/synthslide.h"
#include "tests/synthslide/tile_renderer.h"

namespace tessera::synth {
namespace {

namespace fs = std::filesystem;

TEST(TissueClasses, NamesRoundTrip) {
  for (int c = 1; c <= kTissueClasses; ++c) {
    EXPECT_EQ(tissue_class_from_name(tissue_class_name(c)), c);
  }
  EXPECT_EQ(tissue_class_from_name("Tumour"), 0);
  EXPECT_EQ(tissue_class_from_name("background"), 0);
}

TEST(TissueClasses, ParsesRegionLists) {
  EXPECT_EQ(parse_region_classes("tumour:2,fat"), (std::vector<int>{1, 1, 3}));
  EXPECT_EQ(parse_region_classes("necrosis:1,stroma:3"), (std::vector<int>{4, 2, 2, 2}));
  EXPECT_THROW(parse_region_classes("tumor"), InvalidInput);
  EXPECT_THROW(parse_region_classes("tumour:0"), InvalidInput);
  EXPECT_THROW(parse_region_classes("tumour:x"), InvalidInput);
  EXPECT_THROW(parse_region_classes("tumour:2x"), InvalidInput);
  EXPECT_THROW(parse_region_classes(""), InvalidInput);
  EXPECT_THROW(parse_region_classes("fat:64,fat:64,fat:64,fat:64,fat:64"), InvalidInput);
}

// Mean colour, and shares of dark (nuclear) and white (vacuole) pixels, per class.
struct ClassStats {
  double n = 0, r = 0, g = 0, b = 0, dark = 0, white = 0;
};

TEST(TissueClasses, ClassesDifferInHueDensityAndVacuoles) {
  const int64_t w = 2048, h = 2048;
  const TissueLayout layout(w, h, 32, 1.0, 7);
  const ClassMap classes(layout, {1, 2, 3, 4, 1, 2, 3, 4}, 7);
  const TileRenderer renderer(layout, w, h, 7, &classes, {0, 0, 0});
  std::array<ClassStats, kTissueClasses + 1> stats{};
  std::vector<uint8_t> tile(256 * 256 * 3);
  for (int64_t ty = 0; ty < h; ty += 256) {
    for (int64_t tx = 0; tx < w; tx += 256) {
      renderer.render(0, w, h, tx, ty, 256, tile.data());
      for (int y = 0; y < 256; ++y) {
        for (int x = 0; x < 256; ++x) {
          if (!layout.pixel_is_tissue(tx + x, ty + y)) continue;
          const uint8_t* px = &tile[(static_cast<size_t>(y) * 256 + x) * 3];
          ClassStats& s = stats[classes.class_at(tx + x, ty + y)];
          s.n += 1;
          s.r += px[0];
          s.g += px[1];
          s.b += px[2];
          const int sum = px[0] + px[1] + px[2];
          s.dark += sum < 360;
          s.white += sum > 720;
        }
      }
    }
  }
  EXPECT_EQ(stats[0].n, 0);
  for (int c = 1; c <= kTissueClasses; ++c) {
    ASSERT_GT(stats[c].n, 10000) << tissue_class_name(c);
    ClassStats& s = stats[c];
    s.r /= s.n, s.g /= s.n, s.b /= s.n, s.dark /= s.n, s.white /= s.n;
  }
  // Nuclear density: tumour is crowded with nuclei, stroma sparse, fat nearly none.
  EXPECT_GT(stats[1].dark, 0.15);
  EXPECT_GT(stats[1].dark, 3 * stats[2].dark);
  EXPECT_LT(stats[3].dark, 0.02);
  // Vacuoles: only fat has white, a third of its area or more.
  EXPECT_GT(stats[3].white, 0.3);
  for (const int c : {1, 2, 4}) EXPECT_LT(stats[c].white, 0.05) << tissue_class_name(c);
  // Hue: every pair of classes differs in mean colour.
  for (int a = 1; a <= kTissueClasses; ++a) {
    for (int b = a + 1; b <= kTissueClasses; ++b) {
      const double d = std::hypot(stats[a].r - stats[b].r, stats[a].g - stats[b].g,
                                  stats[a].b - stats[b].b);
      EXPECT_GT(d, 15) << tissue_class_name(a) << " vs " << tissue_class_name(b);
    }
  }
}

TEST(TissueClasses, ClassMaskMatchesTissueMaskAndFractions) {
  const fs::path dir = fs::path(::testing::TempDir()) / "tissue_classes_mask";
  fs::create_directories(dir);
  SlideSpec spec;
  spec.path = (dir / "s.tif").string();
  spec.width = 3000;
  spec.height = 2000;
  spec.seed = 3;
  spec.mask_path = (dir / "s.mask.png").string();
  spec.class_mask_path = (dir / "s.classes.png").string();
  spec.region_classes = {2, 2, 2, 4};
  const SlideSummary summary = write_slide(spec);
  const Image8 tissue = read_png(spec.mask_path);
  const Image8 labels = read_png(spec.class_mask_path);
  ASSERT_EQ(tissue.pixels.size(), labels.pixels.size());
  std::map<int, int> counts;
  for (size_t i = 0; i < tissue.pixels.size(); ++i) {
    EXPECT_EQ(tissue.pixels[i] != 0, labels.pixels[i] != 0) << i;
    ++counts[labels.pixels[i]];
  }
  EXPECT_EQ(counts.count(1), 0u);
  EXPECT_EQ(counts.count(3), 0u);
  EXPECT_GT(counts[2], 0);
  EXPECT_GT(counts[4], 0);
  const double tissue_cells = counts[2] + counts[4];
  EXPECT_NEAR(summary.class_fractions[1], counts[2] / tissue_cells, 1e-12);
  EXPECT_NEAR(summary.class_fractions[3], counts[4] / tissue_cells, 1e-12);

  SlideSpec bad = spec;
  bad.region_classes = {5};
  EXPECT_THROW(write_slide(bad), InvalidInput);
  bad.region_classes.clear();
  EXPECT_THROW(write_slide(bad), InvalidInput);  // a class mask without classes
}

TEST(Cohort, PlanIsBalancedDeterministicAndDominatedByTheDiagnosis) {
  CohortSpec spec;
  spec.dir = "unused";
  spec.slides = 20;
  spec.patients = 8;
  spec.seed = 5;
  const auto a = plan_cohort(spec);
  const auto b = plan_cohort(spec);
  ASSERT_EQ(a.size(), 20u);
  std::map<std::string, std::set<int>> diagnoses_of_patient;
  std::map<int, int> patients_per_diagnosis;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].slide_id, b[i].slide_id);
    EXPECT_EQ(a[i].region_classes, b[i].region_classes);
    EXPECT_EQ(a[i].seed, b[i].seed);
    diagnoses_of_patient[a[i].patient_id].insert(a[i].diagnosis);
    int dominant = 0;
    for (const int c : a[i].region_classes) dominant += c == a[i].diagnosis;
    EXPECT_EQ(dominant, spec.dominant);
    EXPECT_EQ(a[i].region_classes.size(), static_cast<size_t>(spec.regions));
  }
  EXPECT_EQ(diagnoses_of_patient.size(), 8u);  // every patient has a slide
  for (const auto& [patient, diagnoses] : diagnoses_of_patient) {
    EXPECT_EQ(diagnoses.size(), 1u) << patient;
    ++patients_per_diagnosis[*diagnoses.begin()];
  }
  for (int c = 1; c <= kTissueClasses; ++c) EXPECT_EQ(patients_per_diagnosis[c], 2) << c;

  spec.slides = 4;
  EXPECT_THROW(plan_cohort(spec), InvalidInput);  // fewer slides than patients
  spec.slides = 20;
  spec.dominant = 7;
  EXPECT_THROW(plan_cohort(spec), InvalidInput);
}

TEST(Cohort, WritesSlidesManifestAndTruth) {
  CohortSpec spec;
  spec.dir = (fs::path(::testing::TempDir()) / "cohort_small").string();
  spec.slides = 3;
  spec.patients = 2;
  spec.width = 1200;
  spec.height = 900;
  spec.threads = 2;
  const auto slides = write_cohort(spec);
  std::ifstream manifest(fs::path(spec.dir) / "manifest.csv");
  std::stringstream text;
  text << manifest.rdbuf();
  std::string expected = "slide_id,path,patient_id,diagnosis\n";
  for (const auto& s : slides) {
    expected += s.slide_id + "," + s.path + "," + s.patient_id + "," +
                tissue_class_name(s.diagnosis) + "\n";
    EXPECT_TRUE(fs::is_regular_file(fs::path(spec.dir) / s.path));
    const Image8 labels = read_png((fs::path(spec.dir) / s.class_mask).string());
    EXPECT_EQ(labels.width, 38);  // ceil(1200 / 32)
  }
  EXPECT_EQ(text.str(), expected);
  EXPECT_TRUE(fs::is_regular_file(fs::path(spec.dir) / "truth.csv"));
}

}  // namespace
}  // namespace tessera::synth
