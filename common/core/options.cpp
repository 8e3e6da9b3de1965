#include "common/core/options.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include "common/core/error.h"
#include "common/core/version.h"

namespace tessera {

namespace {

bool flag(const po::variables_map& values, const char* name) {
  return values.count(name) && values[name].as<bool>();
}

// Whether `value` survives an INI line unchanged: boost's parser cuts at '#', trims blanks and
// reads one line.
bool fits_ini_line(const std::string& value) {
  if (value.find_first_of("#\r\n") != std::string::npos) return false;
  return value.empty() || (!std::isspace(static_cast<unsigned char>(value.front())) &&
                           !std::isspace(static_cast<unsigned char>(value.back())));
}

}  // namespace

OptionTable::GroupAdder& OptionTable::GroupAdder::operator()(const char* name, OptionKind kind,
                                                             const po::value_semantic* semantic,
                                                             const char* help) {
  // The description owns `semantic` from here on, also when record() throws.
  boost::shared_ptr<po::option_description> option(new po::option_description(name, semantic, help));
  table_->record(option->long_name(), kind);
  table_->groups_[group_].options->add(option);
  return *this;
}

OptionTable::GroupAdder OptionTable::group(const std::string& caption) {
  for (size_t i = 0; i < groups_.size(); ++i) {
    if (!groups_[i].foreign && groups_[i].caption == caption) return GroupAdder(*this, i);
  }
  groups_.push_back({caption, std::make_shared<po::options_description>(caption), false});
  return GroupAdder(*this, groups_.size() - 1);
}

void OptionTable::record(const std::string& name, OptionKind kind) {
  if (!kinds_.emplace(name, kind).second) fail("option --{} is added twice", name);
}

void OptionTable::add(const po::options_description& desc,
                      const std::map<std::string, OptionKind>& kinds) {
  for (const auto& option : desc.options()) {
    const auto it = kinds.find(option->long_name());
    if (it == kinds.end()) fail("option --{} is added without a kind", option->long_name());
    if (it->second == OptionKind::kDebug) {
      fail("debug option --{} must be added with OptionTable::group", option->long_name());
    }
  }
  if (kinds.size() != desc.options().size()) fail("kinds given for options not in the group");
  for (const auto& option : desc.options()) record(option->long_name(), kinds.at(option->long_name()));
  groups_.push_back({"", std::make_shared<po::options_description>(desc), true});
}

void OptionTable::add(const po::options_description& desc, OptionKind kind) {
  std::map<std::string, OptionKind> kinds;
  for (const auto& option : desc.options()) kinds[option->long_name()] = kind;
  add(desc, kinds);
}

OptionKind OptionTable::kind(const std::string& name) const {
  const auto it = kinds_.find(name);
  if (it == kinds_.end()) fail("option --{} is not in the option table", name);
  return it->second;
}

std::vector<std::string> OptionTable::names() const {
  std::vector<std::string> names;
  for (const auto& [name, kind] : kinds_) names.push_back(name);
  return names;
}

po::options_description OptionTable::description() const { return help_description(true); }

po::options_description OptionTable::help_description(bool all) const {
  po::options_description desc;
  for (const Group& group : groups_) {
    if (group.foreign || all) {
      desc.add(*group.options);
      continue;
    }
    po::options_description shown(group.caption);
    for (const auto& option : group.options->options()) {
      if (kind(option->long_name()) != OptionKind::kDebug) shown.add(option);
    }
    if (!shown.options().empty()) desc.add(shown);
  }
  return desc;
}

std::string OptionTable::ini(const std::map<std::string, std::string>& values,
                             bool result_only) const {
  std::string out;
  for (const auto& [name, value] : values) {  // std::map: sorted by key
    const OptionKind k = kind(name);
    if (k == OptionKind::kDebug || (result_only && k != OptionKind::kResult)) continue;
    if (!fits_ini_line(value)) {
      fail<InvalidInput>("--{} '{}' cannot be saved in config.ini: remove '#', line breaks and "
                         "blanks at either end", name, value);
    }
    out += fmt::format("{} = {}\n", name, value);
  }
  return out;
}

std::string OptionTable::config_ini(const std::map<std::string, std::string>& values) const {
  return ini(values, false);
}

std::string OptionTable::fingerprint_ini(const std::map<std::string, std::string>& values) const {
  return ini(values, true);
}

void add_common_options(po::options_description& desc) {
  desc.add_options()
      ("help,h", po::bool_switch(), "show the options with their defaults and exit")
      ("help-all", po::bool_switch(), "also show the fault-injection options for tests, and exit")
      ("version", po::bool_switch(), "print the version and git revision and exit")
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
  parsed.help = flag(parsed.values, "help");
  parsed.help_all = flag(parsed.values, "help-all");
  parsed.version = flag(parsed.values, "version");
  if (parsed.help || parsed.help_all || parsed.version) return parsed;
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

std::string version_text(const std::string& program) {
  return fmt::format("{} {} (git {})\n", program, version(), git_revision());
}

}  // namespace tessera
