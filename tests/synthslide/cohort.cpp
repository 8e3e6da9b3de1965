#include "tests/synthslide/cohort.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "common/core/csv.h"
#include "common/core/error.h"
#include "tests/synthslide/hash.h"
#include "tests/synthslide/synthslide.h"
#include "tests/synthslide/tissue_classes.h"

namespace tessera::synth {
namespace {

namespace fs = std::filesystem;

void validate(const CohortSpec& s) {
  if (s.dir.empty()) fail<InvalidInput>("invalid cohort: output directory is empty");
  if (s.patients < 1 || s.patients > 100000) {
    fail<InvalidInput>("invalid cohort: patients {} outside 1..100000", s.patients);
  }
  if (s.slides < s.patients || s.slides > 1000000) {
    fail<InvalidInput>("invalid cohort: slides {} must be at least the patients ({}) and at most "
                       "1000000",
                       s.slides, s.patients);
  }
  if (s.regions < 1 || s.regions > 64) {
    fail<InvalidInput>("invalid cohort: regions {} outside 1..64", s.regions);
  }
  if (s.dominant < 1 || s.dominant > s.regions) {
    fail<InvalidInput>("invalid cohort: dominant regions {} outside 1..{}", s.dominant, s.regions);
  }
  if (s.stain_jitter < 0 || s.stain_jitter > 64) {
    fail<InvalidInput>("invalid cohort: stain jitter {} outside 0..64", s.stain_jitter);
  }
  if (s.threads < 1) fail<InvalidInput>("invalid cohort: threads {} < 1", s.threads);
}

void write_text(const fs::path& path, const std::string& text) {
  const fs::path temp = path.string() + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) fail<IoError>("cannot write '{}'", temp.string());
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) fail<IoError>("cannot rename '{}' to '{}': {}", temp.string(), path.string(), ec.message());
}

}  // namespace

std::vector<CohortSlide> plan_cohort(const CohortSpec& spec) {
  validate(spec);
  const uint64_t key = salted(spec.seed, 0xc0'4047);
  std::vector<std::array<int, 3>> stains(static_cast<size_t>(spec.patients));
  for (int p = 0; p < spec.patients; ++p) {
    for (int c = 0; c < 3; ++c) {
      const uint64_t h = hash2(key ^ 0x57a1, p, c);
      stains[p][c] = static_cast<int>(h % (2 * spec.stain_jitter + 1)) - spec.stain_jitter;
    }
  }
  std::vector<CohortSlide> slides;
  for (int s = 0; s < spec.slides; ++s) {
    CohortSlide slide;
    const int patient =
        s < spec.patients ? s : static_cast<int>(hash2(key ^ 0x9a71, s, 0) % spec.patients);
    slide.slide_id = fmt::format("S{:04d}", s + 1);
    slide.patient_id = fmt::format("P{:03d}", patient + 1);
    slide.diagnosis = 1 + static_cast<int>((patient + spec.seed) % kTissueClasses);
    slide.region_classes.assign(static_cast<size_t>(spec.dominant), slide.diagnosis);
    for (int r = spec.dominant; r < spec.regions; ++r) {
      const int other = 1 + static_cast<int>(hash2(key ^ 0x0c1a, s, r) % (kTissueClasses - 1));
      slide.region_classes.push_back(other >= slide.diagnosis ? other + 1 : other);
    }
    slide.stain = stains[patient];
    slide.seed = mix64(key ^ static_cast<uint64_t>(s));
    slide.path = "slides/" + slide.slide_id + ".tif";
    slide.class_mask = "slides/" + slide.slide_id + ".classes.png";
    slides.push_back(std::move(slide));
  }
  return slides;
}

std::vector<CohortSlide> write_cohort(const CohortSpec& spec) {
  const std::vector<CohortSlide> slides = plan_cohort(spec);
  const fs::path dir(spec.dir);
  std::error_code ec;
  fs::create_directories(dir / "slides", ec);
  if (ec) fail<IoError>("cannot create '{}': {}", (dir / "slides").string(), ec.message());

  std::vector<std::array<double, 4>> fractions(slides.size());
  std::atomic<size_t> next{0};
  std::mutex error_mutex;
  std::string error;
  int error_code = 0;
  const auto worker = [&] {
    for (size_t i = next++; i < slides.size(); i = next++) {
      const CohortSlide& c = slides[i];
      SlideSpec s;
      s.path = (dir / c.path).string();
      s.width = spec.width;
      s.height = spec.height;
      s.seed = c.seed;
      s.mpp = spec.mpp;
      s.mask_downsample = spec.mask_downsample;
      s.tissue_fraction = spec.tissue_fraction;
      s.region_classes = c.region_classes;
      s.stain_offset = c.stain;
      s.class_mask_path = (dir / c.class_mask).string();
      try {
        fractions[i] = write_slide(s).class_fractions;
      } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (error.empty()) {
          error = e.what();
          error_code = e.exit_code();
        }
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  const int n = std::min<int>(spec.threads, static_cast<int>(slides.size()));
  for (int t = 0; t < n; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (!error.empty()) {
    if (error_code == kExitBadInput) throw InvalidInput(error);
    throw IoError(error);
  }

  std::string manifest = csv_record({"slide_id", "path", "patient_id", "diagnosis"});
  std::string truth = csv_record({"slide_id", "patient_id", "diagnosis", "class_mask",
                                  "mask_downsample", "tumour", "stroma", "fat", "necrosis"});
  for (size_t i = 0; i < slides.size(); ++i) {
    const CohortSlide& c = slides[i];
    const std::string diagnosis = tissue_class_name(c.diagnosis);
    manifest += csv_record({c.slide_id, c.path, c.patient_id, diagnosis});
    std::vector<std::string> row = {c.slide_id, c.patient_id, diagnosis, c.class_mask,
                                    std::to_string(spec.mask_downsample)};
    for (const double f : fractions[i]) row.push_back(fmt::format("{:.4f}", f));
    truth += csv_record(row);
  }
  write_text(dir / "manifest.csv", manifest);
  write_text(dir / "truth.csv", truth);
  return slides;
}

}  // namespace tessera::synth
