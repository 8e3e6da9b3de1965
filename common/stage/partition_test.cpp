#include "common/stage/partition.h"

#include <gtest/gtest.h>

#include "common/core/error.h"

namespace tessera {
namespace {

std::vector<Partition::Spec> all_specs() {
  std::vector<Partition::Spec> specs;
  for (const char* s : {"cyclic", "block-cyclic:2", "block-cyclic:3", "block-cyclic:64",
                        "contiguous"}) {
    specs.push_back(Partition::Spec::parse(s, "partition"));
  }
  return specs;
}

// Every property checked against a brute-force walk over the items, for many sizes.
TEST(Partition, AgreesWithBruteForceForManySizes) {
  for (const auto& spec : all_specs()) {
    for (int64_t total : {0, 1, 2, 5, 7, 63, 64, 65, 200}) {
      for (int size = 1; size <= 9; ++size) {
        Partition p(spec, total, size);
        std::vector<std::vector<int64_t>> owned(static_cast<size_t>(size));
        for (int64_t i = 0; i < total; ++i) {
          const int r = p.owner(i);
          ASSERT_GE(r, 0);
          ASSERT_LT(r, size);
          ASSERT_EQ(p.local_index(i), static_cast<int64_t>(owned[r].size()))
              << spec.to_string() << " total " << total << " size " << size << " i " << i;
          owned[r].push_back(i);
        }
        int64_t sum = 0;
        for (int r = 0; r < size; ++r) {
          ASSERT_EQ(p.count(r), static_cast<int64_t>(owned[r].size()));
          sum += p.count(r);
          for (size_t k = 0; k < owned[r].size(); ++k) {
            ASSERT_EQ(p.global_index(r, static_cast<int64_t>(k)), owned[r][k]);
          }
          for (int64_t begin = 0; begin <= total; begin += 3) {
            for (int64_t end = begin; end <= total; end += 5) {
              std::vector<int64_t> expected;
              for (int64_t i : owned[r]) {
                if (i >= begin && i < end) expected.push_back(i);
              }
              std::vector<int64_t> got;
              for (const auto& run : p.runs(r, begin, end)) {
                ASSERT_GT(run.count, 0);
                for (int64_t j = 0; j < run.count; ++j) {
                  got.push_back(run.first + j);
                  ASSERT_EQ(p.local_index(run.first + j), run.local + j);
                }
              }
              ASSERT_EQ(got, expected) << spec.to_string() << " [" << begin << "," << end << ")";
            }
          }
        }
        ASSERT_EQ(sum, total);
      }
    }
  }
}

// Partition::cyclic (block-cyclic with blocks of one) deals item i to rank i mod R. It is not the
// stages' default: patchgen and embed default to --partition contiguous (their config tests).
TEST(Partition, CyclicDealsItemIToRankIModR) {
  Partition p = Partition::cyclic(10, 3);
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(p.owner(i), i % 3) << i;
  EXPECT_EQ(p.count(0), 4);
  EXPECT_EQ(p.count(1), 3);
  EXPECT_EQ(p.count(2), 3);
  EXPECT_EQ(p.global_index(1, 2), 7);
  EXPECT_EQ(p.spec().to_string(), "cyclic");
}

TEST(Partition, ContiguousGivesTheFirstRanksOneMore) {
  Partition p(Partition::Spec::parse("contiguous", "x"), 10, 4);
  EXPECT_EQ(p.count(0), 3);
  EXPECT_EQ(p.count(1), 3);
  EXPECT_EQ(p.count(2), 2);
  EXPECT_EQ(p.global_index(2, 0), 6);
  ASSERT_EQ(p.runs(1).size(), 1u);
  EXPECT_EQ(p.runs(1)[0].first, 3);
}

TEST(Partition, SpecSpellingsAreCanonical) {
  EXPECT_EQ(Partition::Spec::parse("block-cyclic:1", "p"), Partition::Spec::parse("cyclic", "p"));
  EXPECT_EQ(Partition::Spec::parse("block-cyclic:8", "p").to_string(), "block-cyclic:8");
  for (const char* bad : {"", "cyclic:2", "block-cyclic:", "block-cyclic:0", "block-cyclic:x",
                          "block-cyclic:3x", "blocks"}) {
    EXPECT_THROW(Partition::Spec::parse(bad, "partition"), InvalidInput) << bad;
  }
}

TEST(Partition, InvalidSizesAreRefused) {
  EXPECT_THROW(Partition::cyclic(-1, 2), Error);
  EXPECT_THROW(Partition::cyclic(5, 0), Error);
}

}  // namespace
}  // namespace tessera
