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

void add_verify_option(OptionTable& table, const char* group, VerifyLevel level,
                       const char* help) {
  table.group(group)
      ("verify", OptionKind::kRunControl, po::value<std::string>()->default_value(to_string(level)),
       help ? help
            : "how inputs and outputs that markers call complete are checked: cheap (sizes and an "
              "XXH3 of each file's first and last 64 KiB) or full (an XXH3 of every byte)");
}

VerifyLevel verify_from(const po::variables_map& values) {
  const std::string verify = values["verify"].as<std::string>();
  if (verify == "cheap") return VerifyLevel::kCheap;
  if (verify == "full") return VerifyLevel::kFull;
  fail<InvalidInput>("invalid --verify: '{}', expected cheap or full", verify);
}

void add_rerun_options(OptionTable& table, const char* overwrite_help) {
  add_verify_option(table, "Rerun control", VerifyLevel::kCheap);
  table.group("Rerun control")
      ("file-locking", OptionKind::kRunControl, value_with_default<bool>(true),
       "lock the stage directory (false only for file systems mounted without locking)")
      ("overwrite", OptionKind::kRunControl, po::bool_switch(), overwrite_help);
}

void add_part_options(OptionTable& table) {
  table.group("Cohort parts")
      ("part", OptionKind::kResult, po::value<int>(),
       "this part of the cohort, 0..parts-1 (slide j belongs to part j mod parts); default: "
       "from SLURM_ARRAY_TASK_ID, else 0")
      ("parts", OptionKind::kResult, po::value<int>(),
       "number of parts the cohort is split into; default: the Slurm array's size, else 1");
}

StageOptions rerun_options_from(const po::variables_map& values) {
  StageOptions o;
  o.verify = verify_from(values);
  o.file_locking = values["file-locking"].as<bool>();
  o.overwrite = values["overwrite"].as<bool>();
  return o;
}

void stage_option_values(const StageOptions& options, bool parts,
                         std::map<std::string, std::string>& values) {
  values["verify"] = to_string(options.verify);
  values["file-locking"] = ini_value(options.file_locking);
  values["overwrite"] = ini_value(false);
  if (parts) {
    values["part"] = ini_value(options.part);
    values["parts"] = ini_value(options.parts);
  }
}

StageOptions stage_options_from(const po::variables_map& values,
                                const std::map<std::string, std::string>& env) {
  StageOptions o = rerun_options_from(values);
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
