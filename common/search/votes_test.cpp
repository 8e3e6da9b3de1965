#include "common/search/votes.h"

#include <gtest/gtest.h>

#include <set>

namespace tessera::search {
namespace {

TEST(Mosaic, SizeFollowsTheRule) {
  MosaicRule rule;  // 5 %, at least 8, at most 256
  EXPECT_EQ(mosaic_size(0, rule), 0);
  EXPECT_EQ(mosaic_size(5, rule), 5);
  EXPECT_EQ(mosaic_size(100, rule), 8);
  EXPECT_EQ(mosaic_size(1000, rule), 50);
  EXPECT_EQ(mosaic_size(1001, rule), 51);  // ceil
  EXPECT_EQ(mosaic_size(100000, rule), 256);
}

TEST(Mosaic, OnePatchPerClusterDeterministically) {
  // Four well-separated blobs of 50 patches each in 2-D: a mosaic of 4 takes one from each.
  std::vector<float> x;
  const float centres[4][2] = {{0, 0}, {10, 0}, {0, 10}, {10, 10}};
  for (int i = 0; i < 200; ++i) {
    const int b = i % 4;
    x.push_back(centres[b][0] + 0.01f * static_cast<float>((i * 37) % 11));
    x.push_back(centres[b][1] + 0.01f * static_cast<float>((i * 53) % 13));
  }
  MosaicRule rule;
  rule.min_size = 4;
  rule.percent = 1;
  const auto mosaic = pick_mosaic(x, 200, 2, rule);
  ASSERT_EQ(mosaic.size(), 4u);
  std::set<int> blobs;
  for (const int64_t r : mosaic) blobs.insert(static_cast<int>(r % 4));
  EXPECT_EQ(blobs.size(), 4u);
  EXPECT_EQ(pick_mosaic(x, 200, 2, rule), mosaic);
  // Identical patches: fewer distinct centres than asked.
  const std::vector<float> same(20, 1.0f);
  EXPECT_EQ(pick_mosaic(same, 10, 2, rule).size(), 1u);
}

VectorSlideTable table() {
  VectorSlideTable t;
  t.slide_id = {"a", "b", "c", "d"};
  t.patient_id = {"p1", "p1", "p2", ""};
  return t;
}

Hit hit(int32_t slide, float score) {
  Hit h;
  h.slide = slide;
  h.score = score;
  return h;
}

TEST(Votes, OneVotePerMosaicPatchAndTiesByBestScore) {
  const std::vector<std::vector<Hit>> hits = {
      {hit(0, 0.9f), hit(0, 0.8f), hit(2, 0.7f)},  // a once (not twice), c
      {hit(2, 0.95f), hit(1, 0.6f)},
      {hit(3, 0.5f)},
  };
  const auto slides = vote_slides(hits, table(), true);
  ASSERT_EQ(slides.size(), 4u);
  EXPECT_EQ(slides[0].id, "c");
  EXPECT_EQ(slides[0].votes, 2);
  EXPECT_FLOAT_EQ(slides[0].best_score, 0.95f);
  EXPECT_EQ(slides[1].id, "a");  // 1 vote, best 0.9
  EXPECT_EQ(slides[1].votes, 1);
  EXPECT_EQ(slides[2].id, "b");  // 1 vote, 0.6
  EXPECT_EQ(slides[3].id, "d");
  EXPECT_EQ(slides[1].patient_id, "p1");

  const auto patients = vote_patients(hits, table(), true);
  ASSERT_EQ(patients.size(), 3u);
  EXPECT_EQ(patients[0].id, "p2");  // 2 votes (c twice), best 0.95
  EXPECT_EQ(patients[0].votes, 2);
  EXPECT_EQ(patients[1].id, "p1");  // 2 votes (a, then b), best 0.9: the tie goes to p2
  EXPECT_EQ(patients[1].votes, 2);
  EXPECT_EQ(patients[2].id, "d");   // a slide without patient is its own patient
}

TEST(Votes, LowerIsBetterForL2) {
  const std::vector<std::vector<Hit>> hits = {{hit(0, 2.0f)}, {hit(1, 1.0f)}};
  const auto slides = vote_slides(hits, table(), false);
  EXPECT_EQ(slides[0].id, "b");
}

}  // namespace
}  // namespace tessera::search
