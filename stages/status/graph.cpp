#include "stages/status/graph.h"

#include <filesystem>

#include "common/stage/layout.h"

namespace tessera::status {

namespace fs = std::filesystem;

namespace {

const char* kind_name(DirKind kind) {
  switch (kind) {
    case DirKind::kParts: return "parts";
    case DirKind::kNamedParts: return "named_parts";
    case DirKind::kNamedGenerations: return "named_generations";
  }
  return "?";
}

const char* launch_name(Launch launch) {
  switch (launch) {
    case Launch::kPerPart: return "per_part";
    case Launch::kOnce: return "once";
    case Launch::kWhenNamed: return "when_named";
  }
  return "?";
}

nlohmann::json or_null(const std::string& text) {
  return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text);
}

}  // namespace

std::string stage_folder(const StageDecl& decl) {
  const fs::path run = "/run";
  fs::path root = RunLayout(run.string()).stage_root(
      decl.name, decl.kind == DirKind::kParts ? "" : "name");
  if (decl.kind != DirKind::kParts) root = root.parent_path();
  return root.lexically_relative(run).string();
}

nlohmann::json graph_json() {
  nlohmann::json stages = nlohmann::json::array();
  for (const StageDecl& decl : stage_graph()) {
    stages.push_back({{"name", decl.name},
                      {"folder", stage_folder(decl)},
                      {"kind", kind_name(decl.kind)},
                      {"name_option", or_null(decl.name_option)},
                      {"reads", decl.reads},
                      {"executable", decl.name},
                      {"run_option", decl.run_option},
                      {"launch", launch_name(decl.launch)},
                      {"chain_options", decl.chain_options},
                      {"threads_option", or_null(decl.threads_option)}});
  }
  return {{"format_version", 1}, {"stages", stages}};
}

}  // namespace tessera::status
