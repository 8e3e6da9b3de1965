#include "stages/status/render.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/core/progress.h"
#include "common/stage/layout.h"

namespace tessera::status {

namespace {

std::string opt_int(const std::optional<int64_t>& v) {
  return v ? std::to_string(*v) : std::string("-");
}

template <typename T>
nlohmann::json or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json str_or_null(const std::string& v) {
  return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v);
}

}  // namespace

std::string part_text(const StageStatus& s) {
  if (is_vector_index(s)) return s.level;
  return stage_decl(s.stage).kind == DirKind::kNamedGenerations ? fmt::format("gen {}", s.part)
                             : fmt::format("{} of {}", s.part, s.parts);
}

std::string row_name(const StageStatus& s) {
  const StageDecl& decl = stage_decl(s.stage);
  if (decl.kind == DirKind::kParts) return "-";
  return decl.name_option == "--tag" ? s.tag : s.name;
}

std::string row_title(const StageStatus& s) {
  std::string title = s.stage;
  const DirKind kind = stage_decl(s.stage).kind;
  if (kind != DirKind::kParts) title += " " + row_name(s);
  return title + (kind == DirKind::kNamedGenerations ? " " : " part ") + part_text(s);
}

std::string format_ranks(const std::vector<int>& ranks) {
  if (ranks.empty()) return "-";
  std::string text;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!text.empty()) text += ",";
    text += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return text;
}

nlohmann::json to_json(const RunStatus& status) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : status.stages) {
    nlohmann::json failed = nlohmann::json::array();
    for (const auto& f : s.failed_slides) {
      failed.push_back({{"slide_id", f.slide_id}, {"reason", f.reason}});
    }
    const bool generation =
        stage_decl(s.stage).kind == DirKind::kNamedGenerations && !is_vector_index(s);
    stages.push_back({
        {"stage", s.stage},
        {"tag", str_or_null(s.tag)},
        {"name", str_or_null(s.name)},
        {"generation", generation ? nlohmann::json(s.part) : nlohmann::json(nullptr)},
        {"level", str_or_null(s.level)},
        {"part", s.part},
        {"parts", s.parts},
        {"dir", s.dir},
        {"state", to_string(s.state)},
        {"world_size", or_null(s.world_size)},
        {"ranks_done", s.ranks_done},
        {"ranks_missing", s.ranks_missing},
        {"exit_code", or_null(s.exit_code)},
        {"status", str_or_null(s.success_status)},
        {"rows", or_null(s.rows)},
        {"slides_ok", or_null(s.slides_ok)},
        {"slides_failed", or_null(s.slides_failed)},
        {"failed_slides", failed},
        {"duration_s", or_null(s.duration_s)},
        {"rows_per_s", or_null(s.rows_per_s)},
        {"progress", s.progress ? *s.progress : nlohmann::json(nullptr)},
        {"next", str_or_null(s.next)},
        {"problem", str_or_null(s.problem)},
        {"failure", s.failure ? nlohmann::json{{"rank", s.failure->rank},
                                               {"exit_code", s.failure->exit_code},
                                               {"message", s.failure->message},
                                               {"time", s.failure->time}}
                              : nlohmann::json(nullptr)},
    });
  }
  return {{"format_version", 1},
          {"run", status.run},
          {"complete", exit_code(status) == 0},
          {"exit_code", exit_code(status)},
          {"stages", stages},
          {"next", status.next},
          {"services", status.services}};
}

std::string format_table(const RunStatus& status) {
  std::vector<std::vector<std::string>> cells = {
      {"STAGE", "TAG/NAME", "PART", "STATE", "RANKS", "ROWS", "SLIDES", "DURATION", "ROWS/S"}};
  for (const auto& s : status.stages) {
    std::string slides = opt_int(s.slides_ok);
    if (s.slides_failed.value_or(0) > 0) slides += fmt::format(" (+{} failed)", *s.slides_failed);
    cells.push_back({s.stage, row_name(s), part_text(s), to_string(s.state),
                     s.world_size ? fmt::format("{}/{}", s.ranks_done.size(), *s.world_size)
                                  : std::string("-"),
                     opt_int(s.rows), slides, s.duration_s ? format_hms(*s.duration_s) : "-",
                     s.rows_per_s ? fmt::format("{:.1f}", *s.rows_per_s) : "-"});
  }
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& row : cells) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out = fmt::format("run {}\n\n", status.run);
  if (status.stages.empty()) out += "no stage directories\n";
  for (const auto& row : status.stages.empty() ? decltype(cells){} : cells) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const bool right = c >= 5 && c != 6;  // numbers right-aligned
      line += right ? fmt::format("{:>{}}", row[c], width[c])
                    : fmt::format("{:<{}}", row[c], width[c]);
      if (c + 1 < row.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }

  std::string failed;
  for (const auto& s : status.stages) {
    for (const auto& f : s.failed_slides) {
      failed += fmt::format("  {}: {}: {}\n", row_title(s), f.slide_id, f.reason);
    }
  }
  if (!failed.empty()) out += "\nfailed slides:\n" + failed;

  std::string pending;
  for (const auto& s : status.stages) {
    if (is_complete(s.state) && s.problem.empty()) continue;
    pending += fmt::format("  {}: {}", row_title(s), to_string(s.state));
    if (!is_complete(s.state) && s.world_size && s.state != State::kMissing) {
      pending += fmt::format(", ranks done {}, missing {}", format_ranks(s.ranks_done),
                             format_ranks(s.ranks_missing));
    }
    if (!s.problem.empty()) pending += fmt::format(" ({})", s.problem);
    pending += "\n";
    if (s.failure) {
      pending += fmt::format("    last run failed (rank {}, exit code {}, {}): {}\n", s.failure->rank,
                             s.failure->exit_code, s.failure->time, s.failure->message);
    }
    if (s.progress && !is_complete(s.state)) {
      try {
        ProgressRecord p = ProgressRecord::from_json(*s.progress);
        pending += fmt::format("    last progress: {} at {}\n", p.to_text(), p.time);
      } catch (const nlohmann::json::exception&) {
      }
    }
    pending += fmt::format("    {}\n", s.dir);
  }
  if (!pending.empty()) out += "\nnot complete:\n" + pending;

  if (!status.services.empty()) {
    out += "\nserving:\n";
    for (const auto& j : status.services) {
      out += fmt::format("  {} at {} (host {}, pid {}, {} rank(s))\n", j.value("index", "?"),
                         j.value("url", "?"), j.value("host", "?"), j.value("pid", 0),
                         j.value("ranks", 0));
    }
  }
  if (!status.next.empty()) {
    out += "\nnext:\n";
    for (const auto& command : status.next) out += "  " + command + "\n";
  }
  size_t done = 0;
  for (const auto& s : status.stages) done += is_complete(s.state) ? 1 : 0;
  out += done == status.stages.size()
             ? fmt::format("\nall {} stage directories complete\n", done)
             : fmt::format("\n{} of {} stage directories complete\n", done, status.stages.size());
  return out;
}

std::string format_incomplete(const RunStatus& status) {
  std::string out;
  for (const auto& s : status.stages) {
    if (is_complete(s.state)) continue;
    out += fmt::format("{} {} {} {} {}\n", s.stage, row_name(s), s.part, s.parts,
                       to_string(s.state));
  }
  return out;
}

}  // namespace tessera::status
