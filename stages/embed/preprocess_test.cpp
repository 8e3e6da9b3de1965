#include "stages/embed/preprocess.h"

#include <vector>

#include <gtest/gtest.h>

namespace tessera::embed {
namespace {

constexpr std::array<float, 3> kHalf{0.5f, 0.5f, 0.5f};
constexpr std::array<float, 3> kQuarter{0.25f, 0.25f, 0.25f};

TEST(PreprocessReferenceTest, NormalisesTwoByTwoIntoPlanarLayout) {
  // Pixels (row-major): red, green / blue, (51, 102, 153).
  const std::vector<uint8_t> rgb = {255, 0, 0, 0, 255, 0, 0, 0, 255, 51, 102, 153};
  std::vector<float> out(12, -99.0f);
  preprocess_reference(rgb.data(), 1, 2, 2, kHalf, kQuarter, out.data());
  // (v / 255 - 0.5) / 0.25: 255 -> 2, 0 -> -2, 51 -> -1.2, 102 -> -0.4, 153 -> 0.4.
  const std::vector<float> expected = {2,  -2, -2, -1.2f,  // R plane
                                       -2, 2,  -2, -0.4f,  // G plane
                                       -2, -2, 2,  0.4f};  // B plane
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(out[i], expected[i], 1e-6) << i;
}

TEST(PreprocessReferenceTest, PerChannelMeanAndStd) {
  const std::vector<uint8_t> rgb = {102, 102, 102};  // 0.4 in every channel
  std::vector<float> out(3);
  preprocess_reference(rgb.data(), 1, 1, 1, {0.1f, 0.2f, 0.4f}, {0.5f, 0.25f, 2.0f}, out.data());
  EXPECT_NEAR(out[0], 0.6f, 1e-6);
  EXPECT_NEAR(out[1], 0.8f, 1e-6);
  EXPECT_NEAR(out[2], 0.0f, 1e-6);
}

TEST(PreprocessReferenceTest, ResizingAConstantImageKeepsItConstant) {
  std::vector<uint8_t> rgb(2 * 224 * 224 * 3);
  for (size_t i = 0; i < rgb.size(); ++i)
    rgb[i] = i < rgb.size() / 2 ? 200 : static_cast<uint8_t>(10 + i % 3);
  std::vector<float> out(2 * 3 * 112 * 112);
  preprocess_reference(rgb.data(), 2, 224, 112, kHalf, kQuarter, out.data());
  const size_t plane = 112 * 112;
  for (size_t i = 0; i < plane * 3; ++i)
    ASSERT_NEAR(out[i], (200 / 255.0f - 0.5f) / 0.25f, 1e-5) << i;
  for (int c = 0; c < 3; ++c) {
    for (size_t i = 0; i < plane; ++i) {
      ASSERT_NEAR(out[(3 + c) * plane + i], ((10 + c) / 255.0f - 0.5f) / 0.25f, 1e-5);
    }
  }
}

TEST(PreprocessReferenceTest, HalvingALinearRampAveragesPixelPairs) {
  // Value x in column x (0..223). Output column i samples 2i + 0.5: the mean of columns 2i, 2i+1.
  std::vector<uint8_t> rgb(224 * 224 * 3);
  for (int y = 0; y < 224; ++y) {
    for (int x = 0; x < 224; ++x) {
      for (int c = 0; c < 3; ++c) rgb[(y * 224 + x) * 3 + c] = static_cast<uint8_t>(x);
    }
  }
  std::vector<float> out(3 * 112 * 112);
  preprocess_reference(rgb.data(), 1, 224, 112, kHalf, kQuarter, out.data());
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 112; ++y) {
      for (int x = 0; x < 112; ++x) {
        const float expected = ((2 * x + 0.5f) / 255.0f - 0.5f) / 0.25f;
        ASSERT_NEAR(out[(c * 112 + y) * 112 + x], expected, 1e-5) << c << " " << y << " " << x;
      }
    }
  }
}

TEST(PreprocessReferenceTest, UpscalingClampsAtTheBorders) {
  // Two columns, 0 and 255, upscaled to four: samples at -0.25 (clamped to 0), 0.25, 0.75, 1.25
  // (upper neighbour clamped to the last column) -> 0, 0.25, 0.75, 1 of full scale.
  std::vector<uint8_t> rgb(2 * 2 * 3);
  for (int y = 0; y < 2; ++y) {
    for (int c = 0; c < 3; ++c) {
      rgb[(y * 2 + 0) * 3 + c] = 0;
      rgb[(y * 2 + 1) * 3 + c] = 255;
    }
  }
  std::vector<float> out(3 * 4 * 4);
  preprocess_reference(rgb.data(), 1, 2, 4, {0, 0, 0}, {1, 1, 1}, out.data());
  const float expected[4] = {0.0f, 0.25f, 0.75f, 1.0f};
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 4; ++y) {
      for (int x = 0; x < 4; ++x) EXPECT_NEAR(out[(c * 4 + y) * 4 + x], expected[x], 1e-6);
    }
  }
}

}  // namespace
}  // namespace tessera::embed
