// bench_compare: compares two JSON reports of one benchmark driver (bench_report's
// compare_reports) and prints the ratio of medians per measured mode, or why it refuses.
//
//   bench_compare BEFORE.json AFTER.json [--json]
//
// Exit codes: 0 compared, 1 refused (not the same experiment), 2 usage or unreadable report.
#include <exception>
#include <iostream>
#include <string>

#include "benchmarks/bench_report.h"

int main(int argc, char** argv) {
  const bool as_json = argc == 4 && std::string(argv[3]) == "--json";
  if (argc != 3 && !as_json) {
    std::cerr << "usage: bench_compare BEFORE.json AFTER.json [--json]\n";
    return 2;
  }
  try {
    const nlohmann::json comparison = tessera::bench::compare_reports(
        tessera::bench::load_report(argv[1]), tessera::bench::load_report(argv[2]));
    std::cout << (as_json ? comparison.dump(2) + "\n"
                          : tessera::bench::format_comparison(comparison));
    return comparison["refused"].is_null() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "bench_compare: " << e.what() << "\n";
    return 2;
  }
}
