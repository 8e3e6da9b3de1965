#include "common/core/utf8.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(Utf8, SequenceLengthsOfValidText) {
  const std::string text = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x94\xac";  // a, e-acute, euro, microscope
  EXPECT_EQ(utf8_sequence_length(text, 0), 1u);
  EXPECT_EQ(utf8_sequence_length(text, 1), 2u);
  EXPECT_EQ(utf8_sequence_length(text, 3), 3u);
  EXPECT_EQ(utf8_sequence_length(text, 6), 4u);
  EXPECT_TRUE(is_valid_utf8(text));
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_EQ(utf8_escaped(text), text);
}

TEST(Utf8, InvalidSequencesAreRefusedAndEscaped) {
  for (const char* bad : {"\xe9", "\x80", "\xc3", "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf",
                          "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xe2\x82",
                          "\xff"}) {
    EXPECT_EQ(utf8_sequence_length(bad, 0), 0u) << bad;
    EXPECT_FALSE(is_valid_utf8(std::string("ok") + bad)) << bad;
  }
  EXPECT_EQ(utf8_escaped("br\xe9" "ast \xc3\xa9"), "br\\xe9ast \xc3\xa9");
  EXPECT_EQ(utf8_escaped("\xe2\x82"), "\\xe2\\x82");
  EXPECT_TRUE(is_valid_utf8(utf8_escaped("\xff\xfe\xc3")));
}

}  // namespace
}  // namespace tessera
