#include "stages/embed/infer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tessera::embed {
namespace {

TEST(CheckFinite, NamesOffendingPatchIds) {
  std::vector<float> v = {1, 2, 3, NAN, 5, 6, 7, INFINITY};
  std::vector<int64_t> ids = {10, 11, 12, 13};
  std::string msg = check_finite(v.data(), 4, 2, ids.data());
  EXPECT_NE(msg.find("2 embedding(s)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("11, 13"), std::string::npos) << msg;
  EXPECT_EQ(check_finite(v.data(), 1, 2, ids.data()), "");
}

}  // namespace
}  // namespace tessera::embed
