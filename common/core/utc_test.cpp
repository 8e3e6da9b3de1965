#include "common/core/utc.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "common/core/fs.h"

namespace tessera {
namespace {

TEST(UtcTest, ParsesWhatTesseraWrites) {
  auto a = parse_utc_timestamp("2026-11-30T10:00:00.000Z");
  auto b = parse_utc_timestamp("2026-11-30T11:02:03.5Z");
  ASSERT_TRUE(a && b);
  EXPECT_DOUBLE_EQ(*b - *a, 3723.5);
  EXPECT_DOUBLE_EQ(*parse_utc_timestamp("1970-01-02T00:00:00Z"), 86400.0);
  EXPECT_DOUBLE_EQ(*parse_utc_timestamp("2000-03-01T00:00:00Z") -
                       *parse_utc_timestamp("2000-02-28T00:00:00Z"),
                   2 * 86400.0);  // a leap day
}

TEST(UtcTest, RefusesAnythingElse) {
  EXPECT_FALSE(parse_utc_timestamp(""));
  EXPECT_FALSE(parse_utc_timestamp("2026-11-30 10:00:00"));
  EXPECT_FALSE(parse_utc_timestamp("2026-11-30T10:00:00.000"));  // no zone
  EXPECT_FALSE(parse_utc_timestamp("2026-11-30T10:00:00.Z"));    // a point without digits
  EXPECT_FALSE(parse_utc_timestamp("2026-11-30T10:00:00+01:00"));
  EXPECT_FALSE(parse_utc_timestamp("2026-11-30T10:00:00.000Zjunk"));
}

TEST(UtcTest, ReadsUtcTimestamp) {
  const auto seconds = [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const double before = std::floor(seconds() * 1000) / 1000;  // the stamp keeps milliseconds
  const auto parsed = parse_utc_timestamp(utc_timestamp());
  const double after = seconds();
  ASSERT_TRUE(parsed);
  EXPECT_GE(*parsed, before - 1e-6);
  EXPECT_LE(*parsed, after + 1e-6);
}

}  // namespace
}  // namespace tessera
