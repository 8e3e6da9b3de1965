// The results of a query run as a table, CSV or JSON: one row per (query, rank) with the hit's
// score, ids, coordinates and the slide's metadata columns, and a summary of latency and QPS.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/store/vector_meta.h"
#include "common/search/shard_set.h"

namespace tessera::query {

using search::Hit;  // common/search/shard_set.h

struct QueryInfo {
  std::string source;  // "patch 123", "slide S at (x, y)", "vectors FILE row i", "image FILE"
  int64_t patch_id = -1;   // the query's stored patch, -1 when none
  int32_t slide = -1;
  double latency_ms = 0;
};

struct Timing {
  double total_s = 0;       // every search round, merge included
  int64_t queries = 0;
  int batch_size = 0;       // queries per round
  std::vector<double> latency_ms;  // per query: the time of its round (all its batch's queries)
  nlohmann::json to_json() const;  // queries, seconds, qps, p50/p99/min/max latency
};

// The column names of a report (the fixed ones, then the manifest's metadata columns): CSV and
// JSON carry them all.
std::vector<std::string> report_columns(const VectorSlideTable& slides);

// The columns of report_columns that the table shows (by index): all but query (each query has
// its own block), patch_id and shard, which CSV and JSON keep for scripts.
std::vector<size_t> table_columns(const VectorSlideTable& slides);

// `x` to `digits` significant decimal digits (the double nearest that decimal, which JSON writes
// as it); NaN and infinities as they are. JSON reports carry scores to 6 digits (a float's
// scores differ beyond that by rounding only), times to the microsecond.
double round_significant(double x, int digits);
double round_decimals(double x, int decimals);

// The line a table report opens with when the index holds the embeddings of a built-in model
// (its `model` fingerprint, catalog.json, has kind "builtin"): its weights are random, so the
// scores measure how alike the pixels look, not the tissue. "" for any other model.
std::string model_notice(const nlohmann::json& model);

// One row of text values per hit, columns as report_columns.
std::vector<std::vector<std::string>> report_rows(const std::vector<QueryInfo>& queries,
                                                  const std::vector<std::vector<Hit>>& hits,
                                                  const VectorSlideTable& slides);

// One hit as a JSON object: rank (1-based), score, ids, coordinates, tissue, shard and the slide's
// metadata columns (NaN floats as null).
nlohmann::json hit_json(const Hit& hit, size_t rank, const VectorSlideTable& slides);

// A report written in pieces as the batches of queries are searched, so that memory holds one
// batch's hits and rows, never the whole report's: begin(), batch() for each batch in query order,
// then end(). The JSON pieces concatenate to exactly the document nlohmann::json::dump(2) gives
// ({"queries": [...], "search": ..., "timing": ...}); CSV is one header then one line per hit;
// the table has one block per query, its columns aligned within the block. Not thread-safe.
class ReportStream {
 public:
  // `format` is table, csv or json; `search` describes the search (the JSON report's "search");
  // `notice` (model_notice) opens a table.
  ReportStream(std::string format, const VectorSlideTable& slides, nlohmann::json search,
               std::string notice = "");
  std::string begin() const;
  // Queries first .. first + hits.size() - 1: queries[i] and hits[i] are query first + i.
  std::string batch(int64_t first, const std::vector<QueryInfo>& queries,
                    const std::vector<std::vector<Hit>>& hits);
  std::string end(const Timing& timing) const;

 private:
  std::string format_;
  const VectorSlideTable& slides_;
  nlohmann::json search_;
  std::string notice_;
  std::vector<std::string> columns_;
  int64_t queries_ = 0;  // JSON entries written
};

// The whole report at once: begin() + batch(0, queries, hits) + end(timing) of a ReportStream.
std::string format_report(const std::string& format, const std::vector<QueryInfo>& queries,
                          const std::vector<std::vector<Hit>>& hits,
                          const VectorSlideTable& slides, const Timing& timing,
                          const nlohmann::json& search);

}  // namespace tessera::query
