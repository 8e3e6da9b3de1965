#include "stages/status/status.h"

#include <filesystem>
#include <ostream>

#include <boost/program_options.hpp>

#include "common/core/error.h"
#include "common/core/options.h"
#include "stages/status/graph.h"

namespace tessera::status {

namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "tessera-status RUN [--json | --incomplete]\n"
    "tessera-status --graph\n\n"
    "Shows, for each stage directory of run directory RUN (patchgen and embed parts, ingest\n"
    "generations), whether it is complete, running, incomplete (which ranks), stale or missing,\n"
    "its counts, failed slides, duration and throughput, and the commands to run next.\n"
    "--graph prints the stage graph (order, folders, executables) as JSON for launchers.\n"
    "Exit code: 0 all complete, 4 something not complete, 2 no such run directory.";

}  // namespace

int status_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  namespace po = boost::program_options;
  po::options_description desc("Options");
  desc.add_options()
      ("run", po::value<std::string>(), "run directory (also the first positional argument)")
      ("json", po::bool_switch(), "print the report as JSON (schema in docs/operations.md)")
      ("incomplete", po::bool_switch(),
       "print one line per stage directory not complete: <stage> <tag|name|-> <part> <parts> "
       "<state>")
      ("graph", po::bool_switch(),
       "print the stage graph as JSON (every stage in chain order: name, folder, kind, "
       "name_option, reads, executable) and exit; takes no run directory")
      ("help,h", po::bool_switch(), "show the options and exit")
      ("version", po::bool_switch(), "print the version and git revision and exit");
  po::positional_options_description positional;
  positional.add("run", 1);
  po::variables_map values;
  try {
    po::store(po::command_line_parser(args).options(desc).positional(positional).run(), values);
    po::notify(values);
  } catch (const po::error& e) {
    err << "tessera-status: " << e.what() << " (see --help)\n";
    return kExitBadInput;
  }
  if (values["help"].as<bool>()) {
    out << help_text(kUsage, desc);
    return 0;
  }
  if (values["version"].as<bool>()) {
    out << version_text("tessera-status");
    return 0;
  }
  if (values["graph"].as<bool>()) {
    if (values.count("run") || values["json"].as<bool>() || values["incomplete"].as<bool>()) {
      err << "tessera-status: --graph takes no run directory, --json or --incomplete\n";
      return kExitBadInput;
    }
    out << graph_json().dump(2) << "\n";
    return 0;
  }
  if (!values.count("run")) {
    err << "tessera-status: the run directory is required (see --help)\n";
    return kExitBadInput;
  }
  if (values["json"].as<bool>() && values["incomplete"].as<bool>()) {
    err << "tessera-status: --json and --incomplete exclude each other\n";
    return kExitBadInput;
  }
  try {
    // The stages' executables are found beside this one (next.h program_path).
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    RunStatus status =
        scan_run(values["run"].as<std::string>(), ec ? "" : self.parent_path().string());
    if (values["json"].as<bool>()) {
      // Names of files and folders may hold any bytes: shown as U+FFFD, never a failure.
      out << to_json(status).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else if (values["incomplete"].as<bool>()) {
      out << format_incomplete(status);
    } else {
      out << format_table(status);
    }
    return exit_code(status);
  } catch (const Error& e) {
    err << "tessera-status: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    err << "tessera-status: " << e.what() << "\n";
    return kExitError;
  }
}

}  // namespace tessera::status
