// The query part's yardstick: query vectors near the index's rows, their exact top-k from an
// in-memory Flat index, and recall@k of the query tool's answer against it.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "benchmarks/ingest/mixture.h"
#include "benchmarks/ingest/options.h"
#include "benchmarks/ingest/rows.h"

namespace tessera::ingest_bench {

// o.queries query vectors: rows spread evenly over `rows`, each perturbed by o.query_noise
// (Mixture::row with stream = the query's number). queries x rows.dim floats.
std::vector<float> make_queries(const Options& o, const Mixture& mixture, const Rows& rows);

// The exact top-k patch ids of each of `count` queries over every row (inner product), q x k,
// searched with `threads` FAISS threads; `seconds` gets the search time.
std::vector<int64_t> exact_neighbours(const Rows& rows, const float* queries, int count, int k,
                                      int threads, double* seconds);

// The share of the exact top-k ids (`exact`, q x k) found among the hits of each of the first
// `queries` entries of `answers` (query's JSON "queries": [{"hits": [{"patch_id"}...]}...]).
double recall_at_k(const nlohmann::json& answers, const std::vector<int64_t>& exact, int queries,
                   int k);

}  // namespace tessera::ingest_bench
