#include "common/core/options.h"

#include <fstream>
#include <sstream>

#include "common/core/error.h"

namespace tessera {

namespace {

const std::set<std::string> kCommonOptions = {"help", "config", "log-level"};

template <typename T>
bool try_render(const boost::any& any, std::string& out) {
  if (const T* v = boost::any_cast<T>(&any)) {
    if constexpr (std::is_same_v<T, std::string>) {
      out = *v;
    } else if constexpr (std::is_same_v<T, bool>) {
      out = *v ? "true" : "false";
    } else if constexpr (std::is_floating_point_v<T>) {
      out = fmt::format("{}", *v);  // shortest representation that round-trips
    } else {
      out = std::to_string(*v);
    }
    return true;
  }
  return false;
}

}  // namespace

void add_common_options(po::options_description& desc) {
  desc.add_options()
      ("help,h", po::bool_switch(), "show every option with its default and exit")
      ("config", po::value<std::string>(), "INI file with `option = value` lines; the command line wins")
      ("log-level", po::value<std::string>()->default_value("info"),
       "trace, debug, info, warn, error, critical or off");
}

ParsedOptions parse_options(const po::options_description& desc,
                            const std::vector<std::string>& args) {
  ParsedOptions parsed;
  try {
    po::store(po::command_line_parser(args).options(desc).run(), parsed.values);
  } catch (const po::error& e) {
    fail<InvalidInput>("{} (see --help)", e.what());
  }
  if (parsed.values.count("help") && parsed.values["help"].as<bool>()) {
    parsed.help = true;
    return parsed;
  }
  if (parsed.values.count("config")) {
    const auto path = parsed.values["config"].as<std::string>();
    std::ifstream in(path);
    if (!in) fail<InvalidInput>("cannot read config file '{}'", path);
    try {
      po::store(po::parse_config_file(in, desc, /*allow_unregistered=*/false), parsed.values);
    } catch (const po::error& e) {
      fail<InvalidInput>("config file '{}': {}", path, e.what());
    }
  }
  try {
    po::notify(parsed.values);
  } catch (const po::error& e) {
    fail<InvalidInput>("{} (see --help)", e.what());
  }
  return parsed;
}

std::string help_text(const std::string& usage, const po::options_description& desc) {
  std::ostringstream out;
  out << "Usage: " << usage << "\n\n" << desc << "\n";
  return out.str();
}

std::string option_value_text(const po::variable_value& value) {
  std::string out;
  const boost::any& any = value.value();
  if (try_render<std::string>(any, out) || try_render<bool>(any, out) ||
      try_render<int>(any, out) || try_render<long>(any, out) ||
      try_render<long long>(any, out) || try_render<unsigned>(any, out) ||
      try_render<unsigned long>(any, out) || try_render<unsigned long long>(any, out) ||
      try_render<double>(any, out) || try_render<float>(any, out)) {
    return out;
  }
  fail("option value of unsupported type {}", any.type().name());
}

std::string effective_config(const po::variables_map& values, const std::set<std::string>& exclude) {
  std::ostringstream out;
  for (const auto& [key, value] : values) {  // std::map: sorted by key
    if (value.empty() || kCommonOptions.count(key) || exclude.count(key)) continue;
    out << key << " = " << option_value_text(value) << "\n";
  }
  return out.str();
}

}  // namespace tessera
