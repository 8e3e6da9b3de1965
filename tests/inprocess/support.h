// Shared helpers of the in-process stage tests: every stage's run() called at R = 1, 2, 3 ranks as
// threads (common/mpi/thread_comm.h) on a tiny generated cohort, without mpirun.
//
// Ranks as threads share one process, so these runs use --file-locking false: fcntl locks belong
// to the process, and a second rank's shared lock of the directory rank 0 holds would be refused
// (the lock protocol itself is covered by the MPI end-to-end tests).
#pragma once

#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/core/options.h"
#include "common/mpi/thread_comm.h"

namespace tessera::inprocess {

namespace fs = std::filesystem;

// A fresh directory for one test or suite (the temporary directory's tessera_<name>_<pid>),
// removed at the end unless a test failed or TESSERA_KEEP_TEST_DIRS is set and not empty.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// Logs at `level` with the "[rank r/R]" tag of init_logging, each rank thread of run_ranks with its
// own rank (tests' default logger has no rank tag).
void log_with_rank_tags(const std::string& level = "warn");

// Writes three small generated slides (s0.tif .. s2.tif: two patients, two sites) and their
// manifest m.csv (slide_id,path,patient_id,site) into `dir`; returns the manifest's path.
std::string write_cohort(const std::string& dir);

// A stage's Config from command-line arguments, parsed as the stage's executable parses them
// (its option table plus the common options).
template <typename Config>
Config stage_config(OptionTable table, const std::vector<std::string>& args,
                    Config (*config_from)(const po::variables_map&)) {
  po::options_description common("General");
  add_common_options(common);
  table.add(common, OptionKind::kRunControl);
  return config_from(parse_options(table.description(), args).values);
}

// Runs `run(config, comm)` on R ranks and returns every rank's outcome.
template <typename Config>
std::vector<RankOutcome> run_stage_ranks(int ranks, int (*run)(const Config&, Comm&),
                                         const Config& config) {
  return run_rank_outcomes(ranks, [&](Comm& comm) { return run(config, comm); });
}

// The exit codes of every rank (the function's return or the thrown error's code).
std::vector<int> exit_codes(const std::vector<RankOutcome>& outcomes);

// "" when every rank returned; else "rank r: <what it threw>" lines.
std::string describe(const std::vector<RankOutcome>& outcomes);

// The message of what a rank threw, "" when it returned.
std::string what_of(const RankOutcome& outcome);

// Whether a rank threw an exception of type E.
template <typename E>
bool threw(const RankOutcome& outcome) {
  if (!outcome.error) return false;
  try {
    std::rethrow_exception(outcome.error);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

// Checks that a job ended as its MPI run would: every rank threw and exits with `exit_code`, at
// least one rank threw a `Cause` whose message contains `cause_says`, and every other rank threw a
// `Cause` too or was released with CommAborted.
template <typename Cause>
void expect_job_failed(const std::vector<RankOutcome>& outcomes, int exit_code,
                       const std::string& cause_says) {
  bool found = false;
  for (size_t r = 0; r < outcomes.size(); ++r) {
    const RankOutcome& o = outcomes[r];
    EXPECT_TRUE(o.error) << "rank " << r << " returned " << o.exit_code << "\n"
                         << describe(outcomes);
    EXPECT_EQ(o.exit_code, exit_code) << "rank " << r << "\n" << describe(outcomes);
    if (threw<CommAborted>(o)) continue;
    EXPECT_TRUE(threw<Cause>(o)) << "rank " << r << " threw another type\n" << describe(outcomes);
    if (threw<Cause>(o) && what_of(o).find(cause_says) != std::string::npos) found = true;
  }
  EXPECT_TRUE(found) << "no rank says '" << cause_says << "'\n" << describe(outcomes);
}

// Bytes of a file ("" when unreadable).
std::string file_bytes(const std::string& path);

// Overwrites `n` bytes in the middle of `path` with their complement (keeps its size and ends).
void damage_middle(const std::string& path, size_t n);

// Complements the first 16 bytes of the last stored chunk of the chunked HDF5 dataset `dataset` in
// `path`, so that reading its rows fails its checksum while the file keeps its size and ends.
void damage_last_chunk(const std::string& path, const std::string& dataset);

}  // namespace tessera::inprocess
