// Option parsing shared by every executable. Each module adds its options to one OptionTable; the
// same table serves the command line and the INI file given by --config, so every option can be
// set in either place (command line wins). The table also records, once per option, what kind of
// option it is, which decides whether it is shown by --help, saved in config.ini and fingerprinted.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>

namespace tessera {

namespace po = boost::program_options;

// What an option does to a stage's outputs.
enum class OptionKind {
  kResult,      // changes what the stage writes: in --help, config.ini and the fingerprint
  kRunControl,  // changes how a run proceeds, not its outputs: in --help and config.ini only
  kDebug        // fault injection for tests: only in --help-all; never saved nor fingerprinted
};

// The options of one executable with the kind of each. Copyable; options are shared, not copied.
class OptionTable {
 public:
  // Adds options to a group shown under one caption. Used like add_options(), with the kind
  // after the name:
  //   table.group("Patch grid")
  //       ("patch-size", OptionKind::kResult, po::value<int>()->default_value(224), "...");
  class GroupAdder {
   public:
    GroupAdder& operator()(const char* name, OptionKind kind, const po::value_semantic* semantic,
                           const char* help);

   private:
    friend class OptionTable;
    GroupAdder(OptionTable& table, size_t group) : table_(&table), group_(group) {}
    OptionTable* table_;
    size_t group_;
  };

  // The group captioned `caption`, created at the end when new.
  GroupAdder group(const std::string& caption);

  // Adds options described elsewhere (a shared module's options_description). `kinds` names the
  // kind of every one of them; every option of `desc` needs one, and none may be kDebug (debug
  // options go through group(), which hides them from --help). Throws Error (a programming error)
  // otherwise and for a name already in the table.
  void add(const po::options_description& desc, const std::map<std::string, OptionKind>& kinds);
  // The same with one kind for every option of `desc`.
  void add(const po::options_description& desc, OptionKind kind);

  bool contains(const std::string& name) const { return kinds_.count(name) > 0; }
  // Throws Error for a name not in the table.
  OptionKind kind(const std::string& name) const;
  // Every option name, sorted.
  std::vector<std::string> names() const;

  // Every option, for parsing.
  po::options_description description() const;
  // What --help shows (every option but kDebug), or with `all` what --help-all shows (every one).
  po::options_description help_description(bool all) const;

  // INI text of `values` (option name -> canonical value text, e.g. from ini_value): one
  // `key = value` line per option of the kinds wanted, sorted by key. config_ini takes kResult and
  // kRunControl options (feeding it back through --config reproduces the configuration);
  // fingerprint_ini takes kResult options only. A name not in the table throws Error (a
  // programming error); a value that an INI line cannot carry ('#', a line break, blanks at either
  // end) throws InvalidInput naming the option.
  std::string config_ini(const std::map<std::string, std::string>& values) const;
  std::string fingerprint_ini(const std::map<std::string, std::string>& values) const;

 private:
  struct Group {
    std::string caption;
    std::shared_ptr<po::options_description> options;
    bool foreign = false;  // added by add(): shown as given
  };
  void record(const std::string& name, OptionKind kind);
  std::string ini(const std::map<std::string, std::string>& values, bool result_only) const;

  std::vector<Group> groups_;
  std::map<std::string, OptionKind> kinds_;
};

// Adds the options every executable has: --help, --help-all, --version, --config FILE and
// --log-level LEVEL. mpi_main adds them as kRunControl.
void add_common_options(po::options_description& desc);

struct ParsedOptions {
  po::variables_map values;
  bool help = false;      // --help
  bool help_all = false;  // --help-all
  bool version = false;   // --version
};

// Parses `args` (argv without the program name) against `desc`, which must include the common
// options. Precedence: command line, then the --config INI file (flat `key = value` lines, `#`
// comments), then defaults. Throws InvalidInput, naming the option or the config file and key,
// for unknown options or keys, malformed values, missing required options and unreadable config
// files. With --help, --help-all or --version, returns with that flag set and without reading the
// config file or checking required options.
ParsedOptions parse_options(const po::options_description& desc,
                            const std::vector<std::string>& args);

// "Usage: <usage>\n\n<every option of desc with its default and description>".
std::string help_text(const std::string& usage, const po::options_description& desc);

// "<program> <tessera version> (git <revision>)\n", what --version prints.
std::string version_text(const std::string& program);

// A typed option value as config.ini text that parses back to the same value: strings as they
// are, booleans as true/false, integers in decimal, floating point values in their shortest
// round-trip form.
template <typename T>
std::string ini_value(const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_arithmetic_v<T>) {
    return fmt::format("{}", value);
  } else {
    return std::string(value);
  }
}

// A typed option value whose default --help shows as config.ini writes it (`true`/`false`,
// floating-point values in shortest round-trip form, not `1` or `0.10000000000000001`).
template <typename T>
po::typed_value<T>* value_with_default(const T& value) {
  return po::value<T>()->default_value(value, ini_value(value));
}

}  // namespace tessera
