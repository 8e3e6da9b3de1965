#include "benchmarks/ingest/launch.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "benchmarks/bench_report.h"
#include "benchmarks/ingest/recall.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/stage/layout.h"
#include "common/stage/skeleton.h"
#include "common/vector/catalog.h"

namespace tessera::ingest_bench {

using nlohmann::json;

namespace {

namespace fs = std::filesystem;

// A shell word: single-quoted, a quote inside written '\''.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string launcher(const Options& o, int ranks) {
  return fmt::format("{} -np {} ", o.mpirun, ranks);
}

// A JSON file a finished child process must have written (read_json_file, refusing absence).
json read_json_or_fail(const std::string& path) {
  std::optional<json> j = read_json_file(path);
  if (!j) fail<IoError>("cannot read '{}'", path);
  return *j;
}

}  // namespace

double run_command(const std::string& command, const std::string& log) {
  spdlog::info("$ {}", command);
  bench::Stopwatch watch;
  const int rc = std::system((command + " >> " + quoted(log) + " 2>&1").c_str());
  const double s = watch.seconds();
  if (rc != 0) fail<Error>("'{}' failed (status {}); see '{}'", command, rc, log);
  return s;
}

json run_ingest(const Options& o, const std::string& run, const std::string& name,
                const std::string& spec, int shards, int ranks, const std::string& log) {
  const int threads = std::max(1, o.threads / ranks);
  const std::string command =
      launcher(o, ranks) +
      fmt::format("{}/stages/ingest/ingest --run {} --name {} --index {} --shards {} "
                  "--train-size {} --threads {} --overwrite",
                  o.bin_dir, quoted(run), name, quoted(spec), shards, o.train_size, threads);
  const double wall = run_command(command, log);
  const std::string out = RunLayout(run).stage_root(kIngestStage, name);
  const std::string gen = generation_dir(out, 0);  // a fresh ingest
  const json success = read_json_or_fail(stage_file(gen, kSuccessFile));
  const int64_t rows = success.at("rows").get<int64_t>();
  json per_rank = json::array();
  double rank_total_max = 0;
  for (int r = 0; r < ranks; ++r) {
    const json m = read_json_or_fail(marker_path(gen, r));
    const json& st = m.at("stats");
    const double total = st.at("total_s").get<double>();
    const int64_t mine = m.at("rows").get<int64_t>();
    rank_total_max = std::max(rank_total_max, total);
    per_rank.push_back({{"rank", r},
                        {"rows", mine},
                        {"read_s", st.at("read_s")},
                        {"add_s", st.at("add_s")},
                        {"write_s", st.at("write_s")},
                        {"total_s", total},
                        {"rows_per_s", total > 0 ? mine / total : 0.0},
                        {"peak_rss_mb", st.at("max_rss_bytes").get<double>() / 1048576.0}});
  }
  const json catalog = read_json_or_fail((fs::path(out) / kCatalogFile).string());
  json shard_xxh3 = json::array();
  for (const auto& s : catalog.at("shards")) {
    for (const auto& seg : s.at("segments")) shard_xxh3.push_back(seg.at("index").value("xxh3", ""));
  }
  double rss_max = 0;
  for (const auto& r : per_rank) rss_max = std::max(rss_max, r["peak_rss_mb"].get<double>());
  spdlog::info("ingest {} np {}: {} rows in {:.2f} s wall ({:.0f} rows/s)", spec, ranks, rows,
               wall, rows / wall);
  return {{"ranks", ranks},
          {"threads_per_rank", threads},
          {"shards", shards},
          {"wall_s", wall},
          {"rows", rows},
          {"rows_per_s", rows / wall},
          {"rows_per_s_per_rank", rows / wall / ranks},
          {"rank_total_s_max", rank_total_max},
          {"rows_per_s_rank_work", rank_total_max > 0 ? rows / rank_total_max : 0.0},
          {"peak_rss_mb_max", rss_max},
          {"per_rank", per_rank},
          {"seconds_summed_over_ranks", success.at("seconds_summed_over_ranks")},
          {"default_nprobe", catalog.value("default_nprobe", 0)},
          {"shard_index_xxh3", shard_xxh3}};
}

json run_query(const Options& o, const std::string& run, const std::string& name,
               const std::string& vectors, int queries, int ranks, bool single, int rerank,
               const std::vector<int64_t>& exact, const std::string& scratch,
               const std::string& log) {
  const int threads = std::max(1, o.threads / ranks);
  const std::string result = (fs::path(scratch) / "query-result.json").string();
  const std::string command =
      launcher(o, ranks) +
      fmt::format("{}/stages/query/query --index {} --vectors {} --k {} --threads {} "
                  "--format json --rerank {} --output {}{}",
                  o.bin_dir, quoted((fs::path(run) / "ingest" / name).string()), quoted(vectors),
                  o.k, threads, rerank, quoted(result), single ? " --batch-size 1" : "");
  const double wall = run_command(command, log);
  const json r = read_json_or_fail(result);
  fs::remove(result);
  const auto& hits = r.at("queries");
  if (static_cast<int>(hits.size()) != queries) {
    fail<Error>("query returned {} results for {} queries", hits.size(), queries);
  }
  const json& t = r.at("timing");
  const double recall = recall_at_k(hits, exact, queries, o.k);
  spdlog::info("query {} np {} {} rerank {}: recall@{} {:.4f}, qps {:.1f}, p50 {:.3f} ms, p99 "
               "{:.3f} ms",
               name, ranks, single ? "single" : "batched", rerank, o.k, recall,
               t.at("qps").get<double>(),
               t.at("latency_ms").at("p50").get<double>(), t.at("latency_ms").at("p99").get<double>());
  return {{"ranks", ranks},
          {"threads_per_rank", threads},
          {"mode", single ? "single (--batch-size 1)" : "batched (all queries per call)"},
          {"rerank", rerank},
          {"queries", queries},
          {"wall_s", wall},
          {"recall_at_k", recall},
          {"qps", t.at("qps")},
          {"latency_ms", t.at("latency_ms")},
          {"timing", t},
          {"search", r.value("search", json())}};
}

}  // namespace tessera::ingest_bench
