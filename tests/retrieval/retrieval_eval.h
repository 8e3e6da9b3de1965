// The retrieval evaluation of a labelled synthetic cohort (tests/synthslide/cohort.h): the whole
// chain (patchgen, embed, ingest, aggregate, ingest --level slide) run through the executables as
// a user runs them, then the figures the search-engine papers report, with the tissue classes as
// labels, per search mode:
//   patch     precision@10 of patch search by the class under each query patch (hits of the
//             query's patient left out), from the class masks; its chance is the share of the
//             query's class among the other patients' patches
//   slide     slide-vector search (query --similar-slide --exclude-same-patient)
//   mosaic    mosaic voting (query --slide S --mosaic-vote --exclude-same-patient)
// For slide and mosaic: majority-vote top-1 and top-5 accuracy and mAP@5 of the diagnosis label,
// and the top-1 accuracy a random ranking would have (chance). Used by benchmarks/retrieval_bench
// and by the test that search beats chance.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/synthslide/cohort.h"

namespace tessera::retrieval {

// Whether the majority label of the first min(k, size) entries of `ranked` is `truth`; ties
// between labels go to the one ranked first. False for an empty list.
bool majority_vote_correct(const std::vector<std::string>& ranked, const std::string& truth, int k);

// Average precision at k: sum over ranks i <= k holding a relevant entry of precision@i, divided
// by the relevant entries in the first k (0 when there is none).
double average_precision_at_k(const std::vector<bool>& relevant, int k);

// The slide-level cohort file of the aggregate output `name` of the run `run_dir`
// (RUN/slides/<name>/slides.h5, through the run layout).
std::string slide_cohort_file(const std::string& run_dir, const std::string& name);

struct Executables {
  std::string mpirun;  // "mpirun -np R <flags>" prefix, R filled by the caller's ranks
  std::string patchgen, embed, aggregate, ingest, query;
  std::string mpirun_for(int ranks) const;
};

struct ChainSpec {
  synth::CohortSpec cohort;  // cohort.dir is set from `dir`
  std::string dir;           // everything goes here: cohort/, run/, queries/
  std::string model = "vit-tiny";
  int ranks = 2;
  int patch_queries_per_class = 25;
  int k = 5;                 // slide-level rankings judged at 1 and k
};

// Runs the chain for `spec.model` (the cohort is written once, on the first call for a dir) and
// evaluates every mode. Returns {"model", "chain_s", "modes": {"patch": {...}, "slide": {...},
// "mosaic": {...}}, "cohort": {...}}. Throws Error with the failing command's output.
nlohmann::json evaluate(const ChainSpec& spec, const Executables& exes);

}  // namespace tessera::retrieval
