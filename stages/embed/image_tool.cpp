#include "stages/embed/image_tool.h"

#include <boost/program_options.hpp>
#include <spdlog/spdlog.h>

#include "common/core/cpu.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/options.h"
#include "stages/embed/config.h"
#include "stages/embed/model.h"

namespace tessera::embed {

std::vector<float> embed_with_run_model(const std::string& embed_config,
                                        const nlohmann::json& expected, const std::string& device,
                                        int threads, const uint8_t* rgb, int count, int size) {
  // embed's config.ini, read back through embed's own options, describes the model it ran.
  po::options_description desc = option_table().description();
  add_common_options(desc);
  const po::variables_map values = parse_options(desc, {"--config", embed_config}).values;
  ModelSpec spec = model_spec(config_from(values), 0);
  // Runs made before config.ini recorded the mode cast the whole module.
  if (values["precision-mode"].defaulted()) spec.precision_mode = "cast";
  spec.device = device;
  if (spec.device == "cpu" && spec.precision == "fp16") {
    spdlog::warn("the embeddings were made in fp16, which libtorch cannot run on the CPU: the query "
                 "image is embedded in fp32 (use --device cuda for the same precision)");
    spec.precision = "fp32";
  }
  spec.torch_threads = thread_count(threads, "--threads");
  const nlohmann::json described = Model::describe(spec);
  for (const char* key : {"kind", "model", "seed", "sha256", "preset", "output_dim"}) {
    if (described.value(key, nlohmann::json()) != expected.value(key, nlohmann::json())) {
      fail<InvalidInput>("the model of '{}' ({}) no longer matches the one that made the index "
                         "({}): field '{}' differs",
                         embed_config, described.dump(), expected.dump(), key);
    }
  }
  const Model model = Model::load(spec);
  return model.embed(rgb, count, size);
}

int image_tool_main(const std::vector<std::string>& args, std::ostream& err) {
  po::options_description desc("embed-image options");
  desc.add_options()
      ("embed-config", po::value<std::string>()->required(), "embed's config.ini")
      ("model-json", po::value<std::string>()->required(), "the expected model record (JSON file)")
      ("patches", po::value<std::string>()->required(), "N x S x S x 3 RGB bytes")
      ("count", po::value<int>()->required(), "N")
      ("size", po::value<int>()->required(), "S")
      ("out", po::value<std::string>()->required(), "N x D float32 output")
      ("device", po::value<std::string>()->default_value("cpu"), "cpu or cuda[:i]")
      ("threads", po::value<int>()->default_value(0), "torch threads (0: the CPU affinity)");
  try {
    po::variables_map values;
    po::store(po::command_line_parser(args).options(desc).run(), values);
    po::notify(values);
    const int count = values["count"].as<int>();
    const int size = values["size"].as<int>();
    if (count < 1 || size < 1 || size > 8192) {
      fail<InvalidInput>("--count {} --size {}: need at least one patch of 1 to 8192 px", count,
                         size);
    }
    const std::string patches = read_file(values["patches"].as<std::string>());
    const size_t expected_bytes = static_cast<size_t>(count) * size * size * 3;
    if (patches.size() != expected_bytes) {
      fail<InvalidInput>("'{}' holds {} bytes, {} patches of {} px need {}",
                         values["patches"].as<std::string>(), patches.size(), count, size,
                         expected_bytes);
    }
    const nlohmann::json expected =
        nlohmann::json::parse(read_file(values["model-json"].as<std::string>()));
    const std::vector<float> vectors = embed_with_run_model(
        values["embed-config"].as<std::string>(), expected, values["device"].as<std::string>(),
        values["threads"].as<int>(), reinterpret_cast<const uint8_t*>(patches.data()), count,
        size);
    atomic_write_file(values["out"].as<std::string>(),
                      std::string_view(reinterpret_cast<const char*>(vectors.data()),
                                       vectors.size() * sizeof(float)));
    return kExitOk;
  } catch (const po::error& e) {
    err << "embed-image: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const Error& e) {
    err << "embed-image: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    err << "embed-image: " << e.what() << "\n";
    return kExitError;
  }
}

}  // namespace tessera::embed
