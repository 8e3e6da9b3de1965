#include "common/slide/png_io.h"

#include <gtest/gtest.h>
#include <png.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/core/error.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class PngIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tessera_png_io_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

Image8 make_image(int width, int height, int channels) {
  Image8 image{width, height, channels, {}};
  image.pixels.resize(static_cast<size_t>(width) * height * channels);
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    image.pixels[i] = static_cast<uint8_t>((i * 37 + i / 7) & 0xff);
  }
  return image;
}

// Writes a PNG in a layout write_png never produces, through libpng's simplified API.
void write_with_libpng(const std::string& path, int width, int height, png_uint_32 format,
                       const void* pixels) {
  png_image desc;
  std::memset(&desc, 0, sizeof desc);
  desc.version = PNG_IMAGE_VERSION;
  desc.width = width;
  desc.height = height;
  desc.format = format;
  ASSERT_TRUE(png_image_write_to_file(&desc, path.c_str(), 0, pixels, 0, nullptr)) << desc.message;
}

TEST_F(PngIoTest, GrayRoundTrip) {
  const Image8 image = make_image(37, 21, 1);
  write_png(path("gray.png"), image);
  const Image8 back = read_png(path("gray.png"));
  EXPECT_EQ(back.width, 37);
  EXPECT_EQ(back.height, 21);
  EXPECT_EQ(back.channels, 1);
  EXPECT_EQ(back.pixels, image.pixels);
}

TEST_F(PngIoTest, RgbRoundTrip) {
  const Image8 image = make_image(16, 9, 3);
  write_png(path("rgb.png"), image);
  const Image8 back = read_png(path("rgb.png"));
  EXPECT_EQ(back.width, 16);
  EXPECT_EQ(back.height, 9);
  EXPECT_EQ(back.channels, 3);
  EXPECT_EQ(back.pixels, image.pixels);
}

TEST_F(PngIoTest, OverwriteReplacesAndLeavesNoTemporaryFiles) {
  write_png(path("mask.png"), make_image(8, 8, 1));
  const Image8 second = make_image(5, 3, 3);
  write_png(path("mask.png"), second);
  EXPECT_EQ(read_png(path("mask.png")).pixels, second.pixels);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(PngIoTest, AlphaIsStrippedKeepingStoredColour) {
  const uint8_t rgba[] = {10, 20, 30, 0, 200, 100, 50, 128};
  write_with_libpng(path("rgba.png"), 2, 1, PNG_FORMAT_RGBA, rgba);
  const Image8 rgb = read_png(path("rgba.png"));
  ASSERT_EQ(rgb.channels, 3);
  EXPECT_EQ(rgb.pixels, (std::vector<uint8_t>{10, 20, 30, 200, 100, 50}));

  const uint8_t gray_alpha[] = {77, 255, 150, 0};
  write_with_libpng(path("ga.png"), 2, 1, PNG_FORMAT_GA, gray_alpha);
  const Image8 gray = read_png(path("ga.png"));
  ASSERT_EQ(gray.channels, 1);
  EXPECT_EQ(gray.pixels, (std::vector<uint8_t>{77, 150}));
}

TEST_F(PngIoTest, SixteenBitIsScaledToEightBit) {
  const uint16_t values[] = {0, 65535, 32896};
  write_with_libpng(path("g16.png"), 3, 1, PNG_FORMAT_LINEAR_Y, values);
  const Image8 image = read_png(path("g16.png"));
  ASSERT_EQ(image.channels, 1);
  EXPECT_EQ(image.pixels, (std::vector<uint8_t>{0, 255, 128}));
}

TEST_F(PngIoTest, MissingFileNamesThePath) {
  const std::string missing = path("no_such.png");
  try {
    read_png(missing);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
}

TEST_F(PngIoTest, NonPngFileNamesThePath) {
  const std::string text = path("not_a.png");
  std::ofstream(text) << "this is not an image, just some text long enough";
  try {
    read_png(text);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a PNG"), std::string::npos) << e.what();
  }
}

TEST_F(PngIoTest, TruncatedPngNamesThePath) {
  write_png(path("full.png"), make_image(64, 64, 3));
  const auto size = fs::file_size(path("full.png"));
  fs::copy_file(path("full.png"), path("cut.png"));
  fs::resize_file(path("cut.png"), size / 2);
  try {
    read_png(path("cut.png"));
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(path("cut.png")), std::string::npos) << e.what();
  }
}

TEST_F(PngIoTest, MalformedImageOrUnwritablePathThrows) {
  EXPECT_THROW(write_png(path("x.png"), Image8{4, 4, 2, std::vector<uint8_t>(32)}), IoError);
  EXPECT_THROW(write_png(path("y.png"), Image8{4, 4, 3, std::vector<uint8_t>(10)}), IoError);
  std::ofstream(path("file")) << "a regular file, not a directory";
  const std::string under_file = path("file") + "/z.png";
  try {
    write_png(under_file, make_image(4, 4, 1));
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(path("file")), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
