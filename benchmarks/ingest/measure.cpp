#include "benchmarks/ingest/measure.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include "benchmarks/bench_report.h"
#include "benchmarks/ingest/launch.h"
#include "benchmarks/ingest/npy.h"
#include "benchmarks/ingest/recall.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/vector/vector_index.h"

namespace tessera::ingest_bench {

using nlohmann::json;

namespace {

namespace fs = std::filesystem;
using bench::Stopwatch;

}  // namespace

void Report::save() const { bench::write_report(path, doc); }

json raw_build(const Options& o, const std::string& spec, const Rows& rows,
               const std::string& scratch) {
  set_vector_threads(o.threads);
  bench::reset_peak_rss();
  VectorIndex index = VectorIndex::create(spec, rows.dim, Metric::kInnerProduct);
  double train_s = 0;
  if (!index.is_trained()) {
    const int64_t n = std::min(o.train_size, rows.count());
    const int64_t step = rows.count() / n;
    std::vector<float> sample(static_cast<size_t>(n) * rows.dim);
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(rows.values.data() + static_cast<size_t>(i * step) * rows.dim, rows.dim,
                  sample.data() + static_cast<size_t>(i) * rows.dim);
    }
    Stopwatch train;
    index.train(sample.data(), n);
    train_s = train.seconds();
  }
  Stopwatch add;
  index.add(rows.values.data(), rows.ids.data(), rows.count());
  const double add_s = add.seconds();
  const std::string path = (fs::path(scratch) / "raw.faiss").string();
  Stopwatch write;
  index.write(path);
  const double write_s = write.seconds();
  const auto bytes = file_size(path).value_or(0);
  fs::remove(path);
  spdlog::info("raw {} D={}: train {:.2f} s, add {:.2f} s ({:.0f} rows/s), write {:.2f} s", spec,
               rows.dim, train_s, add_s, rows.count() / add_s, write_s);
  return {{"threads", o.threads},
          {"train_s", train_s},
          {"add_s", add_s},
          {"write_s", write_s},
          {"add_rows_per_s", rows.count() / add_s},
          {"train_add_rows_per_s", rows.count() / (train_s + add_s)},
          {"index_bytes", bytes},
          {"peak_rss_mb", bench::peak_rss_mb_since_reset()}};
}

double median_of(const json& reps, const std::function<double(const json&)>& get) {
  std::vector<double> v;
  for (const auto& r : reps) v.push_back(get(r));
  return bench::summarize(v)["median"].get<double>();
}

void measure_ingest(const Options& o, const Rows& rows, const std::string& run,
                    const std::string& scratch, const std::string& log, Report& report,
                    json& section) {
  for (const std::string& spec : o.indexes) {
    const bool flat = VectorIndex::create(spec, rows.dim, Metric::kInnerProduct).is_trained();
    const int reps = flat ? o.flat_reps : o.slow_reps;
    json entry = {{"index", spec}, {"dim", rows.dim}, {"rows", rows.count()}, {"repetitions", json::array()}};
    for (int rep = 0; rep < reps; ++rep) {
      json r = {{"repetition", rep}, {"load_average_at_start", bench::load_average()}};
      r["raw"] = raw_build(o, spec, rows, scratch);
      r["ingest"] = json::object();
      for (int ranks : o.ranks) {
        const std::string name = fmt::format("bench-np{}", ranks);
        json m = run_ingest(o, run, name, spec, o.shards, ranks, log);
        m["ratio_to_raw_add"] = m["rows_per_s"].get<double>() / r["raw"]["add_rows_per_s"].get<double>();
        m["ratio_to_raw_train_add"] =
            m["rows_per_s"].get<double>() / r["raw"]["train_add_rows_per_s"].get<double>();
        r["ingest"]["np" + std::to_string(ranks)] = m;
        if (!o.keep) remove_tree((fs::path(run) / "ingest" / name).string());
      }
      entry["repetitions"].push_back(r);
      section["ingest"].push_back(entry);  // saved as it goes; replaced below
      report.save();
      section["ingest"].erase(section["ingest"].size() - 1);
    }
    entry["summary"] = bench::summarize_repetitions(entry["repetitions"]);
    section["ingest"].push_back(entry);
    report.save();
  }
}


void measure_query(const Options& o, const Mixture& mixture, const Rows& rows,
                   const std::string& run, const std::string& scratch, const std::string& log,
                   Report& report, json& section) {
  const std::vector<float> queries = make_queries(o, mixture, rows);
  const std::string batched_file = (fs::path(scratch) / "queries.npy").string();
  const std::string single_file = (fs::path(scratch) / "queries-single.npy").string();
  write_npy(batched_file, queries.data(), o.queries, rows.dim);
  write_npy(single_file, queries.data(), o.single_queries, rows.dim);
  double exact_s = 0;
  const std::vector<int64_t> exact =
      exact_neighbours(rows, queries.data(), o.queries, o.k, o.threads, &exact_s);
  section["query"] = {{"dim", rows.dim},
                      {"rows", rows.count()},
                      {"queries", o.queries},
                      {"single_queries", o.single_queries},
                      {"query_noise", o.query_noise},
                      {"k", o.k},
                      {"exact_search_s", exact_s},
                      {"queries_xxh3", xxh3_file(batched_file)},
                      {"results", json::array()}};
  report.save();
  for (const std::string& spec : o.query_indexes) {
    for (int shards : o.query_shards) {
      const std::string name = fmt::format("query-k{}", shards);
      const int build_ranks = *std::max_element(o.ranks.begin(), o.ranks.end());
      json build = run_ingest(o, run, name, spec, shards, std::min(build_ranks, shards), log);
      json entry = {{"index", spec}, {"shards", shards}, {"default_nprobe", build["default_nprobe"]},
                    {"shard_index_xxh3", build["shard_index_xxh3"]}, {"runs", json::array()}};
      for (int ranks : o.ranks) {
        for (int rerank : o.query_reranks) {
          entry["runs"].push_back(run_query(o, run, name, batched_file, o.queries, ranks, false,
                                            rerank, exact, scratch, log));
          entry["runs"].push_back(run_query(o, run, name, single_file, o.single_queries, ranks,
                                            true, rerank, exact, scratch, log));
        }
      }
      if (!o.keep) remove_tree((fs::path(run) / "ingest" / name).string());
      section["query"]["results"].push_back(entry);
      report.save();
    }
  }
}

json targets(const Options& o, const json& sizes) {
  json t = json::object();
  json flat = json::array();
  for (const auto& s : sizes) {
    for (const auto& e : s["ingest"]) {
      if (e["index"] != "Flat") continue;
      for (int ranks : o.ranks) {
        const std::string key = "np" + std::to_string(ranks);
        const double ratio = median_of(e["repetitions"], [&](const json& r) {
          return r["ingest"][key]["ratio_to_raw_add"].get<double>();
        });
        flat.push_back({{"dim", e["dim"]}, {"ranks", ranks}, {"median_ratio", ratio},
                        {"met", ratio >= 0.9}});
      }
    }
  }
  t["ingest_flat_at_least_0.9_of_raw_add"] = flat;
  if (!sizes.empty() && sizes[0].contains("query")) {
    const json& results = sizes[0]["query"]["results"];
    json recall = json::array(), p50 = json::array();
    std::map<std::pair<int, std::string>, double> flat_p50;  // (ranks, mode) -> p50 at K = 1
    for (const auto& e : results) {
      for (const auto& r : e["runs"]) {
        if (e["index"] == "IVF1024,Flat" && r["mode"].get<std::string>().rfind("batched", 0) == 0) {
          recall.push_back({{"shards", e["shards"]}, {"ranks", r["ranks"]},
                            {"recall_at_k", r["recall_at_k"]},
                            {"met", r["recall_at_k"].get<double>() >= 0.95}});
        }
        if (e["index"] == "Flat" && e["shards"] == 1) {
          flat_p50[{r["ranks"].get<int>(), r["mode"].get<std::string>()}] =
              r["latency_ms"]["p50"].get<double>();
        }
      }
    }
    for (const auto& e : results) {
      if (e["index"] != "Flat" || e["shards"] == 1) continue;
      for (const auto& r : e["runs"]) {
        const auto it = flat_p50.find({r["ranks"].get<int>(), r["mode"].get<std::string>()});
        if (it == flat_p50.end()) continue;
        const double ratio = r["latency_ms"]["p50"].get<double>() / it->second;
        p50.push_back({{"shards", e["shards"]}, {"ranks", r["ranks"]}, {"mode", r["mode"]},
                       {"p50_ratio_to_one_shard", ratio}, {"met", ratio <= 1.2}});
      }
    }
    t["recall_at_10_at_least_0.95_ivf_flat_default_nprobe"] = recall;
    t["sharded_flat_p50_within_1.2x_of_unsharded"] = p50;
  }
  return t;
}

}  // namespace tessera::ingest_bench
