#include "common/stage/layout.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/core/error.h"
#include "common/core/fs.h"

namespace tessera {

namespace fs = std::filesystem;

namespace {

// Parses exactly `digits` decimal digits.
std::optional<int> fixed_digits(std::string_view text, size_t digits) {
  if (text.size() != digits) return std::nullopt;
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

// Whether `dir` itself is a stage directory (holds a file only the skeleton writes there).
bool holds_stage(const std::string& dir) {
  for (const char* file : {kRunFile, kSuccessFile, kStaleFile, kRanksLockFile}) {
    if (exists(stage_file(dir, file))) return true;
  }
  return false;
}

}  // namespace

const std::vector<StageDecl>& stage_graph() {
  // A stage that reads embed's outputs is given the chain's --tag (embed's name option).
  static const std::vector<StageDecl> kGraph = {
      {kPatchgenStage, kPatchgenStage, DirKind::kParts, "", {}, "--out", Launch::kPerPart,
       {"--manifest"}, ""},
      {kEmbedStage, kEmbedStage, DirKind::kNamedParts, "--tag", {kPatchgenStage}, "--run",
       Launch::kPerPart, {"--model"}, "--torch-threads"},
      {kAggregateStage, "slides", DirKind::kNamedParts, "--name", {kEmbedStage, kPatchgenStage},
       "--run", Launch::kWhenNamed, {}, ""},
      {kIngestStage, kIngestStage, DirKind::kNamedGenerations, "--name",
       {kEmbedStage, kPatchgenStage, kAggregateStage}, "--run", Launch::kOnce, {}, "--threads"},
  };
  return kGraph;
}

const StageDecl& stage_decl(const std::string& stage) {
  for (const auto& decl : stage_graph()) {
    if (decl.name == stage) return decl;
  }
  fail<InvalidInput>("unknown stage '{}'", stage);
}

std::vector<std::string> downstream_stages(const std::string& stage) {
  std::set<std::string> reached = {stage};
  std::vector<std::string> out;
  // Chain order: every reader comes after what it reads, so one pass reaches every descendant.
  for (const auto& decl : stage_graph()) {
    const bool reads_reached = std::any_of(decl.reads.begin(), decl.reads.end(),
                                           [&](const std::string& r) { return reached.count(r); });
    if (reads_reached && !reached.count(decl.name)) {
      reached.insert(decl.name);
      out.push_back(decl.name);
    }
  }
  return out;
}

std::string part_name(int part, int parts) {
  return fmt::format("part-{:05d}-of-{:05d}", part, parts);
}

std::optional<PartName> parse_part_name(std::string_view name) {
  constexpr std::string_view kPrefix = "part-", kOf = "-of-";
  if (name.size() != kPrefix.size() + 5 + kOf.size() + 5 || name.substr(0, 5) != kPrefix ||
      name.substr(10, 4) != kOf) {
    return std::nullopt;
  }
  const auto p = fixed_digits(name.substr(5, 5), 5);
  const auto q = fixed_digits(name.substr(14, 5), 5);
  if (!p || !q || *q < 1 || *p >= *q) return std::nullopt;
  return PartName{*p, *q};
}

std::string part_dir(const std::string& root, int part, int parts) {
  if (parts == 1) return root;
  return (fs::path(root) / part_name(part, parts)).string();
}

std::string generation_name(int generation) { return fmt::format("gen-{:05d}", generation); }

std::optional<int> parse_generation_name(std::string_view name) {
  if (name.size() != 9 || name.substr(0, 4) != "gen-") return std::nullopt;
  return fixed_digits(name.substr(4), 5);
}

std::string generation_dir(const std::string& root, int generation) {
  return (fs::path(root) / generation_name(generation)).string();
}

std::string stage_file(const std::string& stage_dir, const char* file) {
  return (fs::path(stage_dir) / file).string();
}

std::vector<PartName> parts_under(const std::string& root) {
  std::vector<PartName> found;
  if (holds_stage(root)) found.push_back({0, 1});
  std::map<int, std::set<int>> by_parts;
  for (const auto& name : list_subdirectories(root)) {
    if (auto p = parse_part_name(name)) by_parts[p->parts].insert(p->part);
  }
  for (const auto& [q, present] : by_parts) {
    for (int p = 0; p < q; ++p) found.push_back({p, q});
  }
  return found;
}

RunLayout::RunLayout(const std::string& run) {
  run_ = fs::absolute(run).lexically_normal().string();
  if (run_.size() > 1 && run_.back() == '/') run_.pop_back();
}

std::string RunLayout::stage_base(const std::string& stage) const {
  return (fs::path(run_) / stage_decl(stage).folder).string();
}

std::string RunLayout::stage_root(const std::string& stage, const std::string& name) const {
  const StageDecl& decl = stage_decl(stage);
  fs::path root = fs::path(stage_base(stage));
  if (decl.kind != DirKind::kParts) {
    if (name.empty()) fail<InvalidInput>("stage '{}' needs a name ({})", stage, decl.name_option);
    root /= name;
  }
  return root.string();
}

std::string RunLayout::stage_dir(const std::string& stage, const std::string& name, int part,
                                 int parts) const {
  const std::string root = stage_root(stage, name);
  if (stage_decl(stage).kind == DirKind::kNamedGenerations) return generation_dir(root, part);
  return part_dir(root, part, parts);
}

std::vector<std::string> RunLayout::names(const std::string& stage) const {
  if (stage_decl(stage).kind == DirKind::kParts) return {};
  return list_subdirectories(stage_base(stage));
}

std::vector<StageDir> RunLayout::stage_dirs(const std::string& stage,
                                            const std::string& name) const {
  const StageDecl& decl = stage_decl(stage);
  const std::string root = stage_root(stage, name);
  std::vector<StageDir> out;
  if (decl.kind == DirKind::kNamedGenerations) {
    // A root that is itself a stage directory (ingest --level slide|patient: one index, no
    // generations) comes first, as generation 0 of one.
    if (holds_stage(root)) out.push_back({stage, name, 0, 1, root});
    for (const auto& d : list_subdirectories(root)) {
      if (auto g = parse_generation_name(d)) {
        out.push_back({stage, name, *g, 1, generation_dir(root, *g)});
      }
    }
    return out;
  }
  for (const PartName& p : parts_under(root)) {
    out.push_back({stage, name, p.part, p.parts, part_dir(root, p.part, p.parts)});
  }
  return out;
}

std::vector<StageDir> RunLayout::stage_dirs(const std::string& stage) const {
  if (stage_decl(stage).kind == DirKind::kParts) return stage_dirs(stage, "");
  std::vector<StageDir> out;
  for (const auto& name : names(stage)) {
    auto dirs = stage_dirs(stage, name);
    out.insert(out.end(), dirs.begin(), dirs.end());
  }
  return out;
}

}  // namespace tessera
