// Numerics of reduced precision: embeds the same generated patches with each built-in model in
// fp32 and in bf16/fp16 under both precision modes (autocast, cast), and reports how far the
// reduced-precision embeddings are from fp32 (max and mean absolute difference, cosine similarity
// per image) and the time per image after one untimed warm-up batch. One process, no MPI; a JSON
// report.
//
//   precision_bench --models vit-tiny,vit-s16 --images 16 --out precision.json
//
// Precisions the device cannot run (fp16 on a CPU) are reported with the reason, not measured.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "benchmarks/bench_report.h"
#include "common/core/cpu.h"
#include "common/core/error.h"
#include "common/core/options.h"
#include "common/core/version.h"
#include "stages/embed/model.h"

namespace tessera::bench {
namespace {

// Smooth, tissue-like RGB patches: low-frequency colour fields plus a little deterministic noise.
std::vector<uint8_t> make_images(int n, int side, uint64_t seed) {
  std::vector<uint8_t> rgb(static_cast<size_t>(n) * side * side * 3);
  uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  const auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) / static_cast<double>(1ull << 53);
  };
  size_t k = 0;
  for (int i = 0; i < n; ++i) {
    const double fx = 2 + 6 * next(), fy = 2 + 6 * next(), phase = 6.283 * next();
    for (int y = 0; y < side; ++y) {
      for (int x = 0; x < side; ++x) {
        const double u = static_cast<double>(x) / side, v = static_cast<double>(y) / side;
        const double wave = std::sin(fx * u * 6.283 + phase) * std::cos(fy * v * 6.283);
        const double base[3] = {200 - 60 * wave, 150 + 50 * wave, 190 - 30 * wave};
        for (double b : base) {
          rgb[k++] = static_cast<uint8_t>(std::clamp(b + 24 * (next() - 0.5), 0.0, 255.0));
        }
      }
    }
  }
  return rgb;
}

std::vector<float> embed_all(const embed::Model& model, const std::vector<uint8_t>& rgb, int n,
                             int side, int batch, double* seconds) {
  std::vector<float> out(static_cast<size_t>(n) * model.output_dim());
  const size_t image_bytes = static_cast<size_t>(side) * side * 3;
  // Warm-up, untimed: the first pass allocates and initialises the kernels' thread pools.
  model.forward(model.prepare(rgb.data(), std::min(batch, n), side), out.data());
  Stopwatch watch;
  for (int start = 0; start < n; start += batch) {
    const int count = std::min(batch, n - start);
    model.forward(model.prepare(rgb.data() + start * image_bytes, count, side),
                  out.data() + static_cast<size_t>(start) * model.output_dim());
  }
  *seconds = watch.seconds();
  return out;
}

// Differences of `test` from `reference`, both [n, d] row-major.
nlohmann::json compare(const std::vector<float>& reference, const std::vector<float>& test, int n,
                       int d) {
  double max_abs = 0, sum_abs = 0, sum_ref_abs = 0, min_cos = 1, sum_cos = 0;
  bool finite = true;
  for (int i = 0; i < n; ++i) {
    double dot = 0, na = 0, nb = 0;
    for (int j = 0; j < d; ++j) {
      const double a = reference[static_cast<size_t>(i) * d + j];
      const double b = test[static_cast<size_t>(i) * d + j];
      finite = finite && std::isfinite(b);
      max_abs = std::max(max_abs, std::abs(a - b));
      sum_abs += std::abs(a - b);
      sum_ref_abs += std::abs(a);
      dot += a * b;
      na += a * a;
      nb += b * b;
    }
    const double cos = dot / std::sqrt(std::max(1e-300, na * nb));
    min_cos = std::min(min_cos, cos);
    sum_cos += cos;
  }
  const double values = static_cast<double>(n) * d;
  return {{"max_abs_diff", max_abs},
          {"mean_abs_diff", sum_abs / values},
          {"mean_abs_fp32", sum_ref_abs / values},
          {"cosine_mean", sum_cos / n},
          {"cosine_min", min_cos},
          {"all_finite", finite}};
}

int run(int argc, char** argv) {
  po::options_description desc("precision_bench options");
  desc.add_options()("help", "this help")
      ("models", po::value<std::string>()->default_value("vit-tiny,vit-s16"),
       "comma-separated built-in models")
      ("precisions", po::value<std::string>()->default_value("bf16,fp16"),
       "reduced precisions compared with fp32")
      ("images", po::value<int>()->default_value(16), "generated patches per model")
      ("batch-size", po::value<int>()->default_value(8), "patches per forward pass")
      ("seed", po::value<uint64_t>()->default_value(0), "weight seed of the built-ins")
      ("device", po::value<std::string>()->default_value("cpu"), "cpu, cuda or auto")
      ("torch-threads", po::value<int>()->default_value(0), "libtorch threads (0: all cores)")
      ("out", po::value<std::string>()->default_value("precision_bench.json"), "JSON report");
  po::variables_map v;
  po::store(po::parse_command_line(argc, argv, desc), v);
  if (v.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  po::notify(v);
  const int n = v["images"].as<int>();
  const int batch = v["batch-size"].as<int>();
  if (n < 1 || batch < 1) throw InvalidInput("--images and --batch-size must be >= 1");
  const auto split = [](const std::string& text) {
    std::vector<std::string> items;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');) {
      if (!item.empty()) items.push_back(item);
    }
    return items;
  };

  nlohmann::json results = nlohmann::json::array();
  for (const auto& name : split(v["models"].as<std::string>())) {
    embed::ModelSpec spec;
    spec.model = name;
    spec.seed = v["seed"].as<uint64_t>();
    spec.device = v["device"].as<std::string>();
    spec.torch_threads = v["torch-threads"].as<int>();
    const embed::Model fp32_model = embed::Model::load(spec);
    const int side = fp32_model.input_size(), d = fp32_model.output_dim();
    const auto rgb = make_images(n, side, 42);
    double fp32_s = 0;
    const auto fp32 = embed_all(fp32_model, rgb, n, side, batch, &fp32_s);
    nlohmann::json entry = {{"model", name},
                            {"output_dim", d},
                            {"images", n},
                            {"device", fp32_model.fingerprint()["device"]},
                            {"fp32_s_per_image", fp32_s / n},
                            {"runs", nlohmann::json::array()}};
    std::cerr << name << " fp32: " << fp32_s / n << " s/image\n";
    for (const auto& precision : split(v["precisions"].as<std::string>())) {
      for (const std::string mode : {"autocast", "cast"}) {
        embed::ModelSpec reduced = spec;
        reduced.precision = precision;
        reduced.precision_mode = mode;
        nlohmann::json run = {{"precision", precision}, {"precision_mode", mode}};
        try {
          const embed::Model model = embed::Model::load(reduced);
          double seconds = 0;
          const auto out = embed_all(model, rgb, n, side, batch, &seconds);
          run["s_per_image"] = seconds / n;
          run["vs_fp32"] = compare(fp32, out, n, d);
          std::cerr << name << " " << precision << " " << mode << ": " << run["vs_fp32"].dump()
                    << "\n";
        } catch (const InvalidInput& e) {
          run["unavailable"] = e.what();
          std::cerr << name << " " << precision << " " << mode << ": unavailable\n";
        }
        entry["runs"].push_back(run);
      }
    }
    entry["libtorch"] = fp32_model.fingerprint()["libtorch"];
    results.push_back(entry);
  }
  const nlohmann::json report = {{"benchmark", "precision_bench"},
                                 {"git_revision", git_revision()},
                                 {"command_line", command_line(argc, argv)},
                                 {"machine", machine_info()},
                                 {"load_average_after", load_average()},
                                 {"batch_size", batch},
                                 {"results", results}};
  write_report(v["out"].as<std::string>(), report);
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  tessera::keep_freed_memory();  // as the embed executable
  try {
    return tessera::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "precision_bench: " << e.what() << "\n";
    return 2;
  }
}
