// ingest_bench's two measurements of one size: the ingest part (raw FAISS builds against the
// real ingest at every rank count, repetitions interleaved) and the query part (recall, latency
// and QPS of the real query tool over sharded indexes), and the targets from them. The
// report is saved after every measurement, so an interrupted run keeps what it measured.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "benchmarks/ingest/mixture.h"
#include "benchmarks/ingest/options.h"
#include "benchmarks/ingest/rows.h"

namespace tessera::ingest_bench {

// The JSON report being built, and where it is saved.
struct Report {
  nlohmann::json doc;
  std::string path;
  void save() const;
};

// A raw FAISS build from memory: create, train on an even sample of o.train_size rows when the
// index needs it, add every row in one call (the add alone is what ingest's rows/s is set
// against), write to `scratch`. Returns the seconds of each step, rows/s, bytes and peak RSS.
nlohmann::json raw_build(const Options& o, const std::string& spec, const Rows& rows,
                         const std::string& scratch);

// The ingest part: for every o.indexes spec, o.flat_reps or o.slow_reps repetitions of a raw
// build and the real ingest at every o.ranks; appends one entry per spec (with its summary) to
// section["ingest"].
void measure_ingest(const Options& o, const Rows& rows, const std::string& run,
                    const std::string& scratch, const std::string& log, Report& report,
                    nlohmann::json& section);

// The query part: the queries (.npy in `scratch`), their exact top-k, then for every
// o.query_indexes spec and o.query_shards K an ingest and the query tool batched and one by one
// at every o.ranks; fills section["query"].
void measure_query(const Options& o, const Mixture& mixture, const Rows& rows,
                   const std::string& run, const std::string& scratch, const std::string& log,
                   Report& report, nlohmann::json& section);

// The median of get(r) over the repetitions `reps`.
double median_of(const nlohmann::json& reps,
                 const std::function<double(const nlohmann::json&)>& get);

// The targets, from the measured sizes (report "sizes"): Flat ingest >= 0.9 of the raw
// add, recall@10 >= 0.95 for IVF1024,Flat at the default nprobe, sharded Flat p50 within 1.2x of
// one shard.
nlohmann::json targets(const Options& o, const nlohmann::json& sizes);

}  // namespace tessera::ingest_bench
