#include "stages/aggregate/pooling.h"

#include <gtest/gtest.h>

#include "common/core/error.h"

namespace tessera::aggregate {
namespace {

TEST(Pooling, MeanMaxAndBoth) {
  const std::vector<float> rows = {1, -2, 3, 4, 5, -6};  // 3 rows of 2
  Pooler mean("mean", 2), max("max", 2), both("mean+max", 2);
  for (Pooler* p : {&mean, &max, &both}) {
    p->add(rows.data(), 1);
    p->add(rows.data() + 2, 2);
    EXPECT_EQ(p->rows(), 3);
  }
  const float third = static_cast<float>(-4.0 / 3.0);  // (-2 + 4 - 6) / 3, rounded once
  EXPECT_EQ(mean.result(), (std::vector<float>{3, third}));
  EXPECT_EQ(max.result(), (std::vector<float>{5, 4}));
  EXPECT_EQ(both.result(), (std::vector<float>{3, third, 5, 4}));
  EXPECT_EQ(pooled_dim("mean+max", 7), 14);
}

TEST(Pooling, SameResultWhateverTheChunking) {
  std::vector<float> rows(1000 * 3);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>((i * 7919) % 1009) / 3.0f;
  Pooler whole("mean", 3), pieces("mean", 3);
  whole.add(rows.data(), 1000);
  for (int r = 0; r < 1000; r += 7) pieces.add(rows.data() + r * 3, std::min(7, 1000 - r));
  EXPECT_EQ(whole.result(), pieces.result());
}

TEST(Pooling, RefusesUnknownNamesAndNoRows) {
  EXPECT_THROW(Pooler("median", 2), InvalidInput);
  EXPECT_THROW(Pooler("mean", 2).result(), Error);
}

}  // namespace
}  // namespace tessera::aggregate
