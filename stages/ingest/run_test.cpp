// ingest::run at R = 1..4 ranks as threads over one embed output: byte-identical shards whatever
// R (a rank without shards included), and failures that end every rank alike.
#include <gtest/gtest.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/stage/failure.h"
#include "common/store/embeddings.h"
#include "tests/inprocess/pipeline.h"
#include "tests/inprocess/support.h"

namespace tessera::inprocess {
namespace {

class IngestRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    log_with_rank_tags();
    dir_ = new ScratchDir("inprocess_ingest");
    make_upstream(dir_->path().string(), run_dir(), false);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string run_dir() { return *dir_ / "run"; }
  static std::string generation(const std::string& run, const std::string& name) {
    return run + "/ingest/" + name + "/gen-00000";
  }
  // A copy of the patchgen and embed runs, to damage.
  static std::string copy_of_run(const std::string& name) {
    const std::string copy = *dir_ / name;
    fs::create_directories(copy);
    for (const char* stage : {"patchgen", "embed"}) {
      fs::copy(run_dir() + "/" + stage, copy + "/" + stage, fs::copy_options::recursive);
    }
    return copy;
  }

  static ScratchDir* dir_;
};

ScratchDir* IngestRun::dir_ = nullptr;

TEST_F(IngestRun, ShardFilesAreByteIdenticalWhateverTheRanks) {
  struct Case {
    std::string index, assign;
    int max_ranks;
  };
  for (const Case& c : {Case{"Flat", "by-slide", 4}, Case{"Flat", "cyclic", 3},
                        Case{"IVF2,Flat", "by-slide", 3}}) {
    std::vector<std::string> first;  // bytes of every shard file at R = 1
    for (int ranks = 1; ranks <= c.max_ranks; ++ranks) {
      const std::string name =
          fmt::format("{}-{}-r{}", c.index == "Flat" ? "flat" : "ivf", c.assign, ranks);
      const auto outcomes = run_stage_ranks(
          ranks, ingest::run,
          ingest_config(run_dir(), name,
                        {"--shards", "3", "--index", c.index, "--assign", c.assign}));
      ASSERT_EQ(exit_codes(outcomes), std::vector<int>(ranks, 0)) << describe(outcomes);
      std::vector<std::string> files;
      for (int k = 0; k < 3; ++k) {
        const std::string shard = generation(run_dir(), name) + fmt::format("/shards/shard-{:05d}", k);
        files.push_back(file_bytes(shard + "/index.faiss"));
        files.push_back(file_bytes(shard + "/meta.h5"));
      }
      if (c.index != "Flat") files.push_back(file_bytes(generation(run_dir(), name) + "/trained.faiss"));
      for (const auto& f : files) EXPECT_FALSE(f.empty()) << name;
      if (ranks == 1) {
        first = files;
      } else {
        for (size_t i = 0; i < files.size(); ++i) {
          EXPECT_TRUE(files[i] == first[i]) << name << ": file " << i << " differs from R = 1";
        }
      }
    }
  }
}

// Two cohort parts: part 0 ingested, then part 1 appended as generation 1, at R = 1, 2, 3; each
// generation's shard files are the same bytes whatever R.
TEST_F(IngestRun, AnAppendedGenerationIsByteIdenticalWhateverTheRanks) {
  const std::string run = *dir_ / "parts";
  SerialComm serial;
  for (int part = 0; part < 2; ++part) {
    const std::string p = std::to_string(part);
    const patchgen::Config pg = stage_config(
        patchgen::option_table(),
        {"--manifest", *dir_ / "m.csv", "--out", run, "--patch-size", "64", "--file-locking",
         "false", "--reader-threads", "1", "--qc", "false", "--part", p, "--parts", "2"},
        patchgen::config_from);
    ASSERT_EQ(patchgen::run(pg, serial), 0);
    const embed::Config e = stage_config(
        embed::option_table(),
        {"--run", run, "--model", "vit-tiny", "--batch-size", "8", "--torch-threads", "1",
         "--file-locking", "false", "--part", p, "--parts", "2"},
        embed::config_from);
    ASSERT_EQ(embed::run(e, serial), 0);
  }
  std::vector<std::string> first;
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const std::string name = fmt::format("append-r{}", ranks);
    auto outcomes = run_stage_ranks(
        ranks, ingest::run, ingest_config(run, name, {"--shards", "2", "--embed-parts", "0"}));
    ASSERT_EQ(exit_codes(outcomes), std::vector<int>(ranks, 0)) << describe(outcomes);
    outcomes = run_stage_ranks(ranks, ingest::run,
                               ingest_config(run, name, {"--shards", "2", "--append"}));
    ASSERT_EQ(exit_codes(outcomes), std::vector<int>(ranks, 0)) << describe(outcomes);
    const auto catalog = read_json_file(run + "/ingest/" + name + "/catalog.json");
    ASSERT_TRUE(catalog.has_value());
    ASSERT_EQ(catalog->at("generations").size(), 2u);
    std::vector<std::string> files;
    for (const char* gen : {"gen-00000", "gen-00001"}) {
      for (int k = 0; k < 2; ++k) {
        const std::string shard = run + "/ingest/" + name + "/" + gen + fmt::format("/shards/shard-{:05d}", k);
        files.push_back(file_bytes(shard + "/index.faiss"));
        files.push_back(file_bytes(shard + "/meta.h5"));
      }
    }
    for (const auto& f : files) EXPECT_FALSE(f.empty()) << name;
    if (ranks == 1) {
      first = files;
    } else {
      for (size_t i = 0; i < files.size(); ++i) {
        EXPECT_TRUE(files[i] == first[i]) << name << ": file " << i << " differs from R = 1";
      }
    }
    // Nothing left to append: every rank returns 0 and the catalog is unchanged.
    const std::string before = file_bytes(run + "/ingest/" + name + "/catalog.json");
    outcomes = run_stage_ranks(ranks, ingest::run,
                               ingest_config(run, name, {"--shards", "2", "--append"}));
    EXPECT_EQ(exit_codes(outcomes), std::vector<int>(ranks, 0)) << describe(outcomes);
    EXPECT_EQ(file_bytes(run + "/ingest/" + name + "/catalog.json"), before);
  }
}

// A truncated embed shard is found by every rank's check of its input: each throws the same
// IoError itself and nothing is ingested.
TEST_F(IngestRun, ATruncatedInputFailsEveryRankWithTheSameIoError) {
  const std::string run = copy_of_run("truncated");
  const std::string shard = run + "/embed/vit-tiny/shards/rank-00000.h5";
  fs::resize_file(shard, fs::file_size(shard) - 100);
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const auto outcomes =
        run_stage_ranks(ranks, ingest::run, ingest_config(run, "t", {"--shards", "3"}));
    expect_job_failed<IoError>(outcomes, kExitError, "is damaged or incomplete");
    for (const auto& o : outcomes) EXPECT_FALSE(threw<CommAborted>(o)) << describe(outcomes);
  }
  EXPECT_FALSE(path_exists(generation(run, "t") + "/_SUCCESS"));
}

// Damage inside the embeddings passes the cheap check; the rank that reads those rows fails on
// their checksums, the others are released with its exit code, and no catalog is written.
TEST_F(IngestRun, DamagedEmbeddingsFailTheRankReadingThemAndEndTheOthers) {
  const std::string run = copy_of_run("damaged");
  damage_last_chunk(run + "/embed/vit-tiny/shards/rank-00000.h5", embedding_names::kEmbeddings);
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const std::string name = fmt::format("r{}", ranks);
    const auto outcomes =
        run_stage_ranks(ranks, ingest::run, ingest_config(run, name, {"--shards", "3"}));
    expect_job_failed<IoError>(outcomes, kExitError, "rank-00000.h5");
    EXPECT_FALSE(path_exists(run + "/ingest/" + name + "/catalog.json"));
  }
}

// Rank 0 decides for all: a missing embed output is the same InvalidInput on every rank.
TEST_F(IngestRun, AMissingEmbedOutputIsBadInputOnEveryRank) {
  for (int ranks = 1; ranks <= 3; ++ranks) {
    ingest::Config c = ingest_config(run_dir(), "missing");
    c.tag = "no-such-model";
    const auto outcomes = run_stage_ranks(ranks, ingest::run, c);
    expect_job_failed<InvalidInput>(outcomes, kExitBadInput, "no-such-model");
    for (const auto& o : outcomes) EXPECT_FALSE(threw<CommAborted>(o)) << describe(outcomes);
  }
}

// An index spec the rows cannot train and more shards than rows are both reported, in one
// InvalidInput on every rank, before anything is written: no RUN/ingest/<name> is left behind.
TEST_F(IngestRun, OptionsTheRowsCannotMeetAreAllRefusedBeforeAnythingIsWritten) {
  for (int ranks = 1; ranks <= 2; ++ranks) {
    const std::string name = fmt::format("too-big-r{}", ranks);
    const auto both = run_stage_ranks(
        ranks, ingest::run,
        ingest_config(run_dir(), name, {"--index", "IVF4096,Flat", "--shards", "65536"}));
    expect_job_failed<InvalidInput>(both, kExitBadInput, "trained on at least 4096 vectors");
    expect_job_failed<InvalidInput>(both, kExitBadInput, "--shards 65536 is more than");
    const auto index_only = run_stage_ranks(
        ranks, ingest::run, ingest_config(run_dir(), name, {"--index", "IVF4096,Flat"}));
    expect_job_failed<InvalidInput>(index_only, kExitBadInput, "trained on at least 4096 vectors");
    EXPECT_FALSE(path_exists(run_dir() + "/ingest/" + name)) << name;
  }
}

// Through the Faults seam (--debug-kill-rank/-after with --debug-fail-io): the last rank fails
// with an I/O error midway through adding its vectors; every rank ends with exit 1, nothing is
// taken for complete, and a rerun without the fault redoes only that rank and gives the same
// shard files as an uninterrupted run.
TEST_F(IngestRun, AnInjectedIoErrorEndsEveryRankAndARerunFinishesTheSameShards) {
  const std::vector<std::string> common = {"--shards", "3"};
  ASSERT_EQ(exit_codes(run_stage_ranks(1, ingest::run, ingest_config(run_dir(), "clean", common))),
            std::vector<int>{0});
  for (int ranks = 2; ranks <= 3; ++ranks) {
    const std::string name = fmt::format("faulty-r{}", ranks);
    std::vector<std::string> faulty = common;
    faulty.insert(faulty.end(), {"--debug-kill-rank", std::to_string(ranks - 1),
                                 "--debug-kill-after", "1", "--debug-fail-io"});
    const auto outcomes =
        run_stage_ranks(ranks, ingest::run, ingest_config(run_dir(), name, faulty));
    expect_job_failed<IoError>(outcomes, kExitError, "injected I/O error");
    EXPECT_FALSE(path_exists(generation(run_dir(), name) + "/_SUCCESS"));
    // The failing rank recorded why, for tessera-status; the rerun removes the record.
    const auto failures = read_failures(generation(run_dir(), name), ranks);
    ASSERT_FALSE(failures.empty()) << name;
    EXPECT_EQ(failures.back().rank, ranks - 1);
    EXPECT_EQ(failures.back().exit_code, kExitError);
    EXPECT_NE(failures.back().message.find("injected I/O error"), std::string::npos);
    EXPECT_FALSE(path_exists(run_dir() + "/ingest/" + name + "/catalog.json"));
    const auto rerun = run_stage_ranks(ranks, ingest::run, ingest_config(run_dir(), name, common));
    ASSERT_EQ(exit_codes(rerun), std::vector<int>(ranks, 0)) << describe(rerun);
    for (int k = 0; k < 3; ++k) {
      const std::string shard = fmt::format("/shards/shard-{:05d}/index.faiss", k);
      EXPECT_TRUE(file_bytes(generation(run_dir(), name) + shard) ==
                  file_bytes(generation(run_dir(), "clean") + shard))
          << name << " shard " << k;
    }
  }
}

}  // namespace
}  // namespace tessera::inprocess
