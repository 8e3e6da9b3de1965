#include "common/core/options.h"
#include "common/stage/stage_options.h"

#include <cstdlib>

#include "common/core/error.h"
#include "common/core/fs.h"

namespace tessera {

namespace {

int env_int(const std::map<std::string, std::string>& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end()) fail<InvalidInput>("a Slurm job array sets SLURM_ARRAY_TASK_ID but not {}", name);
  try {
    size_t used = 0;
    const int value = std::stoi(it->second, &used);
    if (used == it->second.size()) return value;
  } catch (const std::exception&) {
  }
  fail<InvalidInput>("{}='{}' is not an integer", name, it->second);
}

}  // namespace

const char* to_string(VerifyLevel level) { return level == VerifyLevel::kFull ? "full" : "cheap"; }

void add_stage_options(po::options_description& desc) {
  po::options_description stage("Cohort parts and reruns");
  stage.add_options()
      ("part", po::value<int>(),
       "this part of the cohort, 0..parts-1 (slide j belongs to part j mod parts); default: "
       "from SLURM_ARRAY_TASK_ID, else 0")
      ("parts", po::value<int>(),
       "number of parts the cohort is split into; default: the Slurm array's size, else 1")
      ("verify", po::value<std::string>()->default_value("cheap"),
       "how inputs and outputs that markers call complete are checked: cheap (sizes and an XXH3 "
       "of each file's first and last 64 KiB) or full (an XXH3 of every byte)")
      ("file-locking", value_with_default<bool>(true),
       "lock the stage directory (false only for file systems mounted without locking)")
      ("overwrite", po::bool_switch(), "replace existing outputs made with another configuration");
  desc.add(stage);
}

StageOptions stage_options_from(const po::variables_map& values,
                                const std::map<std::string, std::string>& env) {
  StageOptions o;
  if (env.count("SLURM_ARRAY_TASK_ID")) {
    const int id = env_int(env, "SLURM_ARRAY_TASK_ID");
    const int min = env_int(env, "SLURM_ARRAY_TASK_MIN");
    const int max = env_int(env, "SLURM_ARRAY_TASK_MAX");
    const int count = env_int(env, "SLURM_ARRAY_TASK_COUNT");
    if (max - min + 1 != count) {
      fail<InvalidInput>("the Slurm job array {}-{} has {} tasks: parts must be consecutive "
                         "(use --array={}-{} without a step, or give --part and --parts)",
                         min, max, count, min, min + count - 1);
    }
    if (count == 1 && min != 0 && !(values.count("part") && values.count("parts"))) {
      // --array=2 resubmitting one part of a larger array cannot tell how many parts there are.
      fail<InvalidInput>("a one-task Slurm array (task {}) does not say which part of how many it "
                         "is: give --part and --parts",
                         id);
    }
    o.part = id - min;
    o.parts = count;
  }
  if (values.count("part")) o.part = values["part"].as<int>();
  if (values.count("parts")) o.parts = values["parts"].as<int>();
  if (o.parts < 1) fail<InvalidInput>("--parts {} must be >= 1", o.parts);
  if (o.part < 0 || o.part >= o.parts) {
    fail<InvalidInput>("--part {} must be in 0..{} (--parts {})", o.part, o.parts - 1, o.parts);
  }
  const std::string verify = values["verify"].as<std::string>();
  if (verify == "cheap") {
    o.verify = VerifyLevel::kCheap;
  } else if (verify == "full") {
    o.verify = VerifyLevel::kFull;
  } else {
    fail<InvalidInput>("--verify '{}' must be cheap or full", verify);
  }
  o.file_locking = values["file-locking"].as<bool>();
  o.overwrite = values["overwrite"].as<bool>();
  return o;
}

std::map<std::string, std::string> slurm_array_environment() {
  std::map<std::string, std::string> env;
  for (const char* name : {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX",
                           "SLURM_ARRAY_TASK_COUNT"}) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
  return env;
}

void require_folder_name(const char* option, const std::string& value) {
  if (!is_safe_slide_id(value)) {
    fail<InvalidInput>("invalid --{}: '{}' is not a safe folder name (A-Z a-z 0-9 . _ -, no "
                       "leading dot)", option, value);
  }
  if (value.size() > kMaxNameLength) {
    fail<InvalidInput>("invalid --{}: '{}' is {} characters long; at most {} fit in the file names "
                       "the stages make of it", option, value, value.size(), kMaxNameLength);
  }
}

}  // namespace tessera
