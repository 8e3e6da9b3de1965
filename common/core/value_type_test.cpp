#include "common/core/value_type.h"

#include <gtest/gtest.h>

#include <limits>

namespace tessera {
namespace {

TEST(DecimalNumber, Integers) {
  EXPECT_EQ(parse_int64("42"), 42);
  EXPECT_EQ(parse_int64("-42"), -42);
  EXPECT_EQ(parse_int64("+42"), 42);
  EXPECT_EQ(parse_int64("007"), 7);
  EXPECT_EQ(parse_int64("9223372036854775807"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(parse_int64("-9223372036854775808"), std::numeric_limits<int64_t>::min());
  EXPECT_FALSE(parse_int64("9223372036854775808"));
  EXPECT_FALSE(parse_int64("1.0"));
  EXPECT_FALSE(parse_int64("1e3"));
  EXPECT_FALSE(parse_int64(" 1"));
  EXPECT_FALSE(parse_int64("1 "));
  EXPECT_FALSE(parse_int64(""));
  EXPECT_FALSE(parse_int64("-"));
  EXPECT_FALSE(parse_int64("0x10"));
  EXPECT_FALSE(parse_int64("1_000"));
}

TEST(DecimalNumber, Doubles) {
  EXPECT_EQ(parse_double("1.5"), 1.5);
  EXPECT_EQ(parse_double(".5"), 0.5);
  EXPECT_EQ(parse_double("+.5"), 0.5);
  EXPECT_EQ(parse_double("5."), 5.0);
  EXPECT_EQ(parse_double("-2.5e-3"), -2.5e-3);
  EXPECT_EQ(parse_double("1E+05"), 1e5);
  EXPECT_EQ(parse_double("7"), 7.0);
  EXPECT_EQ(parse_double("9223372036854775808"), 9223372036854775808.0);
  EXPECT_EQ(parse_double("4e-320"), 4e-320);  // subnormal, still a finite number
  EXPECT_FALSE(parse_double("."));
  EXPECT_FALSE(parse_double("e5"));
  EXPECT_FALSE(parse_double("1e"));
  EXPECT_FALSE(parse_double("1e+"));
  EXPECT_FALSE(parse_double("inf"));
  EXPECT_FALSE(parse_double("nan"));
  EXPECT_FALSE(parse_double("1e999"));
  EXPECT_FALSE(parse_double("1e-400"));  // underflows to zero
  EXPECT_FALSE(parse_double("1.5 "));
  EXPECT_FALSE(parse_double(" 1.5"));
  EXPECT_FALSE(parse_double("0x1A"));
  EXPECT_FALSE(parse_double("0x1p3"));
  EXPECT_FALSE(parse_double("1,5"));
  EXPECT_TRUE(is_decimal_number("1e999"));  // the syntax, whatever the value
  EXPECT_FALSE(is_decimal_number("lung"));
}

TEST(ValueType, TheNarrowestTypeEveryNonEmptyValueFits) {
  EXPECT_EQ(infer_value_type({"1", "", "-3", "+4"}), ValueType::kInt);
  EXPECT_EQ(infer_value_type({"007"}), ValueType::kInt);
  EXPECT_EQ(infer_value_type({"1", "2.5", ""}), ValueType::kFloat);
  EXPECT_EQ(infer_value_type({"1e3", "2"}), ValueType::kFloat);
  EXPECT_EQ(infer_value_type({"2", "1e3"}), ValueType::kFloat);
  EXPECT_EQ(infer_value_type({"9223372036854775808"}), ValueType::kFloat);
  EXPECT_EQ(infer_value_type({"1", "lung"}), ValueType::kString);
  EXPECT_EQ(infer_value_type({"lung", "1"}), ValueType::kString);
  EXPECT_EQ(infer_value_type({"1.5", "lung"}), ValueType::kString);
  EXPECT_EQ(infer_value_type({"1", "nan"}), ValueType::kString);
  EXPECT_EQ(infer_value_type({"inf"}), ValueType::kString);
  EXPECT_EQ(infer_value_type({"0x1A"}), ValueType::kString);
  EXPECT_EQ(infer_value_type({"", ""}), ValueType::kString);
  EXPECT_EQ(infer_value_type({}), ValueType::kString);
}

}  // namespace
}  // namespace tessera
