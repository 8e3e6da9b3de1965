#include "benchmarks/patchgen/options.h"

#include <filesystem>
#include <sstream>

#include "benchmarks/bench_report.h"
#include "common/core/error.h"

namespace tessera::patchgen::driver {

namespace fs = std::filesystem;

po::options_description bench_options() {
  po::options_description desc("patchgen_bench options");
  desc.add_options()
      ("slide", po::value<std::string>()->default_value("bench-out/synth-40000x30000-seed1.tif"),
       "slide to read; generated with synthslide when missing")
      ("slide-width", po::value<int64_t>()->default_value(40000), "width of a generated slide")
      ("slide-height", po::value<int64_t>()->default_value(30000), "height of a generated slide")
      ("slide-seed", po::value<uint64_t>()->default_value(1), "seed of a generated slide")
      ("slide-mpp", po::value<double>()->default_value(0.5), "level-0 mpp of a generated slide")
      ("work", po::value<std::string>()->required(), "scratch folder for the manifest and runs")
      ("reps", po::value<int>()->default_value(3), "timed repetitions")
      ("warmup", po::value<int>()->default_value(1), "untimed warm-up repetitions (reported apart)")
      ("out", po::value<std::string>()->default_value(""),
       "JSON report (default WORK/patchgen_bench_npR.json)")
      ("cache", po::value<std::string>()->default_value(bench::kCacheWarm),
       "warm: the slide stays in the page cache between modes; drop: posix_fadvise(DONTNEED) on "
       "the slide before every mode, outside the timers (advice, not proof of a cold cache); "
       "fresh: as warm, since every mode opens the slide anew")
      ("compare", po::value<std::string>()->default_value(""),
       "an earlier report: print the ratio of medians per mode, or why they cannot be compared")
      ("modes", po::value<std::string>()->default_value(
                    "patchgen,patchgen_openslide,reference,decode_limit"),
       "comma-separated modes to measure, interleaved (a ratio and its target need both of its "
       "modes): patchgen, patchgen_openslide, reference (the bare OpenSlide loop), decode_limit, "
       "patchgen_dicom (added by --dicom)")
      ("dicom", po::value<std::string>()->default_value(""),
       "also measure patchgen_dicom on the slide's DICOM twin: jpeg-full, jpeg-sparse, j2k-full or "
       "j2k-sparse (written beside the slide, SLIDE.dicom-VARIANT/, when missing)");
  po::options_description stage;
  add_options(stage);
  desc.add(bench::passed_through("patchgen options (passed through)", stage, kSetByBench));
  return desc;
}

BenchOptions bench_options_from(const po::variables_map& v, int world_size) {
  BenchOptions o;
  o.slide = fs::absolute(v["slide"].as<std::string>()).string();
  o.width = v["slide-width"].as<int64_t>();
  o.height = v["slide-height"].as<int64_t>();
  o.seed = v["slide-seed"].as<uint64_t>();
  o.slide_mpp = v["slide-mpp"].as<double>();
  o.work = fs::absolute(v["work"].as<std::string>()).string();
  o.reps = v["reps"].as<int>();
  o.warmup = v["warmup"].as<int>();
  o.out = v["out"].as<std::string>();
  o.compare = v["compare"].as<std::string>();
  o.cache = v["cache"].as<std::string>();
  bench::check_cache_policy(o.cache);
  std::stringstream modes(v["modes"].as<std::string>());
  for (std::string mode; std::getline(modes, mode, ',');) {
    if (std::find(kModes.begin(), kModes.end(), mode) == kModes.end()) {
      fail<InvalidInput>("invalid --modes entry '{}': expected patchgen, patchgen_openslide, "
                         "reference, decode_limit or patchgen_dicom", mode);
    }
    if (std::find(o.modes.begin(), o.modes.end(), mode) == o.modes.end()) o.modes.push_back(mode);
  }
  o.dicom = v["dicom"].as<std::string>();
  if (!o.dicom.empty()) {
    if (o.dicom != "jpeg-full" && o.dicom != "jpeg-sparse" && o.dicom != "j2k-full" &&
        o.dicom != "j2k-sparse") {
      fail<InvalidInput>("invalid --dicom '{}': expected jpeg-full, jpeg-sparse, j2k-full or "
                         "j2k-sparse", o.dicom);
    }
    o.dicom_dir = o.slide + ".dicom-" + o.dicom;
    if (std::find(o.modes.begin(), o.modes.end(), "patchgen_dicom") == o.modes.end()) {
      o.modes.push_back("patchgen_dicom");
    }
  } else if (std::find(o.modes.begin(), o.modes.end(), "patchgen_dicom") != o.modes.end()) {
    fail<InvalidInput>("--modes patchgen_dicom needs --dicom VARIANT");
  }
  if (o.modes.empty()) fail<InvalidInput>("--modes names no mode");
  if (o.out.empty()) {
    const std::string name = "patchgen_bench_np" + std::to_string(world_size) + ".json";
    o.out = (fs::path(o.work) / name).string();
  }
  if (o.reps < 1) fail<InvalidInput>("invalid --reps {}: must be >= 1", o.reps);
  if (o.warmup < 0) fail<InvalidInput>("invalid --warmup {}: must be >= 0", o.warmup);
  return o;
}

Config patchgen_config(const po::variables_map& values, const std::string& manifest,
                       const std::string& out) {
  po::options_description stage;
  add_options(stage);
  // kSetByBench holds "out", which is also the report's option.
  po::variables_map v = bench::passed_through_values(values, stage, kSetByBench);
  v.emplace("manifest", po::variable_value(std::string(manifest), false));
  v.emplace("out", po::variable_value(std::string(out), false));
  v.emplace("overwrite", po::variable_value(true, false));
  v.emplace("fail-fast", po::variable_value(true, false));
  v.emplace("debug-kill-rank", po::variable_value(-1, false));
  v.emplace("debug-kill-after", po::variable_value(int64_t{-1}, false));
  return config_from(v);
}

}  // namespace tessera::patchgen::driver
