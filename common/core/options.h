// Option parsing shared by every executable. Each module adds its options to one
// boost::program_options description; the same table serves the command line and the INI file
// given by --config, so every option can be set in either place (command line wins).
#pragma once

#include <set>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace tessera {

namespace po = boost::program_options;

// Adds the options every executable has: --help, --config FILE, --log-level LEVEL.
void add_common_options(po::options_description& desc);

struct ParsedOptions {
  po::variables_map values;
  bool help = false;
};

// Parses `args` (argv without the program name) against `desc`, which must include the common
// options. Precedence: command line, then the --config INI file (flat `key = value` lines, `#`
// comments), then defaults. Throws InvalidInput, naming the option or the config file and key,
// for unknown options or keys, malformed values, missing required options and unreadable config
// files. With --help, returns help=true without checking required options.
ParsedOptions parse_options(const po::options_description& desc,
                            const std::vector<std::string>& args);

// "Usage: <usage>\n\n<every option with its default and description>".
std::string help_text(const std::string& usage, const po::options_description& desc);

// The effective configuration as INI text, one `key = value` line per option that has a value,
// sorted by key, skipping `exclude` and the common options. Feeding it back through --config
// reproduces the configuration.
std::string effective_config(const po::variables_map& values,
                             const std::set<std::string>& exclude = {});

// Renders a stored option value (string, bool, integer or floating point types) as text;
// floating point values round-trip exactly.
std::string option_value_text(const po::variable_value& value);

}  // namespace tessera
