// query::run at R = 1..4 ranks as threads over one ingest output of 3 shards: the hits of an
// exact search over every stored embedding whatever R (a rank without shards included), and
// failures that end every rank alike.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>

#include <nlohmann/json.hpp>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/store/embeddings.h"
#include "common/store/index.h"
#include "common/slide/png_io.h"
#include "stages/query/config.h"
#include "stages/query/mosaic.h"
#include "stages/query/query.h"
#include "tests/inprocess/pipeline.h"
#include "tests/inprocess/support.h"

namespace tessera::inprocess {
namespace {

using Hits = std::vector<std::vector<std::pair<int64_t, float>>>;

class QueryRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    log_with_rank_tags();
    dir_ = new ScratchDir("inprocess_query");
    make_upstream(dir_->path().string(), run_dir(), true);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string run_dir() { return *dir_ / "run"; }
  static std::string index_dir(const std::string& name = "flat") {
    return run_dir() + "/ingest/" + name;
  }
  static query::Config config(const std::string& output, std::vector<std::string> extra,
                              const std::string& index = index_dir()) {
    std::vector<std::string> args = {"--index", index,    "--format", "json", "--output",
                                     output,    "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return stage_config(query::option_table(), args, query::config_from);
  }
  static std::vector<int64_t> some_patches() { return every_third_patch(run_dir()); }
  static Hits hits_in(const std::string& report) {
    Hits out;
    const nlohmann::json j = nlohmann::json::parse(file_bytes(report));
    for (const auto& q : j.at("queries")) {
      auto& list = out.emplace_back();
      for (const auto& h : q.at("hits")) {
        list.emplace_back(h.at("patch_id").get<int64_t>(), h.at("score").get<float>());
      }
    }
    return out;
  }

  static ScratchDir* dir_;
};

ScratchDir* QueryRun::dir_ = nullptr;

// Every stored embedding of the run, with its slide's metadata: the ground truth of a Flat index.
struct StoredRows {
  std::vector<int64_t> patch_id;
  std::vector<std::string> slide_id, patient, site;  // per row
  std::vector<float> values;                          // row-major [rows, dim]
  size_t dim = 0;
  size_t rows() const { return patch_id.size(); }
  const float* row(size_t i) const { return values.data() + i * dim; }
};

StoredRows read_stored_rows(const std::string& run) {
  StoredRows out;
  const h5::File file = h5::File::open(run + "/embed/vit-tiny/embeddings.h5", h5::Mode::kRead);
  out.patch_id = file.open_dataset(embedding_names::kPatchId).read_all<int64_t>();
  const std::vector<int32_t> slide = file.open_dataset(embedding_names::kSlide).read_all<int32_t>();
  const h5::Dataset values = file.open_dataset(embedding_names::kEmbeddings);
  out.dim = static_cast<size_t>(values.dims().at(1));
  out.values.resize(out.rows() * out.dim);
  values.read_rows_as_floats(out.values.data(), 0, out.rows());
  const IndexInfo info = load_index_info(run + "/patchgen");
  const auto column = [&](const std::string& name) {
    const auto& names = info.slides.metadata_columns;
    return info.slides.metadata.at(std::find(names.begin(), names.end(), name) - names.begin());
  };
  for (const int32_t s : slide) {
    out.slide_id.push_back(info.slides.slide_id.at(s));
    out.patient.push_back(info.slides.patient_id.at(s));
    out.site.push_back(column("site").at(s));
  }
  return out;
}

// The k best inner products with row `query` among the rows `keep` accepts, best first (ties by
// patch id): what an exact search must answer.
Hits exact_search(const StoredRows& rows, int64_t query_patch, size_t k,
                  const std::function<bool(size_t query, size_t row)>& keep) {
  const size_t q = std::find(rows.patch_id.begin(), rows.patch_id.end(), query_patch) -
                   rows.patch_id.begin();
  EXPECT_LT(q, rows.rows()) << "patch " << query_patch << " is not stored";
  std::vector<std::pair<int64_t, float>> scored;
  for (size_t i = 0; i < rows.rows(); ++i) {
    if (!keep(q, i)) continue;
    double dot = 0;
    for (size_t d = 0; d < rows.dim; ++d) dot += double{rows.row(q)[d]} * rows.row(i)[d];
    scored.emplace_back(rows.patch_id[i], static_cast<float>(dot));
  }
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  scored.resize(std::min(k, scored.size()));
  return {scored};
}

// query's hits equal the exact ones: the same scores in the same order, and each hit's patch
// scored as the exact search scores it (patches of equal score may come in either order).
void expect_exact(const Hits& hits, const Hits& exact, const StoredRows& rows, int64_t query) {
  ASSERT_EQ(hits.size(), 1u);
  ASSERT_EQ(hits[0].size(), exact[0].size());
  const Hits all = exact_search(rows, query, rows.rows(), [](size_t, size_t) { return true; });
  std::map<int64_t, float> score_of(all[0].begin(), all[0].end());
  for (size_t i = 0; i < hits[0].size(); ++i) {
    EXPECT_NEAR(hits[0][i].second, exact[0][i].second, 1e-4f * std::abs(exact[0][i].second))
        << "rank " << i;
    EXPECT_NEAR(hits[0][i].second, score_of.at(hits[0][i].first), 1e-4f * std::abs(hits[0][i].second))
        << "patch " << hits[0][i].first;
  }
}

TEST_F(QueryRun, HitsAreThoseOfAnExactSearchOverTheStoredEmbeddings) {
  const std::vector<int64_t> patches = some_patches();
  const StoredRows rows = read_stored_rows(run_dir());
  ASSERT_GT(rows.rows(), 20u);
  struct Case {
    std::vector<std::string> args;
    int64_t patch;
    size_t k;
    std::function<bool(size_t, size_t)> keep;
  };
  const std::vector<Case> cases = {
      {{"-k", "7"}, patches[0], 7, [](size_t, size_t) { return true; }},
      {{"-k", "5", "--filter", "site = lung"}, patches[1], 5,
       [&](size_t, size_t i) { return rows.site[i] == "lung"; }},
      {{"-k", "5", "--exclude-same-patient"}, patches[2], 5,
       [&](size_t q, size_t i) { return rows.patient[i] != rows.patient[q]; }},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(n);
    std::vector<std::string> args = {"--patch", std::to_string(c.patch)};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const std::string report = *dir_ / fmt::format("exact{}.json", n++);
    const auto outcomes = run_stage_ranks(1, query::run, config(report, args));
    ASSERT_EQ(exit_codes(outcomes), std::vector<int>{0}) << describe(outcomes);
    expect_exact(hits_in(report), exact_search(rows, c.patch, c.k, c.keep), rows, c.patch);
  }
}

TEST_F(QueryRun, HitsDoNotDependOnTheNumberOfRanks) {
  const std::vector<int64_t> patches = some_patches();
  ASSERT_GE(patches.size(), 3u);
  const std::vector<std::vector<std::string>> queries = {
      {"--patch", std::to_string(patches[0]), "-k", "7"},
      {"--patch", std::to_string(patches[1]), "-k", "5", "--filter", "site = lung"},
      {"--patch", std::to_string(patches[2]), "-k", "5", "--exclude-same-patient"},
      {"--slide", "b", "--x", "300", "--y", "300", "-k", "4"},
  };
  int q = 0;
  for (const auto& query : queries) {
    Hits first;
    for (int ranks = 1; ranks <= 4; ++ranks) {
      const std::string report = *dir_ / fmt::format("q{}-r{}.json", q, ranks);
      const auto outcomes = run_stage_ranks(ranks, query::run, config(report, query));
      ASSERT_EQ(exit_codes(outcomes), std::vector<int>(ranks, 0)) << describe(outcomes);
      const Hits hits = hits_in(report);
      ASSERT_EQ(hits.size(), 1u);
      EXPECT_FALSE(hits[0].empty());
      if (ranks == 1) {
        first = hits;
      } else {
        EXPECT_EQ(hits, first) << "query " << q << " at " << ranks << " ranks";
      }
    }
    ++q;
  }
}

// Rank 0 alone looks the patches up and draws the mosaic: the same image whatever R.
TEST_F(QueryRun, TheMosaicDoesNotDependOnTheNumberOfRanks) {
  const std::string patch = std::to_string(some_patches()[1]);
  std::string first;
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const std::string mosaic = *dir_ / fmt::format("mosaic-r{}.png", ranks);
    const auto outcomes = run_stage_ranks(
        ranks, query::run,
        config(*dir_ / "mosaic.json", {"--patch", patch, "-k", "4", "--mosaic", mosaic}));
    ASSERT_EQ(exit_codes(outcomes), std::vector<int>(ranks, 0)) << describe(outcomes);
    const std::string png = file_bytes(mosaic);
    ASSERT_GT(png.size(), 1000u) << ranks << " ranks";
    if (ranks == 1) {
      first = png;
    } else {
      EXPECT_TRUE(png == first) << "the mosaic at " << ranks << " ranks differs from R = 1";
    }
  }
}

// --mosaic-vote --mosaic OUT.png writes one picture at OUT.png (no per-query files), whose query
// tile is the slide's first mosaic patch: the same pixels as the query tile of a point query on
// that patch.
TEST_F(QueryRun, AMosaicVoteWritesOnePictureWithTheSlidesOwnPatch) {
  const std::string out = *dir_ / "vote-dir";
  fs::create_directories(out);
  const std::string vote = out + "/vote.png";
  const auto outcomes = run_stage_ranks(
      2, query::run,
      config(out + "/vote.json", {"--slide", "b", "--mosaic-vote", "-k", "3", "--mosaic", vote}));
  ASSERT_EQ(exit_codes(outcomes), std::vector<int>(2, 0)) << describe(outcomes);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(out)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"vote.json", "vote.png"}));
  const nlohmann::json report = nlohmann::json::parse(file_bytes(out + "/vote.json"));
  const auto& first = report.at("query").at("mosaic").at(0);
  const int64_t x = first.at("x").get<int64_t>(), y = first.at("y").get<int64_t>();
  const std::string point = out + "/point.png";
  ASSERT_EQ(exit_codes(run_stage_ranks(
                1, query::run,
                config(*dir_ / "point.json", {"--slide", "b", "--x", std::to_string(x + 1), "--y",
                                              std::to_string(y + 1), "-k", "1", "--mosaic",
                                              point}))),
            std::vector<int>{0});
  const Image8 a = read_png(vote), b = read_png(point);
  const query::MosaicLayout layout = query::mosaic_layout(224, 1, 1);
  size_t differing = 0;
  for (int row = 0; row < 224; ++row) {
    for (int col = 0; col < 224 * 3; ++col) {
      const size_t at_a = (static_cast<size_t>(layout.tile_y(0) + row) * a.width +
                           layout.tile_x(0)) * 3 + col;
      const size_t at_b = (static_cast<size_t>(layout.tile_y(0) + row) * b.width +
                           layout.tile_x(0)) * 3 + col;
      differing += a.pixels.at(at_a) != b.pixels.at(at_b);
    }
  }
  EXPECT_EQ(differing, 0u) << "the vote mosaic's query tile is not the slide's first mosaic patch";
}

// No query source at all, or two, are named as such (issue 28, item 13).
TEST_F(QueryRun, AMissingOrDoubleQueryIsNamedAsSuch) {
  try {
    config(*dir_ / "none.json", {});
    ADD_FAILURE() << "no error without a query";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()).rfind("no query given: give exactly one of --patch ID", 0), 0u)
        << e.what();
  }
  try {
    config(*dir_ / "two.json", {"--patch", "1", "--vectors", "v.npy"});
    ADD_FAILURE() << "no error with two queries";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()).rfind("2 queries given", 0), 0u) << e.what();
  }
}

// A bad filter and a bad query are reported together, the same on every rank (issue 28, item 13).
TEST_F(QueryRun, AFilterAndAQueryProblemAreReportedAtOnce) {
  for (int ranks = 1; ranks <= 2; ++ranks) {
    const auto outcomes = run_stage_ranks(
        ranks, query::run,
        config(*dir_ / "both.json", {"--slide", "nosuch", "--x", "1", "--y", "1", "--filter",
                                     "nocolumn = 1"}));
    expect_job_failed<InvalidInput>(outcomes, kExitBadInput, "nocolumn");
    expect_job_failed<InvalidInput>(outcomes, kExitBadInput, "nosuch");
  }
}

// Rank 0 resolves the queries for all: an unknown patch is the same InvalidInput on every rank.
TEST_F(QueryRun, AnUnknownPatchIsBadInputOnEveryRank) {
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const auto outcomes = run_stage_ranks(
        ranks, query::run, config(*dir_ / "unknown.json", {"--patch", "999999999999"}));
    expect_job_failed<InvalidInput>(outcomes, kExitBadInput, "unknown patch id 999999999999");
    for (const auto& o : outcomes) EXPECT_FALSE(threw<CommAborted>(o)) << describe(outcomes);
  }
  EXPECT_FALSE(path_exists(*dir_ / "unknown.json"));
}

// Every rank checks the filter against the columns itself.
TEST_F(QueryRun, AFilterOnAnUnknownColumnIsBadInputOnEveryRank) {
  const std::string patch = std::to_string(some_patches()[0]);
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const auto outcomes = run_stage_ranks(
        ranks, query::run,
        config(*dir_ / "filter.json", {"--patch", patch, "--filter", "organ = lung"}));
    expect_job_failed<InvalidInput>(outcomes, kExitBadInput, "organ");
    for (const auto& o : outcomes) EXPECT_FALSE(threw<CommAborted>(o)) << describe(outcomes);
  }
}

// A shard file gone: the rank that owns it fails with IoError, the others are released with its
// exit code, and no report is written.
TEST_F(QueryRun, AMissingShardFailsItsRankAndEndsTheOthers) {
  const std::string broken = index_dir("broken");
  fs::copy(index_dir(), broken, fs::copy_options::recursive);
  fs::remove(broken + "/gen-00000/shards/shard-00001/index.faiss");
  const std::string patch = std::to_string(some_patches()[0]);
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const std::string report = *dir_ / fmt::format("broken-r{}.json", ranks);
    const auto outcomes =
        run_stage_ranks(ranks, query::run, config(report, {"--patch", patch}, broken));
    expect_job_failed<IoError>(outcomes, kExitError, "shard-00001");
    // Shard 1 belongs to rank 1 mod R.
    EXPECT_TRUE(threw<IoError>(outcomes[1 % ranks])) << describe(outcomes);
    EXPECT_FALSE(path_exists(report));
  }
}

}  // namespace
}  // namespace tessera::inprocess
