#include "stages/query/inputs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "common/core/error.h"
#include "common/h5/h5.h"
#include "common/slide/png_io.h"
#include "common/store/store.h"

namespace tessera::query {
namespace {

namespace fs = std::filesystem;

class QueryInputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tessera_query_inputs_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A .npy file as numpy.save writes it: magic, version, little-endian header length, the dict
// padded with spaces to a multiple of 64 bytes and ended by '\n', then `data`.
std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const size_t len = header.size();
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i)
    out += static_cast<char>((len >> (8 * i)) & 0xff);
  return out + header + data;
}

template <typename T>
std::string raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::string dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

// Expects `fn` to throw E whose message names `file` and contains `problem`.
template <typename E, typename Fn>
void expect_error(Fn fn, const std::string& file, const std::string& problem) {
  try {
    fn();
    ADD_FAILURE() << "no exception; expected one naming '" << file << "' and '" << problem << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(problem), std::string::npos) << e.what();
  }
}

const std::vector<float> kSix = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 42.0f};

TEST_F(QueryInputsTest, NpyFloat32TwoDRoundTrip) {
  write_bytes(path("a.npy"), npy_bytes(dict("<f4", "(2, 3)"), raw(kSix)));
  const Matrix m = read_npy(path("a.npy"));
  EXPECT_EQ(m.rows, 2);
  EXPECT_EQ(m.cols, 3);
  EXPECT_EQ(m.values, kSix);
}

TEST_F(QueryInputsTest, NpyFloat64IsConverted) {
  const std::vector<double> values = {0.1, 0.2, 0.3, -0.4};
  write_bytes(path("a.npy"), npy_bytes(dict("<f8", "(2, 2)"), raw(values)));
  const Matrix m = read_npy(path("a.npy"));
  ASSERT_EQ(m.rows, 2);
  ASSERT_EQ(m.cols, 2);
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(m.values[i], static_cast<float>(values[i]));
}

TEST_F(QueryInputsTest, NpyOneDimensionalIsOneRow) {
  write_bytes(path("a.npy"), npy_bytes(dict("<f4", "(6,)"), raw(kSix)));
  const Matrix m = read_npy(path("a.npy"));
  EXPECT_EQ(m.rows, 1);
  EXPECT_EQ(m.cols, 6);
  EXPECT_EQ(m.values, kSix);
}

TEST_F(QueryInputsTest, NpyVersionsTwoAndThreeHaveFourByteHeaderLengths) {
  for (int major : {2, 3}) {
    write_bytes(path("a.npy"), npy_bytes(dict("<f4", "(3, 2)"), raw(kSix), major));
    const Matrix m = read_npy(path("a.npy"));
    EXPECT_EQ(m.rows, 3);
    EXPECT_EQ(m.cols, 2);
    EXPECT_EQ(m.values, kSix);
  }
}

TEST_F(QueryInputsTest, NpyFortranOrderIsTransposedToRowMajor) {
  // The 2x3 matrix [[1, 2, 3], [4, 5, 6]] stored column after column.
  const std::vector<float> columns = {1, 4, 2, 5, 3, 6};
  write_bytes(path("a.npy"), npy_bytes(dict("<f4", "(2, 3)", true), raw(columns)));
  const Matrix m = read_npy(path("a.npy"));
  EXPECT_EQ(m.values, (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST_F(QueryInputsTest, NpyZeroRowsIsAnEmptyMatrix) {
  write_bytes(path("a.npy"), npy_bytes(dict("<f4", "(0, 8)"), ""));
  const Matrix m = read_npy(path("a.npy"));
  EXPECT_EQ(m.rows, 0);
  EXPECT_EQ(m.cols, 8);
  EXPECT_TRUE(m.values.empty());
}

TEST_F(QueryInputsTest, NpyMalformedFilesAreInvalidInputNamingTheProblem) {
  const std::string p = path("bad.npy");
  const auto read = [&] { read_npy(p); };
  struct Case {
    std::string bytes;
    std::string problem;
  };
  const std::vector<Case> cases = {
      {"NOTNUMPY" + raw(kSix), "bad magic"},
      {"", "bad magic"},
      {std::string("\x93NUMPY\x01", 7), "truncated header"},
      {npy_bytes(dict("<f4", "(2, 3)"), raw(kSix), 4), "version 4.0"},
      {npy_bytes(dict("<i8", "(2, 3)"), std::string(48, '\0')), "unsupported dtype '<i8' (int64)"},
      {npy_bytes(dict(">f4", "(2, 3)"), raw(kSix)), "unsupported dtype '>f4'"},
      {npy_bytes(dict("<f4", "(1, 2, 3)"), raw(kSix)), "3 dimensions"},
      {npy_bytes(dict("<f4", "()"), raw(kSix)), "0 dimensions"},
      {npy_bytes(dict("<f4", "(2, 0)"), ""), "0 columns"},
      {npy_bytes(dict("<f4", "(2, 3)"), raw(kSix).substr(0, 20)), "truncated data"},
      {npy_bytes(dict("<f4", "(1, 3)"), raw(kSix)), "excess data"},
      {npy_bytes("{'descr': '<f4', 'shape': (2, 3)}", raw(kSix)), "no 'fortran_order'"},
      {npy_bytes("{'descr': '<f4' 'fortran_order': False}", raw(kSix)), "expected ',' or '}'"},
      {npy_bytes("[1, 2]", raw(kSix)), "does not start with '{'"},
      {npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", raw(kSix)),
       "structured dtype"},
      {npy_bytes(dict("<f4", "(2, 3)"), raw(kSix)).substr(0, 30), "header of 118 bytes"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.problem);
    write_bytes(p, c.bytes);
    expect_error<InvalidInput>(read, p, c.problem);
  }
}

TEST_F(QueryInputsTest, NpyNonFiniteValueNamesItsRow) {
  std::vector<float> values = kSix;
  values[4] = std::numeric_limits<float>::quiet_NaN();
  write_bytes(path("a.npy"), npy_bytes(dict("<f4", "(3, 2)"), raw(values)));
  expect_error<InvalidInput>([&] { read_npy(path("a.npy")); }, path("a.npy"), "row 2");
}

TEST_F(QueryInputsTest, NpyMissingFileIsIoError) {
  expect_error<IoError>([&] { read_npy(path("missing.npy")); }, path("missing.npy"), "");
}

void write_h5(const std::string& path, const std::string& group, const std::string& name,
              h5::Type type, const std::vector<hsize_t>& dims, const void* data,
              const std::string& group2 = "", const std::string& name2 = "") {
  h5::File file = h5::File::open(path, h5::Mode::kCreateTruncate);
  if (group.empty()) {
    file.write_dataset(name, type, dims, data);
  } else {
    file.create_group(group).write_dataset(name, type, dims, data);
  }
  if (!name2.empty()) {
    if (group2.empty()) {
      file.write_dataset(name2, type, dims, data);
    } else {
      file.create_group(group2).write_dataset(name2, type, dims, data);
    }
  }
  file.close();
}

TEST_F(QueryInputsTest, H5Float32AndFloat64RoundTrip) {
  write_h5(path("f.h5"), "", "embeddings", h5::Type::kFloat32, {2, 3}, kSix.data());
  Matrix m = read_vectors_h5(path("f.h5"), "embeddings");
  EXPECT_EQ(m.rows, 2);
  EXPECT_EQ(m.cols, 3);
  EXPECT_EQ(m.values, kSix);

  const std::vector<double> wide = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
  write_h5(path("d.h5"), "run", "features", h5::Type::kFloat64, {3, 2}, wide.data());
  m = read_vectors_h5(path("d.h5"), "/run/features");
  EXPECT_EQ(m.rows, 3);
  EXPECT_EQ(m.cols, 2);
  for (size_t i = 0; i < wide.size(); ++i) EXPECT_EQ(m.values[i], static_cast<float>(wide[i]));
}

TEST_F(QueryInputsTest, H5BadDatasetsAreInvalidInput) {
  const std::vector<int32_t> ints(6, 1);
  write_h5(path("i.h5"), "", "embeddings", h5::Type::kInt32, {2, 3}, ints.data(), "g", "x");
  expect_error<InvalidInput>([&] { read_vectors_h5(path("i.h5"), "embeddings"); }, path("i.h5"),
                             "does not hold floating-point values");
  expect_error<InvalidInput>([&] { read_vectors_h5(path("i.h5"), "nothing"); }, path("i.h5"),
                             "no dataset 'nothing'");
  expect_error<InvalidInput>([&] { read_vectors_h5(path("i.h5"), "/g"); }, path("i.h5"),
                             "not a dataset");
  write_h5(path("c.h5"), "", "embeddings", h5::Type::kFloat32, {1, 2, 3}, kSix.data());
  expect_error<InvalidInput>([&] { read_vectors_h5(path("c.h5"), "embeddings"); }, path("c.h5"),
                             "3 dimensions");
  std::vector<float> nan = kSix;
  nan[5] = std::numeric_limits<float>::infinity();
  write_h5(path("n.h5"), "", "embeddings", h5::Type::kFloat32, {2, 3}, nan.data());
  expect_error<InvalidInput>([&] { read_vectors_h5(path("n.h5"), "embeddings"); }, path("n.h5"),
                             "row 1");
  write_bytes(path("text.h5"), "not hdf5");
  EXPECT_THROW(read_vectors_h5(path("text.h5"), "embeddings"), IoError);
}

TEST_F(QueryInputsTest, QueryVectorsPickTheDatasetOfAnHdf5File) {
  write_h5(path("e.h5"), "", "features", h5::Type::kFloat32, {2, 3}, kSix.data(), "", "embeddings");
  EXPECT_EQ(read_query_vectors(path("e.h5")).rows, 2);

  write_h5(path("f.h5"), "", "features", h5::Type::kFloat32, {3, 2}, kSix.data());
  EXPECT_EQ(read_query_vectors(path("f.h5")).cols, 2);

  // Neither name: the only 2-D floating-point dataset anywhere, integers not counted.
  {
    h5::File file = h5::File::open(path("only.h5"), h5::Mode::kCreateTruncate);
    const std::vector<int64_t> coords(6, 7);
    file.write_dataset("coords", h5::Type::kInt64, {3, 2}, coords.data());
    file.create_group("run/a").write_dataset("vecs", h5::Type::kFloat32, {6, 1}, kSix.data());
    file.close();
  }
  const Matrix m = read_query_vectors(path("only.h5"));
  EXPECT_EQ(m.rows, 6);
  EXPECT_EQ(m.cols, 1);
  EXPECT_EQ(m.values, kSix);

  write_h5(path("two.h5"), "a", "x", h5::Type::kFloat32, {2, 3}, kSix.data(), "b", "y");
  expect_error<InvalidInput>([&] { read_query_vectors(path("two.h5")); }, path("two.h5"),
                             "2 2-D floating-point datasets (/a/x, /b/y)");
  // Named explicitly: FILE:DATASET.
  const Matrix named = read_query_vectors(path("two.h5") + ":/b/y");
  EXPECT_EQ(named.rows, 2);
  EXPECT_EQ(named.values, kSix);
  expect_error<InvalidInput>([&] { read_query_vectors(path("two.h5") + ":/c"); }, path("two.h5"),
                             "no dataset '/c'");
  expect_error<InvalidInput>([&] { read_query_vectors(path("two.h5") + ":"); }, path("two.h5"),
                             "empty dataset name");
}

TEST_F(QueryInputsTest, QueryVectorsTellFormatsBySignature) {
  // A .npy file under an .h5 name is read as .npy.
  write_bytes(path("v.h5"), npy_bytes(dict("<f4", "(2, 3)"), raw(kSix)));
  EXPECT_EQ(read_query_vectors(path("v.h5")).values, kSix);
  expect_error<InvalidInput>([&] { read_query_vectors(path("v.h5") + ":/x"); }, path("v.h5"),
                             "is a .npy file");
  write_bytes(path("t.npy"), "hello, world");
  expect_error<InvalidInput>([&] { read_query_vectors(path("t.npy")); }, path("t.npy"),
                             "neither a .npy nor an HDF5 file");
  write_bytes(path("z.npy"), npy_bytes(dict("<f4", "(0, 3)"), ""));
  expect_error<InvalidInput>([&] { read_query_vectors(path("z.npy")); }, path("z.npy"),
                             "hold no rows");
  expect_error<InvalidInput>([&] { read_query_vectors(path("missing.npy")); },
                             path("missing.npy"), "does not exist");
}

Image8 gradient(int width, int height) {
  Image8 image{width, height, 3, {}};
  image.pixels.resize(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &image.pixels[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(x * 2);
      p[1] = static_cast<uint8_t>(y * 3);
      p[2] = 128;
    }
  }
  return image;
}

TEST_F(QueryInputsTest, PngImagesAreReadAsRgb) {
  const Image8 rgb = gradient(40, 30);
  write_png(path("rgb.png"), rgb);
  const Image8 back = read_image(path("rgb.png"));
  EXPECT_EQ(back.width, 40);
  EXPECT_EQ(back.height, 30);
  EXPECT_EQ(back.channels, 3);
  EXPECT_EQ(back.pixels, rgb.pixels);

  Image8 gray{3, 2, 1, {0, 50, 100, 150, 200, 250}};
  write_png(path("gray.png"), gray);
  const Image8 g = read_image(path("gray.png"));
  ASSERT_EQ(g.channels, 3);
  ASSERT_EQ(g.pixels.size(), 18u);
  for (size_t i = 0; i < 6; ++i) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(g.pixels[3 * i + c], gray.pixels[i]);
  }
}

TEST_F(QueryInputsTest, JpegImagesAreDecodedToRgbWhateverTheirName) {
  const Image8 rgb = gradient(48, 32);
  const std::vector<uint8_t> jpeg = encode_jpeg(rgb.pixels.data(), 48, 32, 95);
  write_bytes(path("patch.png"), std::string(jpeg.begin(), jpeg.end()));  // misnamed on purpose
  const Image8 back = read_image(path("patch.png"));
  EXPECT_EQ(back.width, 48);
  EXPECT_EQ(back.height, 32);
  EXPECT_EQ(back.channels, 3);
  ASSERT_EQ(back.pixels.size(), rgb.pixels.size());
  int worst = 0;
  for (size_t i = 0; i < rgb.pixels.size(); ++i) {
    worst = std::max(worst, std::abs(int{back.pixels[i]} - int{rgb.pixels[i]}));
  }
  EXPECT_LE(worst, 12);
}

TEST_F(QueryInputsTest, BadImagesNameTheFile) {
  const Image8 rgb = gradient(64, 64);
  const std::vector<uint8_t> jpeg = encode_jpeg(rgb.pixels.data(), 64, 64, 90);
  write_bytes(path("cut.jpg"), std::string(jpeg.begin(), jpeg.begin() + jpeg.size() / 2));
  expect_error<InvalidInput>([&] { read_image(path("cut.jpg")); }, path("cut.jpg"), "JPEG");
  write_bytes(path("head.jpg"), std::string("\xff\xd8\xff\xe0garbage", 11));
  expect_error<InvalidInput>([&] { read_image(path("head.jpg")); }, path("head.jpg"),
                             "not a valid JPEG");
  write_bytes(path("text.png"), "plain text");
  expect_error<InvalidInput>([&] { read_image(path("text.png")); }, path("text.png"),
                             "neither PNG nor JPEG");
  write_bytes(path("empty.png"), "");
  expect_error<InvalidInput>([&] { read_image(path("empty.png")); }, path("empty.png"),
                             "neither PNG nor JPEG");
  std::string png = read_bytes((write_png(path("ok.png"), rgb), path("ok.png")));
  write_bytes(path("cut.png"), png.substr(0, png.size() / 2));
  // Issue 21, case 22: a truncated PNG and a missing file are bad input (exit 2), like the rest.
  expect_error<InvalidInput>([&] { read_image(path("cut.png")); }, path("cut.png"),
                             "not a valid PNG");
  expect_error<InvalidInput>([&] { read_image(path("missing.png")); }, path("missing.png"),
                             "does not exist");
  expect_error<InvalidInput>([&] { read_image(dir_.string()); }, dir_.string(),
                             "is not a regular file");
}

// CRC-32 of PNG chunks (ISO 3309), to forge a header.
uint32_t png_crc(const std::string& bytes) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return crc ^ 0xffffffffu;
}

void put_be32(std::string& bytes, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
}

// Issue 21, case 9: a small PNG whose header claims 60000 x 60000 pixels made query allocate
// 10.7 GB before failing. The limit applies from the header: nothing is allocated.
TEST_F(QueryInputsTest, ImageSizeIsCheckedFromTheHeaderBeforeDecoding) {
  write_png(path("small.png"), gradient(4, 4));
  std::string png = read_bytes(path("small.png"));
  // Signature (8), IHDR length (4), "IHDR" (4), width at 16, height at 20, CRC over type+data.
  ASSERT_EQ(png.substr(12, 4), "IHDR");
  put_be32(png, 16, 60000);
  put_be32(png, 20, 60000);
  put_be32(png, 29, png_crc(png.substr(12, 17)));
  write_bytes(path("bomb.png"), png);
  ASSERT_LT(png.size(), 1000u);
  expect_error<InvalidInput>([&] { read_image(path("bomb.png")); }, path("bomb.png"),
                             "60000x60000 pixels by its header, over the limit");
}

}  // namespace
}  // namespace tessera::query
