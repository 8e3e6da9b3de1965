// bench_compare: compares two JSON reports of one benchmark driver (bench_report's
// compare_reports) and prints the ratio of medians per measured mode, or why it refuses.
//
//   bench_compare BEFORE.json AFTER.json [--json] [--allow /parameters/NAME]...
//
// --allow names a parameter whose difference is expected (an option the later revision added or
// changed on purpose); it is listed instead of refusing. Output hashes and the environment
// cannot be allowed to differ.
//
// Exit codes: 0 compared, 1 refused (not the same experiment), 2 usage or unreadable report.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "benchmarks/bench_report.h"

int main(int argc, char** argv) {
  const char* usage = "usage: bench_compare BEFORE.json AFTER.json [--json] [--allow /parameters/NAME]...\n";
  std::vector<std::string> files, allowed;
  bool as_json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") {
      as_json = true;
    } else if (arg == "--allow" && i + 1 < argc) {
      allowed.emplace_back(argv[++i]);
    } else if (arg.rfind("--", 0) == 0) {
      std::cerr << usage;
      return 2;
    } else {
      files.push_back(arg);
    }
  }
  if (files.size() != 2) {
    std::cerr << usage;
    return 2;
  }
  try {
    const nlohmann::json comparison =
        tessera::bench::compare_reports(tessera::bench::load_report(files[0]),
                                        tessera::bench::load_report(files[1]), allowed);
    std::cout << (as_json ? comparison.dump(2) + "\n"
                          : tessera::bench::format_comparison(comparison));
    return comparison["refused"].is_null() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "bench_compare: " << e.what() << "\n";
    return 2;
  }
}
