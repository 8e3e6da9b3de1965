// The retrieval metrics, and the claim that search finds like with like: on a small seeded
// labelled cohort, slide-vector search and mosaic voting rank a slide of the query's diagnosis
// first (leaving out the query's patient) at least twice as often as chance. A wrong join, id or
// vote brings them down to chance and fails the test.
#include "tests/retrieval/retrieval_eval.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <fmt/format.h>

#include "common/stage/layout.h"
#include "common/store/slide_vectors.h"
#include "tests/e2e/e2e_util.h"

namespace tessera::retrieval {
namespace {

namespace fs = std::filesystem;

TEST(RetrievalMetrics, MajorityVote) {
  EXPECT_TRUE(majority_vote_correct({"a", "b", "b", "a", "a"}, "a", 5));
  EXPECT_FALSE(majority_vote_correct({"a", "b", "b", "c", "a"}, "b", 1));
  EXPECT_TRUE(majority_vote_correct({"a", "b", "b", "c", "a"}, "a", 5));  // tie: ranked first
  EXPECT_TRUE(majority_vote_correct({"b", "a", "a"}, "a", 3));
  EXPECT_FALSE(majority_vote_correct({}, "a", 5));
  EXPECT_TRUE(majority_vote_correct({"a"}, "a", 5));  // fewer than k
}

TEST(RetrievalMetrics, AveragePrecision) {
  EXPECT_DOUBLE_EQ(average_precision_at_k({true, true, true}, 5), 1.0);
  EXPECT_DOUBLE_EQ(average_precision_at_k({false, true, false, true, false}, 5),
                   (1.0 / 2 + 2.0 / 4) / 2);
  EXPECT_DOUBLE_EQ(average_precision_at_k({false, false}, 5), 0.0);
  EXPECT_DOUBLE_EQ(average_precision_at_k({false, false, true}, 2), 0.0);
}

TEST(Retrieval, SlideSearchAndMosaicVotingBeatChanceOnALabelledCohort) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("tessera_retrieval_{}", ::getpid());
  fs::remove_all(dir);
  ChainSpec spec;
  spec.dir = dir.string();
  spec.cohort.slides = 12;
  spec.cohort.patients = 8;
  spec.cohort.width = 2000;
  spec.cohort.height = 1500;
  spec.cohort.seed = 11;
  spec.cohort.threads = 2;
  spec.model = "vit-tiny";
  spec.patch_queries_per_class = 10;
  Executables exes;
  exes.mpirun = TESSERA_MPIEXEC " " TESSERA_MPIEXEC_FLAGS;
  exes.patchgen = TESSERA_PATCHGEN;
  exes.embed = TESSERA_EMBED;
  exes.aggregate = TESSERA_AGGREGATE;
  exes.ingest = TESSERA_INGEST;
  exes.query = TESSERA_QUERY;
  const nlohmann::json result = evaluate(spec, exes);
  std::cout << result.dump(2) << "\n";
  const auto& modes = result.at("modes");
  for (const char* mode : {"slide", "mosaic"}) {
    const auto& m = modes.at(mode);
    EXPECT_EQ(m.at("queries").get<int>(), 12) << mode;
    const double chance = m.at("chance_top1").get<double>();
    EXPECT_GT(chance, 0.05) << mode;
    EXPECT_GE(m.at("top1_accuracy").get<double>(), 2 * chance) << mode;
  }
  // Patches: better than the share of the commonest class could give by luck, and at least twice
  // what a random hit would give (the query class's share of the other patients' patches).
  const auto& patch = modes.at("patch");
  EXPECT_GT(patch.at("precision_at_10").get<double>(), 0.5);
  EXPECT_GT(patch.at("chance_precision_at_10").get<double>(), 0.05);
  EXPECT_GE(patch.at("precision_at_10").get<double>(),
            2 * patch.at("chance_precision_at_10").get<double>());

  // Patient level on the same run: vectors, index, and the nearest patients of a patient.
  const std::string run = (dir / "run").string();
  const std::string mpi = exes.mpirun_for(2);
  std::string log;
  ASSERT_EQ(e2e::run_command(mpi + exes.aggregate + " --run " + run + " --level patient", &log), 0)
      << log;
  ASSERT_EQ(e2e::run_command(exes.ingest + " --run " + run +
                                 " --level patient --slides mean-vit-tiny-patient --normalize",
                             &log),
            0)
      << log;
  const RunLayout layout(run);
  const std::string patients = layout.stage_root(kIngestStage, "mean-vit-tiny-patient");
  // (stderr, the log, is left out of what is parsed)
  ASSERT_EQ(e2e::run_command("(" + exes.query + " --index " + patients +
                                 " --similar-patient P002 -k 3 --format json 2>/dev/null)",
                             &log),
            0)
      << log;
  const nlohmann::json j = nlohmann::json::parse(log);
  EXPECT_EQ(j.at("query").at("id"), "P002");
  ASSERT_EQ(j.at("hits").size(), 3u);
  for (const auto& h : j.at("hits")) {
    EXPECT_NE(h.at("patient_id"), "P002");
    EXPECT_TRUE(h.contains("diagnosis"));
  }
  ASSERT_EQ(e2e::run_command(exes.query + " --index " + patients + " --similar-patient P002 -k 3",
                             &log),
            0);
  EXPECT_NE(log.find("nearest patients of patient P002"), std::string::npos) << log;
  // The wrong level, an unknown id: refused (exit 2) with the reason.
  EXPECT_EQ(e2e::run_command(exes.query + " --index " + patients + " --similar-slide S0001", &log),
            2);
  EXPECT_NE(log.find("patient-level index"), std::string::npos) << log;
  EXPECT_EQ(e2e::run_command(exes.query + " --index " + patients + " --similar-patient P999", &log),
            2);
  EXPECT_NE(log.find("unknown patient 'P999'"), std::string::npos) << log;
  // R = 1, 2, 3: the same slide vectors (bitwise), and the same slide-level answers: nearest
  // slides from a slide index built at R ranks, queried at R ranks, and mosaic votes.
  const CohortVectors at_two =
      read_cohort_vectors(slide_cohort_file(run, "mean-vit-tiny"));  // evaluate's, at 2 ranks
  const std::string similar = " --similar-slide S0003 --exclude-same-patient -k 5 --format json";
  const std::string vote = " --index " + layout.stage_root(kIngestStage, "vit-tiny") +
                           " --slide S0003 --mosaic-vote --exclude-same-patient -k 5 --format json";
  nlohmann::json first_hits, first_votes;
  for (int r = 1; r <= 3; ++r) {
    const std::string name = fmt::format("mean-r{}", r);
    const std::string mpi_r = exes.mpirun_for(r);
    ASSERT_EQ(e2e::run_command(mpi_r + exes.aggregate + " --run " + run +
                                   " --tag vit-tiny --name " + name, &log), 0) << log;
    const CohortVectors v = read_cohort_vectors(slide_cohort_file(run, name));
    EXPECT_EQ(v.ids, at_two.ids) << r;
    EXPECT_EQ(v.features, at_two.features) << r;
    ASSERT_EQ(e2e::run_command(mpi_r + exes.ingest + " --run " + run + " --level slide --slides " +
                                   name + " --name slides-" + name + " --normalize", &log), 0)
        << log;
    std::string out;
    ASSERT_EQ(e2e::run_command("(" + mpi_r + exes.query + " --index " +
                                   layout.stage_root(kIngestStage, "slides-" + name) + similar +
                                   " 2>/dev/null)", &out), 0) << out;
    const nlohmann::json hits = nlohmann::json::parse(out).at("hits");
    ASSERT_EQ(e2e::run_command("(" + mpi_r + exes.query + vote + " 2>/dev/null)", &out), 0) << out;
    const nlohmann::json votes = nlohmann::json::parse(out).at("slides");
    EXPECT_EQ(hits.size(), 5u) << r;
    EXPECT_FALSE(votes.empty()) << r;
    if (r == 1) {
      first_hits = hits;
      first_votes = votes;
      continue;
    }
    EXPECT_EQ(hits, first_hits) << "nearest slides at R = " << r;
    EXPECT_EQ(votes, first_votes) << "mosaic votes at R = " << r;
  }
  // aggregate --overwrite with another pooling: the slide index built on it is stale and
  // refused (exit 2) until rebuilt.
  ASSERT_EQ(e2e::run_command(mpi + exes.aggregate + " --run " + run +
                                 " --tag vit-tiny --name mean-r1 --pooling max --overwrite", &log),
            0) << log;
  const std::string stale_query =
      exes.query + " --index " + layout.stage_root(kIngestStage, "slides-mean-r1") + similar;
  EXPECT_EQ(e2e::run_command(stale_query, &log), 2) << log;
  EXPECT_NE(log.find("no longer matches its inputs"), std::string::npos) << log;
  ASSERT_EQ(e2e::run_command(exes.ingest + " --run " + run + " --level slide --slides mean-r1 " +
                                 "--name slides-mean-r1 --normalize", &log), 0) << log;
  EXPECT_EQ(e2e::run_command(stale_query, &log), 0) << log;
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::retrieval
