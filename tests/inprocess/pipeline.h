// The upstream runs that the ingest and query in-process tests start from, made once per suite at
// R = 1 over write_cohort's slides. Header-only: included by tests that link patchgen, embed and
// ingest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/mpi/comm.h"
#include "common/store/index.h"
#include "stages/embed/config.h"
#include "stages/embed/embed.h"
#include "stages/ingest/config.h"
#include "stages/ingest/ingest.h"
#include "stages/patchgen/config.h"
#include "stages/patchgen/patchgen.h"
#include "tests/inprocess/support.h"

namespace tessera::inprocess {

inline ingest::Config ingest_config(const std::string& run, const std::string& name,
                                    std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--run",     run,  "--tag",          "vit-tiny", "--name", name,
                                   "--threads", "1",  "--file-locking", "false"};
  args.insert(args.end(), extra.begin(), extra.end());
  return stage_config(ingest::option_table(), args, ingest::config_from);
}

// patchgen (64 px patches, no QC images) into `run`/patchgen over the cohort written to `dir`,
// embed (vit-tiny, tag "vit-tiny"), and with `ingest_too` ingest (3 Flat shards, name "flat").
// Fails the calling test (fatally) when a stage does not return 0.
inline void make_upstream(const std::string& dir, const std::string& run, bool ingest_too) {
  SerialComm comm;
  const std::string manifest = write_cohort(dir);
  const patchgen::Config p = stage_config(
      patchgen::option_table(),
      {"--manifest", manifest, "--out", run, "--patch-size", "64", "--file-locking", "false",
       "--reader-threads", "1", "--qc", "false"},
      patchgen::config_from);
  ASSERT_EQ(patchgen::run(p, comm), 0);
  const embed::Config e = stage_config(
      embed::option_table(),
      {"--run", run, "--model", "vit-tiny", "--batch-size", "8", "--torch-threads", "1",
       "--file-locking", "false", "--deterministic"},
      embed::config_from);
  ASSERT_EQ(embed::run(e, comm), 0);
  if (ingest_too) ASSERT_EQ(ingest::run(ingest_config(run, "flat", {"--shards", "3"}), comm), 0);
}

// Every third patch id of `run`'s patch index, in patch id order.
inline std::vector<int64_t> every_third_patch(const std::string& run) {
  const IndexInfo info = load_index_info(run + "/patchgen");
  const IndexRows rows = IndexReader(info.path).read_range(0, info.rows);
  std::vector<int64_t> ids;
  for (size_t i = 0; i < rows.size(); i += rows.size() / 3) ids.push_back(rows.patch_id[i]);
  return ids;
}

}  // namespace tessera::inprocess
