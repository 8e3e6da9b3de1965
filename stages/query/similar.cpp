#include "stages/query/similar.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "common/core/csv.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/search/slide_search.h"

namespace tessera::query {

using search::MosaicPatch;
using search::SimilarHits;
using search::SimilarIndex;
using search::Vote;
using search::VoteTables;
using search::vote_report_json;
using search::vote_tables;

namespace {

// Rows as an aligned table (columns from `first_left` on are left-aligned), or as CSV.
std::string table_text(const std::vector<std::string>& columns,
                       const std::vector<std::vector<std::string>>& rows, size_t first_left) {
  std::vector<size_t> width(columns.size());
  for (size_t c = 0; c < columns.size(); ++c) width[c] = columns[c].size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t c = 0; c < cells.size(); ++c) {
      s += (c ? "  " : "") + (c >= first_left ? fmt::format("{:<{}}", cells[c], width[c])
                                              : fmt::format("{:>{}}", cells[c], width[c]));
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string out = line(columns);
  for (const auto& row : rows) out += line(row);
  return out;
}

std::string csv_text(const std::vector<std::string>& columns,
                     const std::vector<std::vector<std::string>>& rows) {
  std::string out = csv_record(columns);
  for (const auto& row : rows) out += csv_record(row);
  return out;
}

std::string similar_report(const Config& config) {
  const SimilarIndex index(config.index);
  const bool by_slide = !config.similar_slide.empty();
  const std::string want = by_slide ? "slide" : "patient";
  const std::string& id = by_slide ? config.similar_slide : config.similar_patient;
  if (index.level() != want) {
    fail<InvalidInput>("'{}' is a {}-level index: --similar-{} needs one made by ingest --level {}",
                       config.index, index.level(), want, want);
  }
  std::string why;
  const int64_t row = index.row(id, &why);
  if (row < 0) fail<InvalidInput>("{}", why);
  const SimilarHits hits = index.search(row, config.k, config.exclude_same_patient);
  const nlohmann::json j = index.report_json(hits, config.k, config.exclude_same_patient);
  if (config.format == "csv") return csv_text(hits.columns, hits.rows);
  if (config.format == "json") return j.dump(2) + "\n";
  const CohortVectors& entries = index.entries();
  const SlideCatalog& catalog = index.catalog();
  const std::string& patient = entries.patient_id[row];
  std::string head = fmt::format("{} {}", want, id);
  if (!patient.empty() && by_slide) head += fmt::format(" (patient {})", patient);
  for (const auto& [key, value] : j["query"]["labels"].items()) {
    head += fmt::format(", {} = {}", key, value.get<std::string>());
  }
  return fmt::format("nearest {}s of {} ({} of {} {}s searched, {} {}):\n", want, head,
                     hits.allowed, entries.size(), want, catalog.index_spec, catalog.metric) +
         table_text(hits.columns, hits.rows, 2);
}

}  // namespace

int run_similar(const Config& config, Comm& comm) {
  const std::string report = decided_by_root(comm, [&] { return similar_report(config); });
  if (comm.rank() != 0) return kExitOk;
  if (config.output.empty()) {
    std::fwrite(report.data(), 1, report.size(), stdout);
    std::fflush(stdout);
  } else {
    atomic_write_file(config.output, report);
  }
  return kExitOk;
}

std::string format_vote_report(const std::string& format, const std::string& slide,
                               const std::vector<MosaicPatch>& mosaic,
                               const std::vector<Vote>& slides_ranked,
                               const std::vector<Vote>& patients_ranked,
                               const VectorSlideTable& table, int k,
                               const nlohmann::json& search) {
  const VoteTables t = vote_tables(slides_ranked, patients_ranked, table, k);
  const auto& slide_columns = t.slide_columns;
  const auto& patient_columns = t.patient_columns;
  const auto& slide_rows = t.slide_rows;
  const auto& patient_rows = t.patient_rows;
  if (format == "csv") {
    // One table: slides, then patients, told apart by the first column.
    std::vector<std::string> columns = {"ranking"};
    columns.insert(columns.end(), slide_columns.begin(), slide_columns.end());
    std::vector<std::vector<std::string>> rows;
    for (auto row : slide_rows) {
      row.insert(row.begin(), "slide");
      rows.push_back(std::move(row));
    }
    for (const auto& p : patient_rows) {
      std::vector<std::string> row = {"patient", p[0], p[1], p[2], "", p[3]};
      row.resize(columns.size());
      rows.push_back(std::move(row));
    }
    return csv_text(columns, rows);
  }
  if (format == "json") {
    return vote_report_json(slide, mosaic, slides_ranked, patients_ranked, table, k, search)
               .dump(2) +
           "\n";
  }
  std::string out = fmt::format(
      "slide {}: a mosaic of {} patches searched; slides and patients ranked by votes (one per "
      "mosaic patch whose top {} holds them; ties by best score)\n",
      slide, mosaic.size(), search.value("k", k));
  out += table_text(slide_columns, slide_rows, 3) + "\n";
  out += table_text(patient_columns, patient_rows, 3);
  return out;
}

}  // namespace tessera::query
