#include "benchmarks/embed/report.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace tessera::embed::driver {

namespace fs = std::filesystem;
using nlohmann::json;

json efficiencies(const json& modes, const json::json_pointer& rate,
                  const json::json_pointer& cpu) {
  const auto at = [&](const char* mode, const json::json_pointer& key) {
    return modes.at(mode).at(key).get<double>();
  };
  json by_rate, by_cpu;
  for (const char* mode : {"cached", "store", "wsi"}) {
    by_rate[mode] = at(mode, rate) / at("model-only", rate);
    by_cpu[mode] = at("model-only", cpu) / at(mode, cpu);
  }
  return {{"cached", by_rate["cached"]}, {"store", by_rate["store"]}, {"wsi", by_rate["wsi"]},
          {"by_cpu_time", by_cpu}};
}

json gpu_info() {
  json info = {{"driver", nullptr}, {"gpus", json::array()}};
  std::ifstream version("/proc/driver/nvidia/version");
  std::string line;
  if (std::getline(version, line)) info["driver"] = line;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    std::ifstream in(e.path() / "information");
    while (std::getline(in, line)) {
      if (line.rfind("Model:", 0) == 0) {
        info["gpus"].push_back(line.substr(line.find_first_not_of(" \t", 6)));
      }
    }
  }
  return info;
}

json environment() {
  json env;
  for (const char* name : {"OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND",
                           "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG"}) {
    const char* value = std::getenv(name);
    env[name] = value ? json(value) : json();
  }
  return env;
}

}  // namespace tessera::embed::driver
