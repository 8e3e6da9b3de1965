#include "common/core/csv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera {
namespace {

using ::testing::ElementsAre;

std::vector<CsvRecord> read(const std::string& text) {
  std::vector<std::string> problems;
  auto records = read_csv(text, problems);
  EXPECT_THAT(problems, ElementsAre()) << text;
  return records;
}

TEST(CsvRead, SplitsRecordsAndFieldsKeepingBlanks) {
  const auto r = read("a,b,c\n1, two ,\n");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].line, 1);
  EXPECT_THAT(r[0].fields, ElementsAre("a", "b", "c"));
  EXPECT_EQ(r[1].line, 2);
  EXPECT_THAT(r[1].fields, ElementsAre("1", " two ", ""));
}

TEST(CsvRead, QuotedFieldsHoldCommasQuotesAndLineBreaks) {
  const auto r = read("id,note\nx,\"a, \"\"b\"\"\nc\"\ny,z\n");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_THAT(r[1].fields, ElementsAre("x", "a, \"b\"\nc"));
  EXPECT_EQ(r[2].line, 4);  // the quoted line break counts
  EXPECT_THAT(r[2].fields, ElementsAre("y", "z"));
}

TEST(CsvRead, CrlfBlankLinesAndNoFinalNewline) {
  const auto r = read("a,b\r\n\r\n  \t \r\n1,2");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_THAT(r[0].fields, ElementsAre("a", "b"));
  EXPECT_EQ(r[1].line, 4);
  EXPECT_THAT(r[1].fields, ElementsAre("1", "2"));
  EXPECT_TRUE(read("").empty());
  // A line of one comma is a record of two empty fields, a quoted empty field is a record.
  EXPECT_THAT(read(",\n")[0].fields, ElementsAre("", ""));
  EXPECT_THAT(read("\"\"\n")[0].fields, ElementsAre(""));
}

TEST(CsvRead, QuotesInsideAnUnquotedFieldOpenQuoting) {
  EXPECT_THAT(read("ab\"c,d\"e,f\n")[0].fields, ElementsAre("abc,de", "f"));
}

TEST(CsvRead, AnUnterminatedQuoteIsAProblemNamingItsLine) {
  std::vector<std::string> problems;
  const auto r = read_csv("a,b\n1,\"open\n2,3\n", problems);
  EXPECT_THAT(problems, ElementsAre("line 2: unterminated quoted field"));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_THAT(r[1].fields, ElementsAre("1", "open\n2,3\n"));
}

TEST(CsvWrite, QuotesOnlyWhatAReaderWouldSplitOrTrim) {
  EXPECT_EQ(csv_field("lung"), "lung");
  EXPECT_EQ(csv_field(""), "");
  EXPECT_EQ(csv_field("in side"), "in side");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_field("cr\r"), "\"cr\r\"");
  EXPECT_EQ(csv_field(" lead"), "\" lead\"");
  EXPECT_EQ(csv_field("trail\t"), "\"trail\t\"");
  EXPECT_EQ(csv_record({"a", "b,c", ""}), "a,\"b,c\",\n");
  EXPECT_EQ(csv_record({}), "\n");
}

TEST(Csv, WhatTheWriterWritesTheReaderReadsBack) {
  const std::vector<std::string> fields = {"plain", "",   " blank ", "a,b", "q\"q",
                                           "multi\r\nline", ",", "\"", "\t"};
  const auto r = read(csv_record({"h"}) + csv_record(fields) + csv_record(fields));
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1].fields, fields);
  EXPECT_EQ(r[2].fields, fields);
  EXPECT_EQ(r[2].line, 4);
}

}  // namespace
}  // namespace tessera
