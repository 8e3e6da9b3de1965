// retrieval_bench: does search find like with like? The whole chain on a labelled synthetic cohort
// (tests/retrieval/retrieval_eval.h), per built-in model, and per search mode the figures the
// search-engine papers report: patch precision@10 by class; slide majority-vote top-1 and top-5
// accuracy and mAP@5 for slide-vector search and mosaic voting, leaving out the query's patient.
// The built-in models have random weights: the figures measure the machinery and how separable
// the synthetic classes are, not a model (docs/performance.md).
//
//   retrieval_bench --out bench-out/retrieval.json [--dir bench-out/retrieval] [--models ...]
//
// Repetition 1 runs the chain (patchgen, embed, ingest, aggregate, ingest --level slide) and the
// queries; later repetitions find the chain complete and rerun the queries only. The metrics are
// deterministic (the same in every repetition); timings are summarised over the repetitions.
#include <boost/program_options.hpp>

#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "benchmarks/bench_report.h"
#include "common/core/error.h"
#include "common/core/hash.h"
#include "common/core/version.h"
#include "common/stage/layout.h"
#include "common/store/embeddings.h"
#include "tests/retrieval/retrieval_eval.h"

namespace tessera::bench {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;

// The metrics of a mode without its timing (the same in every repetition: checked).
nlohmann::json metrics_of(nlohmann::json mode) {
  mode.erase("seconds");
  return mode;
}

std::string fixed2(const nlohmann::json& v) { return fmt::format("{:.2f}", v.get<double>()); }

// One row of docs/performance.md's table.
std::string table_row(const std::string& model, const nlohmann::json& modes, int k) {
  const auto& patch = modes.at("patch");
  std::vector<std::string> by_class;
  for (const char* c : {"tumour", "stroma", "fat", "necrosis"}) {
    const auto& b = patch.at("by_class");
    by_class.push_back(b.contains(c) ? fixed2(b.at(c).at("precision_at_10")) : "-");
  }
  std::string row = fmt::format("| {} | {} | {} |", model, fixed2(patch.at("precision_at_10")),
                                fmt::join(by_class, " / "));
  for (const char* mode : {"slide", "mosaic"}) {
    const auto& m = modes.at(mode);
    row += fmt::format(" {} | {} | {} |", fixed2(m.at("top1_accuracy")),
                       fixed2(m.at(fmt::format("top{}_majority_accuracy", k))),
                       fixed2(m.at(fmt::format("map_at_{}", k))));
  }
  return row + fmt::format(" {} | {} |", fixed2(patch.at("chance_precision_at_10")),
                           fixed2(modes.at("slide").at("chance_top1")));
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

int run(int argc, char** argv) {
  retrieval::ChainSpec spec;
  po::options_description desc("retrieval_bench: retrieval figures of a labelled synthetic cohort");
  // clang-format off
  desc.add_options()
      ("help", "print this help")
      ("out", po::value<std::string>()->required(), "JSON report")
      ("dir", po::value<std::string>()->default_value("bench-out/retrieval"),
       "work directory (cohort, runs); reused by later invocations")
      ("models", po::value<std::string>()->default_value("vit-tiny,vit-s16,resnet50-trunc"),
       "built-in models")
      ("slides", po::value(&spec.cohort.slides)->default_value(24), "slides")
      ("patients", po::value(&spec.cohort.patients)->default_value(16), "patients")
      ("width", po::value(&spec.cohort.width)->default_value(2000), "slide width")
      ("height", po::value(&spec.cohort.height)->default_value(1500), "slide height")
      ("seed", po::value(&spec.cohort.seed)->default_value(7), "cohort seed")
      ("ranks", po::value(&spec.ranks)->default_value(2), "MPI ranks of each stage")
      ("patch-queries", po::value(&spec.patch_queries_per_class)->default_value(25),
       "patch queries per class")
      ("repetitions", po::value<int>()->default_value(2), "repetitions (the first runs the chain)")
      ("mpirun", po::value<std::string>()->default_value("mpirun --oversubscribe --bind-to none"),
       "mpirun and its flags")
      ("build", po::value<std::string>()->default_value("build"), "tessera build directory");
  // clang-format on
  po::variables_map v;
  po::store(po::parse_command_line(argc, argv, desc), v);
  if (v.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  po::notify(v);
  const fs::path build = fs::absolute(v["build"].as<std::string>());
  retrieval::Executables exes;
  exes.mpirun = v["mpirun"].as<std::string>();
  exes.patchgen = (build / "stages/patchgen/patchgen").string();
  exes.embed = (build / "stages/embed/embed").string();
  exes.aggregate = (build / "stages/aggregate/aggregate").string();
  exes.ingest = (build / "stages/ingest/ingest").string();
  exes.query = (build / "stages/query/query").string();
  spec.cohort.threads = 2;
  spec.dir = fs::absolute(v["dir"].as<std::string>()).string();
  const int repetitions = v["repetitions"].as<int>();
  if (repetitions < 1) fail<InvalidInput>("invalid --repetitions: must be >= 1");

  nlohmann::json models = nlohmann::json::object();
  nlohmann::json repetition_list = nlohmann::json::array();
  nlohmann::json output = nlohmann::json::object();
  bool metrics_identical = true;
  for (int r = 0; r < repetitions; ++r) {
    nlohmann::json rep = {{"repetition", r}, {"modes", nlohmann::json::object()}};
    for (const auto& model : split(v["models"].as<std::string>())) {
      spec.model = model;
      const nlohmann::json result = retrieval::evaluate(spec, exes);
      std::cerr << "retrieval_bench " << model << " repetition " << r << ": "
                << result.at("modes").dump() << "\n";
      for (const auto& [mode, m] : result.at("modes").items()) {
        rep["modes"][model + "/" + mode] = m;
      }
      rep["chain_s"][model] = result.at("chain");
      for (const auto& [mode, m] : result.at("modes").items()) {
        if (r > 0 && metrics_of(m) != metrics_of(models.at(model).at("modes").at(mode))) {
          metrics_identical = false;
        }
      }
      if (r == 0) {
        models[model] = result;
        const RunLayout layout(spec.dir + "/run");
        output[model] = {
            {"slides_h5_sha256",
             sha256_file(retrieval::slide_cohort_file(layout.run(), "mean-" + model))},
            {"embeddings_sha256_of_first_slide",
             sha256_file(slide_features_path(layout.stage_root(kEmbedStage, model), "S0001"))}};
      }
    }
    repetition_list.push_back(rep);
  }
  const nlohmann::json report = {
      {"benchmark", "retrieval_bench"},
      {"parameters",
       {{"models", v["models"].as<std::string>()},
        {"slides", spec.cohort.slides},
        {"patients", spec.cohort.patients},
        {"width", spec.cohort.width},
        {"height", spec.cohort.height},
        {"seed", spec.cohort.seed},
        {"ranks", spec.ranks},
        {"patch_queries_per_class", spec.patch_queries_per_class},
        {"k", spec.k},
        {"pooling", "mean"},
        {"metric", "ip on unit vectors (--normalize)"},
        {"mosaic", "5% of a slide's patches, at least 8"}}},
      {"note", "built-in models have random weights: the figures measure the machinery and the "
               "separability of the synthetic tissue classes, not a pathology model"},
      {"git_revision", git_revision()},
      {"command_line", command_line(argc, argv)},
      {"machine", machine_info()},
      {"versions", versions()},
      {"measured", measured_field({"/modes", "seconds", false})},
      {"results", models},
      {"repetitions", repetition_list},
      {"summary", summarize_repetitions(repetition_list)},
      {"metrics_identical_across_repetitions", metrics_identical},
      {"output", output}};
  write_report(v["out"].as<std::string>(), report);
  std::cerr << "retrieval_bench: wrote " << v["out"].as<std::string>() << "\n";
  // The table of docs/performance.md.
  std::cout << "| model | patch P@10 | (tumour / stroma / fat / necrosis) | slide top-1 | slide "
               "top-5 maj. | slide mAP@5 | mosaic top-1 | mosaic top-5 maj. | mosaic mAP@5 | "
               "chance P@10 | chance top-1 |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& [model, result] : models.items()) {
    std::cout << table_row(model, result.at("modes"), spec.k) << "\n";
  }
  if (!metrics_identical) {
    std::cerr << "retrieval_bench: the metrics differ between repetitions\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  try {
    return tessera::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "retrieval_bench: " << e.what() << "\n";
    return 2;
  }
}
