// What embed_bench's report adds of its own (main.cpp): efficiencies against model-only, the GPU
// and the environment that changes how libtorch runs.
#pragma once

#include <nlohmann/json.hpp>

namespace tessera::embed::driver {

// Efficiencies of cached, store and wsi against model-only from `modes` (mode -> metrics):
// by throughput, rate(mode) / rate(model-only), the definition the target applies to; and by CPU
// time, cpu(model-only) / cpu(mode) for the same tiles, which a machine shared with other jobs
// disturbs far less than wall-clock rates (on an otherwise idle machine whose cores the model
// saturates, the two agree).
nlohmann::json efficiencies(const nlohmann::json& modes, const nlohmann::json::json_pointer& rate,
                            const nlohmann::json::json_pointer& cpu);
// The NVIDIA driver and GPU models from /proc/driver/nvidia (null where not readable).
nlohmann::json gpu_info();
// The environment variables that change how libtorch and OpenMP run (null when unset).
nlohmann::json environment();

}  // namespace tessera::embed::driver
