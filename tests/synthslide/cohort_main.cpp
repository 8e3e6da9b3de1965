// synthcohort: writes a labelled synthetic cohort (slides, class masks, manifest, ground truth).
#include <boost/program_options.hpp>
#include <spdlog/spdlog.h>

#include <iostream>

#include "common/core/error.h"
#include "common/core/options.h"
#include "tests/synthslide/cohort.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  tessera::synth::CohortSpec spec;
  po::options_description options(
      "synthcohort: write a labelled synthetic cohort (DIR/slides/, DIR/manifest.csv, "
      "DIR/truth.csv)");
  // clang-format off
  options.add_options()
      ("help", "print this help")
      ("version", "print the version and git revision")
      ("out", po::value(&spec.dir)->required(), "output directory")
      ("slides", po::value(&spec.slides)->default_value(spec.slides), "slides (>= patients)")
      ("patients", po::value(&spec.patients)->default_value(spec.patients), "patients")
      ("width", po::value(&spec.width)->default_value(spec.width), "level-0 width of each slide")
      ("height", po::value(&spec.height)->default_value(spec.height), "level-0 height")
      ("seed", po::value(&spec.seed)->default_value(spec.seed), "random seed")
      ("mpp", po::value(&spec.mpp)->default_value(spec.mpp), "microns per level-0 pixel")
      ("tissue-fraction",
       po::value(&spec.tissue_fraction)->default_value(spec.tissue_fraction, "0.6"),
       "approximate share of each slide covered by tissue")
      ("regions", po::value(&spec.regions)->default_value(spec.regions), "class regions per slide")
      ("dominant", po::value(&spec.dominant)->default_value(spec.dominant),
       "regions of the diagnosis class per slide")
      ("stain-jitter", po::value(&spec.stain_jitter)->default_value(spec.stain_jitter),
       "per-patient RGB stain offset bound")
      ("threads", po::value(&spec.threads)->default_value(spec.threads),
       "slides written concurrently");
  // clang-format on
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, options), vm);
    if (vm.count("help")) {
      std::cout << options << "\n";
      return tessera::kExitOk;
    }
    if (vm.count("version")) {
      std::cout << tessera::version_text("synthcohort");
      return tessera::kExitOk;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "synthcohort: " << e.what() << "\n" << options << "\n";
    return tessera::kExitBadInput;
  }
  try {
    const auto slides = tessera::synth::write_cohort(spec);
    spdlog::info("synthcohort: wrote {} slides of {} patients to '{}'", slides.size(),
                 spec.patients, spec.dir);
    return tessera::kExitOk;
  } catch (const tessera::Error& e) {
    std::cerr << "synthcohort: " << e.what() << "\n";
    return e.exit_code();
  }
}
