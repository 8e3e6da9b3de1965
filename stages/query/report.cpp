#include "stages/query/report.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>
#include "common/core/csv.h"

namespace tessera::query {

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double at = p * (v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (at - lo) * (v[hi] - v[lo]);
}

}  // namespace

double round_significant(double x, int digits) {
  if (!std::isfinite(x) || x == 0) return x;
  return std::strtod(fmt::format("{:.{}g}", x, digits).c_str(), nullptr);
}

double round_decimals(double x, int decimals) {
  if (!std::isfinite(x)) return x;
  return std::strtod(fmt::format("{:.{}f}", x, decimals).c_str(), nullptr);
}

std::string model_notice(const nlohmann::json& model) {
  if (!model.is_object() || model.value("kind", "") != "builtin") return "";
  return fmt::format("NOTE: built-in model '{}' has random weights: the scores say how alike the "
                     "pixels look, not what the tissue is (docs/operations.md, \"Models\")\n",
                     model.value("model", "?"));
}

nlohmann::json Timing::to_json() const {
  const auto ms = [](double v) { return round_decimals(v, 3); };
  return {{"queries", queries},
          {"batch_size", batch_size},
          {"seconds", round_decimals(total_s, 6)},
          {"qps", round_significant(total_s > 0 ? queries / total_s : 0.0, 6)},
          {"latency_ms",
           {{"p50", ms(percentile(latency_ms, 0.5))},
            {"p99", ms(percentile(latency_ms, 0.99))},
            {"min", ms(latency_ms.empty() ? 0 : *std::min_element(latency_ms.begin(), latency_ms.end()))},
            {"max", ms(latency_ms.empty() ? 0 : *std::max_element(latency_ms.begin(), latency_ms.end()))}}}};
}

std::vector<std::string> report_columns(const VectorSlideTable& slides) {
  std::vector<std::string> c = {"query", "rank", "score", "patch_id", "slide_id", "patient_id",
                                "x", "y", "tissue", "shard"};
  for (const auto& m : slides.metadata) c.push_back(m.name);
  return c;
}

std::vector<size_t> table_columns(const VectorSlideTable& slides) {
  std::vector<size_t> keep;
  const std::vector<std::string> all = report_columns(slides);
  for (size_t c = 0; c < all.size(); ++c) {
    if (c != 0 && c != 3 && c != 9) keep.push_back(c);  // query, patch_id, shard
  }
  return keep;
}

std::vector<std::vector<std::string>> report_rows(const std::vector<QueryInfo>& queries,
                                                  const std::vector<std::vector<Hit>>& hits,
                                                  const VectorSlideTable& slides) {
  std::vector<std::vector<std::string>> rows;
  for (size_t q = 0; q < hits.size(); ++q) {
    for (size_t r = 0; r < hits[q].size(); ++r) {
      const Hit& h = hits[q][r];
      std::vector<std::string> row = {std::to_string(q),
                                      std::to_string(r + 1),
                                      fmt::format("{:.6g}", h.score),
                                      std::to_string(h.patch_id),
                                      slides.slide_id.at(h.slide),
                                      slides.patient_id.at(h.slide),
                                      std::to_string(h.x),
                                      std::to_string(h.y),
                                      fmt::format("{:.3f}", h.tissue),
                                      std::to_string(h.shard)};
      for (const auto& m : slides.metadata) row.push_back(m.text(h.slide));
      rows.push_back(std::move(row));
    }
  }
  (void)queries;
  return rows;
}

namespace {

// `text` (a dump(2)) indented by `spaces` after each line break.
std::string indented(const std::string& text, int spaces) {
  const std::string pad(spaces, ' ');
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out;
}

}  // namespace

nlohmann::json hit_json(const Hit& hit, size_t rank, const VectorSlideTable& slides) {
  nlohmann::json h = nlohmann::json::object();
  h["rank"] = rank;
  h["score"] = round_significant(hit.score, 6);
  h["patch_id"] = hit.patch_id;
  h["slide_id"] = slides.slide_id.at(hit.slide);
  h["patient_id"] = slides.patient_id.at(hit.slide);
  h["x"] = hit.x;
  h["y"] = hit.y;
  h["tissue"] = round_decimals(hit.tissue, 4);
  h["shard"] = hit.shard;
  for (const auto& m : slides.metadata) {
    switch (m.type) {
      case MetaType::kInt: h[m.name] = m.ints.at(hit.slide); break;
      case MetaType::kFloat:
        h[m.name] = std::isnan(m.floats.at(hit.slide)) ? nlohmann::json()
                                                        : nlohmann::json(round_significant(m.floats[hit.slide], 6));
        break;
      case MetaType::kString: h[m.name] = m.strings.at(hit.slide); break;
    }
  }
  return h;
}


ReportStream::ReportStream(std::string format, const VectorSlideTable& slides,
                           nlohmann::json search, std::string notice)
    : format_(std::move(format)),
      slides_(slides),
      search_(std::move(search)),
      notice_(std::move(notice)),
      columns_(report_columns(slides)) {}

std::string ReportStream::begin() const {
  if (format_ == "csv") return csv_record(columns_);
  if (format_ == "json") return "{\n  \"queries\": [";
  return notice_.empty() ? std::string() : notice_ + "\n";
}

std::string ReportStream::batch(int64_t first, const std::vector<QueryInfo>& queries,
                                const std::vector<std::vector<Hit>>& hits) {
  std::string out;
  for (size_t i = 0; i < hits.size(); ++i) {
    const int64_t q = first + static_cast<int64_t>(i);
    const QueryInfo& info = queries.at(i);
    if (format_ == "json") {
      nlohmann::json list = nlohmann::json::array();
      for (size_t r = 0; r < hits[i].size(); ++r) list.push_back(hit_json(hits[i][r], r + 1, slides_));
      nlohmann::json entry = {{"query", q}, {"source", info.source},
                              {"latency_ms", round_decimals(info.latency_ms, 3)},
                              {"hits", std::move(list)}};
      if (info.patch_id >= 0) entry["patch_id"] = info.patch_id;
      out += (queries_ ? ",\n    " : "\n    ") + indented(entry.dump(2), 4);
      ++queries_;
      continue;
    }
    // One query's rows only: memory holds a batch, never the whole report.
    std::vector<std::vector<std::string>> rows = report_rows({}, {hits[i]}, slides_);
    for (auto& row : rows) row[0] = std::to_string(q);
    if (format_ == "csv") {
      for (const auto& row : rows) out += csv_record(row);
      continue;
    }
    // table: the readable columns (table_columns), aligned per query, numbers right-aligned, one
    // block per query.
    const std::vector<size_t> shown = table_columns(slides_);
    std::vector<size_t> width(columns_.size());
    for (size_t c = 0; c < columns_.size(); ++c) width[c] = columns_[c].size();
    for (const auto& row : rows) {
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    auto line = [&](const std::vector<std::string>& cells) {
      std::string s;
      for (const size_t c : shown) {
        const bool text = c == 4 || c == 5 || c >= 10;
        s += (s.empty() ? "" : "  ") + (text ? fmt::format("{:<{}}", cells[c], width[c])
                                             : fmt::format("{:>{}}", cells[c], width[c]));
      }
      while (!s.empty() && s.back() == ' ') s.pop_back();
      return s + "\n";
    };
    out += fmt::format("query {}: {} ({} hits, {:.2f} ms)\n", q, info.source, hits[i].size(),
                       info.latency_ms);
    out += line(columns_);
    for (const auto& row : rows) out += line(row);
    out += "\n";
  }
  return out;
}

std::string ReportStream::end(const Timing& timing) const {
  const nlohmann::json t = timing.to_json();
  if (format_ == "csv") return {};
  if (format_ == "json") {
    return std::string(queries_ ? "\n  ]" : "]") + ",\n  \"search\": " +
           indented(search_.dump(2), 2) + ",\n  \"timing\": " + indented(t.dump(2), 2) + "\n}\n";
  }
  // One query's time is in its block's title; several get a summary.
  if (timing.queries <= 1) return {};
  return fmt::format("{} queries in {:.3f} s: {:.1f} queries/s, latency p50 {:.2f} ms, p99 {:.2f} "
                     "ms\n",
                     timing.queries, timing.total_s, t["qps"].get<double>(),
                     t["latency_ms"]["p50"].get<double>(), t["latency_ms"]["p99"].get<double>());
}

std::string format_report(const std::string& format, const std::vector<QueryInfo>& queries,
                          const std::vector<std::vector<Hit>>& hits,
                          const VectorSlideTable& slides, const Timing& timing,
                          const nlohmann::json& search) {
  ReportStream stream(format, slides, search);
  std::string out = stream.begin();
  out += stream.batch(0, queries, hits);  // before end(), which closes what batch() opened
  return out + stream.end(timing);
}

}  // namespace tessera::query
