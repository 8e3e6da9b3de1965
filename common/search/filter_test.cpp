#include "common/search/filter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/core/error.h"

namespace tessera::search {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Rows = std::vector<int>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Six patches of three slides. Slide-level columns are indirected through `slide_of`.
struct Table {
  std::vector<int32_t> slide_of{0, 0, 1, 1, 2, 2};
  std::vector<std::string> slide_id{"s0", "s1", "s2"};
  std::vector<std::string> patient_id{"P01", "P02", "P03"};
  std::vector<std::string> site{"lung", "colon", "Lung"};
  std::vector<int64_t> age{70, 55, 61};
  std::vector<double> weight{70.5, 55.0, kNaN};
  std::vector<int64_t> x{0, 500, 1000, 1500, 2000, 2500};
  std::vector<double> tissue{0.1, 0.5, 0.9, kNaN, 0.75, 1.0};
  std::vector<std::string> label{"tumor grade 2", "normal",     "it's",
                                 "tumor",         "say \"hi\"", "C:\\data"};

  std::vector<ColumnSchema> schema() const {
    return {{"slide_id", ColumnType::kString}, {"patient_id", ColumnType::kString},
            {"site", ColumnType::kString},     {"age", ColumnType::kInt},
            {"weight", ColumnType::kFloat},    {"x", ColumnType::kInt},
            {"tissue", ColumnType::kFloat},    {"label", ColumnType::kString}};
  }

  std::vector<ColumnView> views() const {
    const int32_t* idx = slide_of.data();
    std::vector<ColumnView> v(8);
    v[0] = {"slide_id", ColumnType::kString, nullptr, nullptr, slide_id.data(), idx, 3};
    v[1] = {"patient_id", ColumnType::kString, nullptr, nullptr, patient_id.data(), idx, 3};
    v[2] = {"site", ColumnType::kString, nullptr, nullptr, site.data(), idx, 3};
    v[3] = {"age", ColumnType::kInt, age.data(), nullptr, nullptr, idx, 3};
    v[4] = {"weight", ColumnType::kFloat, nullptr, weight.data(), nullptr, idx, 3};
    v[5] = {"x", ColumnType::kInt, x.data(), nullptr, nullptr, nullptr, 6};
    v[6] = {"tissue", ColumnType::kFloat, nullptr, tissue.data(), nullptr, nullptr, 6};
    v[7] = {"label", ColumnType::kString, nullptr, nullptr, label.data(), nullptr, 6};
    return v;
  }
};

// The rows of the test table that `expr` selects.
Rows match(const std::string& expr) {
  const Table t;
  const Filter f = Filter::parse(expr, t.schema());
  const std::vector<uint8_t> mask = f.evaluate(t.views(), 6);
  Rows rows;
  for (size_t i = 0; i < mask.size(); ++i) {
    EXPECT_LE(mask[i], 1);
    if (mask[i]) rows.push_back(static_cast<int>(i));
  }
  return rows;
}

// The message of the InvalidInput that parsing `expr` throws, or "" if none.
std::string error_of(const std::string& expr) {
  try {
    Filter::parse(expr, Table().schema());
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "";
}

TEST(FilterParse, PrecedenceAndBindsTighterThanOr) {
  // x = 0 or (x = 500 and tissue > 0.6): only row 0.
  EXPECT_EQ(match("x = 0 or x = 500 and tissue > 0.6"), Rows({0}));
  EXPECT_EQ(match("(x = 0 or x = 500) and tissue > 0.2"), Rows({1}));
  EXPECT_EQ(match("x = 2500 and tissue = 1 or x = 0"), Rows({0, 5}));
}

TEST(FilterParse, NotAndParentheses) {
  EXPECT_EQ(match("not x < 1000"), Rows({2, 3, 4, 5}));
  EXPECT_EQ(match("not (x < 1000 or x > 2000)"), Rows({2, 3, 4}));
  EXPECT_EQ(match("not not x = 0"), Rows({0}));
  EXPECT_EQ(match("((x = 0))"), Rows({0}));
  EXPECT_EQ(match("tissue >= 0.5 and not (x < 1000)"), Rows({2, 4, 5}));
  // not binds tighter than and.
  EXPECT_EQ(match("not x = 0 and x < 1000"), Rows({1}));
}

TEST(FilterParse, KeywordsAreCaseInsensitive) {
  EXPECT_EQ(match("x = 0 OR x = 500 AnD NOT tissue < 0.2"), Rows({0, 1}));
  EXPECT_EQ(match("slide_id NOT IN (s0, s1)"), Rows({4, 5}));
  EXPECT_EQ(match("slide_id In (s2)"), Rows({4, 5}));
}

TEST(FilterParse, InAndNotIn) {
  EXPECT_EQ(match("slide_id in (s0, s2)"), Rows({0, 1, 4, 5}));
  EXPECT_EQ(match("site not in (\"lung\", colon)"), Rows({4, 5}));
  EXPECT_EQ(match("x in (500, 2000, 7)"), Rows({1, 4}));
  EXPECT_EQ(match("x not in (500, 2000)"), Rows({0, 2, 3, 5}));
  EXPECT_EQ(match("x in (500.0, 1000.5)"), Rows({1}));
  EXPECT_EQ(match("tissue in (0.5, 1)"), Rows({1, 5}));
  EXPECT_EQ(match("tissue not in (0.5, 1)"), Rows({0, 2, 3, 4}));               // NaN is in no list
  EXPECT_EQ(match("age in (1,2,3,4,5,6,7,8,9,10,55,61)"), Rows({2, 3, 4, 5}));  // binary search
  EXPECT_EQ(match("label in ('a','b','c','d','e','f','g','h','i','normal')"), Rows({1}));
}

TEST(FilterParse, QuotesAndEscapes) {
  EXPECT_EQ(match("label = 'tumor grade 2' or age > 60"), Rows({0, 1, 4, 5}));
  EXPECT_EQ(match("label = \"tumor grade 2\""), Rows({0}));
  EXPECT_EQ(match("label = 'it''s'"), Rows({2}));
  EXPECT_EQ(match("label = 'it\\'s'"), Rows({2}));
  EXPECT_EQ(match("label = \"it's\""), Rows({2}));
  EXPECT_EQ(match("label = \"say \"\"hi\"\"\""), Rows({4}));
  EXPECT_EQ(match("label = \"say \\\"hi\\\"\""), Rows({4}));
  EXPECT_EQ(match("label = 'C:\\data'"), Rows({5}));    // other backslashes are kept
  EXPECT_EQ(match("label = 'C:\\\\data'"), Rows({5}));  // \\ is one backslash
  EXPECT_EQ(match("label = 'and'"), Rows({}));          // quoted keywords are values
  EXPECT_EQ(match("x = '500'"), Rows({1}));             // quoted numbers work for numbers
}

TEST(FilterEval, StringOperators) {
  EXPECT_EQ(match("patient_id != P01 and site = lung"), Rows({}));
  EXPECT_EQ(match("patient_id != P01"), Rows({2, 3, 4, 5}));
  EXPECT_EQ(match("site == lung"), Rows({0, 1}));
  EXPECT_EQ(match("site <> lung"), Rows({2, 3, 4, 5}));
  // Byte order: "Lung" < "colon" < "lung".
  EXPECT_EQ(match("site < colon"), Rows({4, 5}));
  EXPECT_EQ(match("site <= colon"), Rows({2, 3, 4, 5}));
  EXPECT_EQ(match("site > colon"), Rows({0, 1}));
  EXPECT_EQ(match("site >= colon"), Rows({0, 1, 2, 3}));
  EXPECT_EQ(match("label > tumor"), Rows({0}));
  EXPECT_EQ(match("label >= tumor"), Rows({0, 3}));
}

TEST(FilterEval, NumberLiteralOnStringColumnComparesText) {
  Table t;
  t.patient_id = {"007", "7", "10"};
  const Filter f = Filter::parse("patient_id = 007", t.schema());
  EXPECT_THAT(f.evaluate(t.views(), 6), ElementsAre(1, 1, 0, 0, 0, 0));
  // Text order, asked for by quoting: "10" < "7".
  const Filter g = Filter::parse("patient_id < '7'", t.schema());
  EXPECT_THAT(g.evaluate(t.views(), 6), ElementsAre(1, 1, 0, 0, 1, 1));
  EXPECT_THAT(f.evaluate(t.views(), 6), ElementsAre(1, 1, 0, 0, 0, 0));
  EXPECT_EQ(match("patient_id in (7, P03)"), Rows({4, 5}));
}

TEST(FilterEval, IntOperators) {
  EXPECT_EQ(match("x = 1000"), Rows({2}));
  EXPECT_EQ(match("x == 1000"), Rows({2}));
  EXPECT_EQ(match("x != 1000"), Rows({0, 1, 3, 4, 5}));
  EXPECT_EQ(match("x <> 1000"), Rows({0, 1, 3, 4, 5}));
  EXPECT_EQ(match("x < 1000"), Rows({0, 1}));
  EXPECT_EQ(match("x <= 1000"), Rows({0, 1, 2}));
  EXPECT_EQ(match("x > 1000"), Rows({3, 4, 5}));
  EXPECT_EQ(match("x >= 1000"), Rows({2, 3, 4, 5}));
  EXPECT_EQ(match("x>=1000"), Rows({2, 3, 4, 5}));
  EXPECT_EQ(match("x > -1"), Rows({0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(match("x>-1"), Rows({0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(match("x < +1"), Rows({0}));
  EXPECT_EQ(match("x <= 1e3"), Rows({0, 1, 2}));
}

TEST(FilterEval, IntVersusFloatComparesNumerically) {
  EXPECT_EQ(match("x < 999.5"), Rows({0, 1}));
  EXPECT_EQ(match("x = 1000.0"), Rows({2}));
  EXPECT_EQ(match("x = 1000.5"), Rows({}));
  EXPECT_EQ(match("x != 1000.5"), Rows({0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(match("tissue = 1"), Rows({5}));
  EXPECT_EQ(match("tissue > 0"), Rows({0, 1, 2, 4, 5}));
  // An integer literal beyond int64 still compares as a number.
  EXPECT_EQ(match("x < 99999999999999999999"), Rows({0, 1, 2, 3, 4, 5}));
}

TEST(FilterEval, FloatOperatorsAndNaN) {
  EXPECT_EQ(match("tissue = 0.5"), Rows({1}));
  EXPECT_EQ(match("tissue != 0.5"), Rows({0, 2, 3, 4, 5}));  // NaN is unequal
  EXPECT_EQ(match("tissue < 0.5"), Rows({0}));
  EXPECT_EQ(match("tissue <= 0.5"), Rows({0, 1}));
  EXPECT_EQ(match("tissue > .75"), Rows({2, 5}));
  EXPECT_EQ(match("tissue >= 7.5e-1"), Rows({2, 4, 5}));
  EXPECT_EQ(match("not tissue >= 0"), Rows({3}));
}

TEST(FilterEval, IndirectedColumns) {
  EXPECT_EQ(match("age > 60"), Rows({0, 1, 4, 5}));
  EXPECT_EQ(match("age = 55.0"), Rows({2, 3}));
  EXPECT_EQ(match("weight < 60"), Rows({2, 3}));
  EXPECT_EQ(match("weight != 60"), Rows({0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(match("slide_id = s1 and x > 1000"), Rows({3}));
  EXPECT_EQ(match("slide_id = s1 or site = Lung"), Rows({2, 3, 4, 5}));
}

TEST(FilterEval, ColumnsUsedAndText) {
  const Filter f = Filter::parse("x > 1 and (site = a or x < 3) and age in (1)", Table().schema());
  EXPECT_THAT(f.columns_used(), ElementsAre("x", "site", "age"));
  EXPECT_EQ(f.text(), "x > 1 and (site = a or x < 3) and age in (1)");
  const Filter copy = f;
  EXPECT_EQ(copy.text(), f.text());
}

TEST(FilterEval, ZeroRows) {
  const Filter f = Filter::parse("x > 1", Table().schema());
  ColumnView x{"x", ColumnType::kInt};
  EXPECT_TRUE(f.evaluate({x}, 0).empty());
}

TEST(FilterEval, RejectsMismatchedViews) {
  const Table t;
  const Filter f = Filter::parse("x > 1 and site = lung", t.schema());
  std::vector<ColumnView> views = t.views();
  views.erase(views.begin() + 5);  // x
  EXPECT_THROW(f.evaluate(views, 6), InvalidInput);

  views = t.views();
  views[5].type = ColumnType::kFloat;
  EXPECT_THROW(f.evaluate(views, 6), InvalidInput);

  views = t.views();
  views[5].values = 5;  // fewer values than rows, no index
  EXPECT_THROW(f.evaluate(views, 6), InvalidInput);

  views = t.views();
  views[5].ints = nullptr;
  EXPECT_THROW(f.evaluate(views, 6), InvalidInput);

  std::vector<int32_t> bad_index{0, 1, 2, 3, 0, 1};
  views = t.views();
  views[2].index = bad_index.data();
  try {
    f.evaluate(views, 6);
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("column 'site': row 3 has index 3"));
  }
}

// Checks that `expr` fails at 1-based `position` with `what`, and that the message carries the
// expression and a caret under the position.
void expect_error(const std::string& expr, int position, const std::string& what) {
  const std::string message = error_of(expr);
  SCOPED_TRACE(expr);
  ASSERT_FALSE(message.empty()) << "no error";
  EXPECT_THAT(message,
              HasSubstr("filter \"" + expr + "\": at position " + std::to_string(position) + ": "));
  EXPECT_THAT(message, HasSubstr(what));
  EXPECT_THAT(message, HasSubstr("\n  " + expr + "\n  " + std::string(position - 1, ' ') + "^"));
}

TEST(FilterErrors, ExampleMessageIsExact) {
  EXPECT_EQ(error_of("site = = lung"),
            "filter \"site = = lung\": at position 8: expected a value after '=', got '='\n"
            "  site = = lung\n"
            "         ^");
}

TEST(FilterErrors, EachErrorNamesItsPosition) {
  expect_error("", 1, "the filter is empty");
  expect_error("   ", 1, "the filter is empty");
  expect_error("site = = lung", 8, "expected a value after '='");
  expect_error("site =", 7, "expected a value after '=', got the end of the filter");
  expect_error("site = in", 8, "quote 'in' to use it as a value");
  expect_error("(x = 1", 7, "missing ')' to close the '(' at position 1");
  expect_error("((x = 1) or x = 2", 18, "missing ')' to close the '(' at position 1");
  expect_error("x = 1)", 6, "unmatched ')'");
  expect_error("(x = 1 x = 2)", 8, "unexpected 'x'; expected 'and', 'or' or ')'");
  expect_error("label = tumor grade 2", 15,
               "unexpected 'grade'; expected 'and', 'or' or the end of the filter (quote values");
  expect_error("x = 1 and", 10, "expected a column name or '(', got the end of the filter");
  expect_error("= lung", 1, "expected a column name or '(', got '='");
  expect_error("and x = 1", 1, "expected a column name or '(', got 'and'");
  expect_error("'site' = lung", 1, "expected a column name or '(', got the quoted string 'site'");
  expect_error("site lung", 6, "expected an operator (=, ==, !=, <>, <, <=, >, >=, in, not in)");
  expect_error("site", 5, "after column 'site', got the end of the filter");
  expect_error("site ! lung", 6, "unexpected character '!'; did you mean '!='?");
  expect_error("site = lu$ng", 10, "unexpected character '$'");
  expect_error("label = 'open", 9, "unterminated string: no closing '");
  expect_error("label = \"open\\\"", 9, "unterminated string: no closing \"");
  expect_error("slide_id in ()", 14, "empty list after 'in'");
  expect_error("slide_id in s0", 13, "expected '(' after 'in'");
  expect_error("slide_id not s0", 14, "expected 'in' after 'not'");
  expect_error("slide_id in (s0 s1)", 17, "expected ',' or ')' in the list, got 's1'");
  expect_error("slide_id in (s0,)", 17, "expected a value after ',', got ')'");
  expect_error("slide_id in (s0, s1", 20, "missing ')' to close the list at position 13");
  expect_error("x > 1e5x", 5, "bad number '1e5x' for int column 'x'");
  expect_error("tissue < 0.5.1", 10, "bad number '0.5.1' for float column 'tissue'");
  expect_error("x < 1e999", 5, "number 1e999 is out of range");
  expect_error("x in (1, 2, abc)", 13, "column 'x' is int but 'abc' is not a number");
}

TEST(FilterErrors, NumericColumnWithWordIsAnError) {
  expect_error("x = lung", 5, "column 'x' is int but 'lung' is not a number");
  expect_error("tissue >= high", 11, "column 'tissue' is float but 'high' is not a number");
  expect_error("age = 'sixty'", 7,
               "column 'age' is int but the quoted string 'sixty' is not a number");
  expect_error("tissue = inf", 10, "column 'tissue' is float but 'inf' is not a number");
}

// Issue 21, case 5: `site > 3` on a string column matched every row by byte order; refused like
// a word against a numeric column.
TEST(FilterErrors, UnquotedNumberOrderingAStringColumnIsAnError) {
  expect_error("site > 3", 8, "column 'site' is string but 3 is a number");
  expect_error("patient_id <= -1.5", 15, "quote it ('-1.5') to compare text");
  expect_error("x = 0 or label >= 2e3", 19, "column 'label' is string but 2e3 is a number");
  EXPECT_EQ(match("site > '3'"), Rows({0, 1, 2, 3, 4, 5}));
}

// Issue 21, case 8: 20,000 parentheses crashed query with SIGSEGV.
TEST(FilterErrors, NestingDeeperThanTheLimitIsAnError) {
  const std::string deep = std::string(20000, '(') + "x = 0" + std::string(20000, ')');
  EXPECT_THAT(error_of(deep), HasSubstr("nests deeper than 64 levels"));
  std::string nots;
  for (int i = 0; i < 20000; ++i) nots += "not ";
  EXPECT_THAT(error_of(nots + "x = 0"), HasSubstr("nests deeper than 64 levels"));
  const size_t limit = 64;  // kMaxFilterDepth
  EXPECT_EQ(match(std::string(limit, '(') + "x = 0" + std::string(limit, ')')), Rows({0}));
  EXPECT_EQ(match(std::string(limit / 2, '(') + "not not x = 0 or x = 500" +
                  std::string(limit / 2, ')')),
            Rows({0, 1}));
  expect_error(std::string(limit + 1, '(') + "x = 0" + std::string(limit + 1, ')'), limit + 1,
               "nests deeper than 64 levels of '(' and 'not'");
}

TEST(FilterErrors, UnknownColumnListsTheColumns) {
  expect_error("site = lung and sitee = lung", 17,
               "unknown column 'sitee' (columns: slide_id, patient_id, site, age, weight, x, "
               "tissue, label)");
  EXPECT_THAT(error_of("Site = lung"), HasSubstr("unknown column 'Site'"));  // names are exact
}

// Issue 21, case 22: a non-ASCII character is shown whole, and positions count characters.
TEST(FilterErrors, NonAsciiCharactersAreShownWholeAndCountedOnce) {
  expect_error("sit\xc3\xa9 = lung", 4,
               "unexpected character '\xc3\xa9' (column names and unquoted values are");
  expect_error("site = 'l\xc3\xa9' $", 13, "unexpected character '$'");
  expect_error("site = \xe2\x82\xac", 8, "unexpected character '\xe2\x82\xac'");
  expect_error("site = \xe9", 8, "byte 0xe9 is not valid UTF-8");
}

TEST(FilterErrors, CaretKeepsTabsAligned) {
  const std::string message = error_of("x =\t= 1");
  EXPECT_THAT(message, HasSubstr("at position 5"));
  EXPECT_THAT(message, HasSubstr("\n  x =\t= 1\n     \t^"));
}

// The number rule and the type inference are common/core/value_type_test.cpp's.

TEST(FilterEval, MillionRowsAgreeWithDirectComputation) {
  constexpr int64_t kRows = 1000000;
  constexpr int kSlides = 1000;
  std::vector<int64_t> x(kRows);
  std::vector<double> tissue(kRows);
  std::vector<int32_t> slide_of(kRows);
  for (int64_t i = 0; i < kRows; ++i) {
    x[i] = (i * 7919) % 100000;
    tissue[i] = static_cast<double>((i * 31) % 1000) / 1000.0;
    slide_of[i] = static_cast<int32_t>(i / (kRows / kSlides));
  }
  std::vector<std::string> site(kSlides);
  std::vector<std::string> slide_id(kSlides);
  for (int s = 0; s < kSlides; ++s) {
    site[s] = s % 3 == 0 ? "lung" : s % 3 == 1 ? "colon" : "breast";
    slide_id[s] = "slide_" + std::to_string(s);
  }
  const std::vector<ColumnSchema> schema{{"x", ColumnType::kInt},
                                         {"tissue", ColumnType::kFloat},
                                         {"site", ColumnType::kString},
                                         {"slide_id", ColumnType::kString}};
  std::vector<ColumnView> views(4);
  views[0] = {"x", ColumnType::kInt, x.data(), nullptr, nullptr, nullptr, kRows};
  views[1] = {"tissue", ColumnType::kFloat, nullptr, tissue.data(), nullptr, nullptr, kRows};
  views[2] = {"site", ColumnType::kString, nullptr, nullptr, site.data(), slide_of.data(), kSlides};
  views[3] = {"slide_id",      ColumnType::kString, nullptr, nullptr,
              slide_id.data(), slide_of.data(),     kSlides};
  const Filter f = Filter::parse(
      "tissue >= 0.5 and not (x < 1000) and site != colon or slide_id in (slide_7, slide_8)",
      schema);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<uint8_t> mask = f.evaluate(views, kRows);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("evaluate_seconds", std::to_string(seconds));
  ASSERT_EQ(mask.size(), static_cast<size_t>(kRows));
  int64_t matches = 0;
  for (int64_t i = 0; i < kRows; ++i) {
    const int s = slide_of[i];
    const bool expected =
        (tissue[i] >= 0.5 && !(x[i] < 1000) && site[s] != "colon") || s == 7 || s == 8;
    ASSERT_EQ(mask[i], expected ? 1 : 0) << "row " << i;
    matches += mask[i];
  }
  EXPECT_GT(matches, 0);
  EXPECT_LT(matches, kRows);
}

}  // namespace
}  // namespace tessera::search
