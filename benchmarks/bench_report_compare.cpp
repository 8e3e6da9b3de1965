// Comparing two reports of a driver (bench_report.h): the ratio of medians of each measured
// field, or why the two cannot be compared, and its text.
#include <algorithm>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "benchmarks/bench_report.h"

namespace tessera::bench {

namespace {

using Json = nlohmann::json;
using Pointer = nlohmann::json::json_pointer;

// `report` at `at`, or null when absent.
Json at_or_null(const Json& report, const Pointer& at) {
  return report.is_object() && report.contains(at) ? report[at] : Json();
}

void differ_if(const Json& before, const Json& after, const std::string& field, Json& out) {
  if (before != after) out.push_back({{"field", field}, {"before", before}, {"after", after}});
}

bool is_hash_key(const std::string& key) {
  return key.find("sha256") != std::string::npos || key.find("xxh3") != std::string::npos ||
         key.find("hash") != std::string::npos;
}

// Paths (JSON pointers) below `at` of fields whose key names a hash.
void hash_fields(const Json& value, const Pointer& at, std::set<std::string>* out) {
  if (!value.is_object()) return;
  for (const auto& [key, child] : value.items()) {
    if (is_hash_key(key)) {
      out->insert((at / key).to_string());
    } else {
      hash_fields(child, at / key, out);
    }
  }
}

// The metric of every mode in every repetition: mode -> values.
std::map<std::string, std::vector<double>> measured_values(const Json& report,
                                                           const Json& measured) {
  std::map<std::string, std::vector<double>> out;
  const Json reps = at_or_null(report, Pointer("/repetitions"));
  if (!reps.is_array() || !measured.is_object()) return out;
  const std::string metric = measured.value("metric", "");
  Pointer modes_at;
  try {
    modes_at = Pointer(measured.value("modes", ""));
  } catch (const Json::exception&) {
    return out;
  }
  for (const Json& rep : reps) {
    const Json modes = at_or_null(rep, modes_at);
    if (!modes.is_object()) continue;
    for (const auto& [mode, value] : modes.items()) {
      if (value.is_object() && value.contains(metric) && value[metric].is_number()) {
        out[mode].push_back(value[metric].get<double>());
      }
    }
  }
  return out;
}

std::string number(const Json& v) {
  return v.is_number() ? fmt::format("{:.4g}", v.get<double>()) : std::string("null");
}

}  // namespace

nlohmann::json compare_reports(const nlohmann::json& before, const nlohmann::json& after,
                               const std::vector<std::string>& allowed) {
  for (const std::string& field : allowed) {
    if (field.rfind("/parameters/", 0) != 0 || field.size() == 12) {
      throw std::invalid_argument("only parameters may differ in a comparison: '" + field +
                                  "' is not /parameters/NAME");
    }
  }
  Json differences = Json::array();
  differ_if(at_or_null(before, Pointer("/benchmark")), at_or_null(after, Pointer("/benchmark")),
            "/benchmark", differences);
  const Json params_before = at_or_null(before, Pointer("/parameters"));
  const Json params_after = at_or_null(after, Pointer("/parameters"));
  if (!params_before.is_object() || !params_after.is_object()) {
    differ_if(params_before, params_after, "/parameters", differences);
  } else {
    std::set<std::string> keys;
    for (const auto& item : params_before.items()) keys.insert(item.key());
    for (const auto& item : params_after.items()) keys.insert(item.key());
    for (const std::string& key : keys) {
      const Pointer at = Pointer("/parameters") / key;
      differ_if(at_or_null(before, at), at_or_null(after, at), at.to_string(), differences);
    }
  }
  for (const char* field : {"/machine/cpu_model", "/machine/arch", "/machine/logical_cores",
                            "/gpu/gpus"}) {
    const Pointer at(field);
    differ_if(at_or_null(before, at), at_or_null(after, at), field, differences);
  }
  std::set<std::string> version_keys;
  for (const Json* report : {&before, &after}) {
    const Json v = at_or_null(*report, Pointer("/versions"));
    if (v.is_object()) {
      for (const auto& item : v.items()) version_keys.insert(item.key());
    }
  }
  version_keys.erase("git_revision");
  for (const std::string& key : version_keys) {
    const Pointer at = Pointer("/versions") / key;
    differ_if(at_or_null(before, at), at_or_null(after, at), at.to_string(), differences);
  }
  std::set<std::string> hashes;
  hash_fields(at_or_null(before, Pointer("/output")), Pointer("/output"), &hashes);
  hash_fields(at_or_null(after, Pointer("/output")), Pointer("/output"), &hashes);
  for (const std::string& field : hashes) {
    const Pointer at(field);
    differ_if(at_or_null(before, at), at_or_null(after, at), field, differences);
  }
  const Json measured_before = at_or_null(before, Pointer("/measured"));
  const Json measured = at_or_null(after, Pointer("/measured"));
  differ_if(measured_before, measured, "/measured", differences);

  Json result = {{"cache_policy",
                  {{"before", at_or_null(before, Pointer("/cache_policy"))},
                   {"after", at_or_null(after, Pointer("/cache_policy"))}}}};
  Json allowed_differences = Json::array(), refusing = Json::array();
  for (const Json& d : differences) {
    const bool ok = std::find(allowed.begin(), allowed.end(), d["field"].get<std::string>()) !=
                    allowed.end();
    (ok ? allowed_differences : refusing).push_back(d);
  }
  differences = refusing;
  if (!allowed_differences.empty()) result["allowed_differences"] = allowed_differences;
  if (!differences.empty()) {
    std::string fields;
    for (const Json& d : differences) {
      fields += (fields.empty() ? "" : ", ") + d["field"].get<std::string>();
    }
    result["refused"] = fmt::format(
        "not the same experiment: {} differ{} (a speed-up is reported only between runs with "
        "equal parameters, environment and outputs)",
        fields, differences.size() == 1 ? "s" : "");
    result["differences"] = differences;
    return result;
  }
  const auto values_before = measured_values(before, measured);
  const auto values_after = measured_values(after, measured);
  Json modes = Json::object();
  for (const auto& [mode, values] : values_after) {
    const auto it = values_before.find(mode);
    if (it == values_before.end()) continue;
    const Json b = summarize(it->second), a = summarize(values);
    const double median_before = b["median"].get<double>();
    modes[mode] = {{"ratio_of_medians", median_before != 0
                                            ? Json(a["median"].get<double>() / median_before)
                                            : Json()},
                   {"before", b},
                   {"after", a}};
  }
  if (modes.empty()) {
    result["refused"] = "no mode measured in both reports (see their \"measured\" fields)";
    result["differences"] = Json::array();
    return result;
  }
  result["refused"] = nullptr;
  result["metric"] = measured.value("metric", "");
  result["higher_is_better"] = measured.value("higher_is_better", true);
  result["modes"] = modes;
  return result;
}

std::string format_comparison(const nlohmann::json& comparison) {
  std::ostringstream out;
  const Json refused = at_or_null(comparison, Pointer("/refused"));
  if (!refused.is_null()) {
    out << "comparison refused: " << (refused.is_string() ? refused.get<std::string>() : "?")
        << "\n";
    const Json differences = at_or_null(comparison, Pointer("/differences"));
    if (differences.is_array()) {
      for (const Json& d : differences) {
        out << "  " << d.value("field", "") << ": before " << d["before"].dump() << ", after "
            << d["after"].dump() << "\n";
      }
    }
    return out.str();
  }
  const Json allowed = at_or_null(comparison, Pointer("/allowed_differences"));
  if (allowed.is_array()) {
    for (const Json& d : allowed) {
      out << "  allowed to differ: " << d.value("field", "") << ": before " << d["before"].dump()
          << ", after " << d["after"].dump() << "\n";
    }
  }
  const bool higher = comparison.value("higher_is_better", true);
  out << "after / before, ratio of medians of " << comparison.value("metric", "") << " ("
      << (higher ? "higher" : "lower") << " is better)\n";
  const auto side = [](const Json& s) {
    return fmt::format("median {} [{}, {}] sd {} n {}", number(s["median"]), number(s["min"]),
                       number(s["max"]), number(s["stddev"]), s["n"].dump());
  };
  for (const auto& [mode, m] : comparison.at("modes").items()) {
    out << fmt::format("  {}: ratio {} (after {}; before {})\n", mode,
                       number(m["ratio_of_medians"]), side(m["after"]), side(m["before"]));
  }
  return out.str();
}

}  // namespace tessera::bench
