#include "common/h5/h5.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"

namespace tessera::h5 {
namespace {

namespace fs = std::filesystem;

class H5Test : public ::testing::Test {
 protected:
  void SetUp() override {
    init();
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ =
        fs::temp_directory_path() / fmt::format("tessera_h5_test_{}_{}", info->name(), ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const IoError& e) {
    return e.what();
  }
  return "<no IoError>";
}

template <typename T>
std::vector<T> ramp(size_t n, double scale) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(static_cast<double>(i % 97) * scale);
  return v;
}

// Appends two batches of rows of shape {3} and checks every read path against them.
template <typename T>
void check_append_round_trip(const std::string& file) {
  const std::vector<T> first = ramp<T>(5 * 3, 1.0);
  const std::vector<T> second = ramp<T>(4 * 3, 0.5);
  {
    File f = File::open(file, Mode::kCreateTruncate);
    Dataset d = f.create_appendable("values", type_of<T>(), {3}, {{2}, 0, false});
    d.append(first.data(), 5);
    d.append(second.data(), 4);
    d.append(nullptr, 0);
    EXPECT_EQ(d.dims(), (std::vector<hsize_t>{9, 3}));
    f.close();
  }
  File f = File::open(file, Mode::kRead);
  Dataset d = f.open_dataset("values");
  std::vector<T> expected = first;
  expected.insert(expected.end(), second.begin(), second.end());
  EXPECT_EQ(d.read_all<T>(), expected);
  std::vector<T> rows(2 * 3);
  d.read_rows(rows.data(), 4, 2);
  EXPECT_EQ(rows, std::vector<T>(expected.begin() + 12, expected.begin() + 18));
}

TEST_F(H5Test, AppendRoundTripForEachType) {
  check_append_round_trip<uint8_t>(path("u8.h5"));
  check_append_round_trip<int32_t>(path("i32.h5"));
  check_append_round_trip<int64_t>(path("i64.h5"));
  check_append_round_trip<float>(path("f32.h5"));
  check_append_round_trip<double>(path("f64.h5"));
  check_append_round_trip<uint16_t>(path("f16.h5"));
}

TEST_F(H5Test, Float16KeepsBitPatternsAndConvertsToFloat) {
  const std::vector<uint16_t> bits{0x0000, 0x8000, 0x3C00, 0xC000, 0x7BFF,
                                   0x0001, 0x7C00, 0xFC00, 0x3555, 0x7E00};
  {
    File f = File::open(path("half.h5"), Mode::kCreateTruncate);
    Dataset d = f.create_appendable("emb", Type::kFloat16, {2}, {{4}, 0, false});
    d.append(bits.data(), bits.size() / 2);
    f.close();
  }
  File f = File::open(path("half.h5"), Mode::kRead);
  Dataset d = f.open_dataset("emb");
  Handle type(H5Dget_type(d.id()));
  EXPECT_EQ(H5Tget_class(type.id()), H5T_FLOAT);
  EXPECT_EQ(H5Tget_size(type.id()), 2u);
  EXPECT_EQ(H5Tget_ebias(type.id()), 15u);

  std::vector<uint16_t> raw(bits.size());
  d.read_rows(raw.data(), 0, bits.size() / 2);
  EXPECT_EQ(raw, bits);
  EXPECT_EQ(d.read_all<uint16_t>(), bits);

  const std::vector<float> values = d.read_all<float>();
  ASSERT_EQ(values.size(), bits.size());
  EXPECT_EQ(values[0], 0.0f);
  EXPECT_TRUE(std::signbit(values[1]) && values[1] == 0.0f);
  EXPECT_EQ(values[2], 1.0f);
  EXPECT_EQ(values[3], -2.0f);
  EXPECT_EQ(values[4], 65504.0f);
  EXPECT_EQ(values[5], std::ldexp(1.0f, -24));
  EXPECT_EQ(values[6], std::numeric_limits<float>::infinity());
  EXPECT_EQ(values[7], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(values[8], 0.333251953125f);
  EXPECT_TRUE(std::isnan(values[9]));
}

// A damaged chunk fails the read that meets it, naming the file and the dataset, instead of
// returning wrong values.
TEST_F(H5Test, ChecksumCatchesADamagedChunk) {
  std::vector<float> values(64 * 1024);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  haddr_t offset = 0;
  {
    File f = File::open(path("c.h5"), Mode::kCreateTruncate);
    Dataset d = f.create_appendable("values", Type::kFloat32, {}, {{4096}});
    d.append(values.data(), values.size());
    d.close();
    f.close();
  }
  {
    File f = File::open(path("c.h5"), Mode::kRead);
    Dataset d = f.open_dataset("values");
    EXPECT_EQ(d.read_all<float>(), values);
    hsize_t chunk_offset[1] = {8 * 4096};
    unsigned filter_mask = 0;
    hsize_t size = 0;
    ASSERT_GE(H5Dget_chunk_storage_size(d.id(), chunk_offset, &size), 0);
    // The address of chunk 8 through the chunk index (1.10.5+).
    ASSERT_GE(H5Dget_chunk_info_by_coord(d.id(), chunk_offset, &filter_mask, &offset, &size), 0);
  }
  {
    std::fstream io(path("c.h5"), std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(offset + 100));
    const char junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    io.write(junk, sizeof(junk));
  }
  File f = File::open(path("c.h5"), Mode::kRead);
  Dataset d = f.open_dataset("values");
  std::vector<float> head(4096);
  d.read_rows(head.data(), 0, 4096);  // an undamaged chunk still reads
  try {
    d.read_all<float>();
    FAIL() << "a damaged chunk was read without error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("c.h5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("values"), std::string::npos) << e.what();
  }
}

TEST_F(H5Test, ChunkedDeflateShuffleRoundTrip) {
  constexpr hsize_t kRows = 2000;
  constexpr hsize_t kCols = 16;
  std::vector<int32_t> data(kRows * kCols);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int32_t>(i / 7);
  {
    File f = File::open(path("z.h5"), Mode::kCreateTruncate);
    Dataset d = f.create_appendable("coords", Type::kInt32, {kCols}, {{256, kCols}, 6, true});
    for (hsize_t r = 0; r < kRows; r += 500) d.append(data.data() + r * kCols, 500);
    f.close();
  }
  File f = File::open(path("z.h5"), Mode::kRead);
  Dataset d = f.open_dataset("coords");
  EXPECT_EQ(d.read_all<int32_t>(), data);
  EXPECT_LT(H5Dget_storage_size(d.id()), data.size() * sizeof(int32_t) / 4);
  Handle dcpl(H5Dget_create_plist(d.id()));
  ASSERT_EQ(H5Pget_nfilters(dcpl.id()), 3);
  auto filter = [&](unsigned index) {
    unsigned flags = 0;
    size_t nelmts = 0;  // in: capacity of the (absent) value array; out: values the filter has
    return H5Pget_filter2(dcpl.id(), index, &flags, &nelmts, nullptr, 0, nullptr, nullptr);
  };
  EXPECT_EQ(filter(0), H5Z_FILTER_FLETCHER32);
  EXPECT_EQ(filter(1), H5Z_FILTER_SHUFFLE);
  EXPECT_EQ(filter(2), H5Z_FILTER_DEFLATE);
  // Reading converts across integer widths.
  const std::vector<int64_t> wide = d.read_all<int64_t>();
  EXPECT_EQ(wide.back(), data.back());
}

TEST_F(H5Test, ReadRowListScatteredRows) {
  constexpr hsize_t kRows = 50000;
  constexpr hsize_t kCols = 8;
  std::vector<float> data(kRows * kCols);
  std::iota(data.begin(), data.end(), 0.0f);
  File f = File::open(path("rows.h5"), Mode::kCreateTruncate);
  Dataset d = f.create_appendable("x", Type::kFloat32, {kCols}, {{1024}, 1, false});
  d.append(data.data(), kRows);

  // Every third row, plus runs of consecutive rows, the first and the last row.
  std::vector<hsize_t> rows;
  std::mt19937 rng(3);
  for (hsize_t r = 0; r < kRows; ++r) {
    if (r == 0 || r == kRows - 1 || r % 3 == 0 || (r >= 1000 && r < 1100) || rng() % 5 == 0)
      rows.push_back(r);
  }
  ASSERT_GT(rows.size(), 20000u);
  std::vector<float> out(rows.size() * kCols, -1.0f);
  const auto t0 = std::chrono::steady_clock::now();
  d.read_row_list(out.data(), rows);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < rows.size(); ++i) {
    for (hsize_t c = 0; c < kCols; ++c) {
      ASSERT_EQ(out[i * kCols + c], data[rows[i] * kCols + c]) << "row " << rows[i];
    }
  }
  EXPECT_LT(seconds, 5.0) << "read_row_list of " << rows.size() << " rows took " << seconds << " s";

  d.read_row_list(nullptr, {});
  EXPECT_THROW(d.read_row_list(out.data(), {5, 3}), Error);
  EXPECT_THROW(d.read_row_list(out.data(), {5, 5}), Error);
  const std::string msg = error_of([&] { d.read_row_list(out.data(), {1, kRows}); });
  EXPECT_NE(msg.find("'/x'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
}

TEST_F(H5Test, BlobsRoundTrip) {
  std::vector<std::vector<uint8_t>> blobs;
  std::mt19937 rng(11);
  for (int i = 0; i < 300; ++i) {
    std::vector<uint8_t> b(i % 17 == 0 ? 0 : rng() % 5000);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    blobs.push_back(std::move(b));
  }
  {
    File f = File::open(path("blobs.h5"), Mode::kCreateTruncate);
    Group g = f.create_group("slide");
    Dataset d = g.create_appendable("jpeg", Type::kVarBytes, {}, {{64}, 0, false});
    d.append_blobs({blobs.begin(), blobs.begin() + 100});
    d.append_blobs({});
    d.append_blobs({blobs.begin() + 100, blobs.end()});
    EXPECT_EQ(d.dims(), (std::vector<hsize_t>{300}));
    EXPECT_THROW(d.append(blobs[1].data(), 1), Error);
    f.close();
  }
  File f = File::open(path("blobs.h5"), Mode::kRead);
  Dataset d = f.open_dataset("slide/jpeg");
  EXPECT_EQ(d.path(), "/slide/jpeg");
  EXPECT_EQ(d.read_blobs(0, 300), blobs);
  EXPECT_EQ(d.read_blobs(95, 10),
            std::vector<std::vector<uint8_t>>(blobs.begin() + 95, blobs.begin() + 105));
  EXPECT_TRUE(d.read_blobs(300, 0).empty());
  const std::vector<hsize_t> rows{0, 1, 2, 17, 34, 150, 151, 299};
  const auto picked = d.read_blob_list(rows);
  ASSERT_EQ(picked.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_EQ(picked[i], blobs[rows[i]]) << "row " << rows[i];
  EXPECT_THROW(d.read_blobs(299, 2), IoError);
}

TEST_F(H5Test, StringsAndVectors) {
  const std::vector<std::string> names{"slide-001.svs", "", "héllo wörld ✓",
                                       std::string(3000, 'x')};
  {
    File f = File::open(path("s.h5"), Mode::kCreateTruncate);
    f.write_strings("names", names);
    f.write_strings("none", {});
    f.write_vector<int64_t>("ids", {5, -7, 1LL << 40});
    f.write_vector<double>("empty", {});
    const std::vector<uint8_t> grid{1, 2, 3, 4, 5, 6};
    f.write_dataset("grid", Type::kUInt8, {2, 3}, grid.data(), {{1}, 4, true});
    f.close();
  }
  File f = File::open(path("s.h5"), Mode::kRead);
  EXPECT_EQ(f.open_dataset("names").read_strings(), names);
  EXPECT_TRUE(f.open_dataset("none").read_strings().empty());
  EXPECT_EQ(f.open_dataset("ids").read_all<int64_t>(), (std::vector<int64_t>{5, -7, 1LL << 40}));
  EXPECT_EQ(f.open_dataset("ids").read_all<double>(),
            (std::vector<double>{5, -7, std::ldexp(1.0, 40)}));
  EXPECT_TRUE(f.open_dataset("empty").read_all<double>().empty());
  Dataset grid = f.open_dataset("grid");
  EXPECT_EQ(grid.dims(), (std::vector<hsize_t>{2, 3}));
  EXPECT_EQ(grid.read_all<uint8_t>(), (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_THROW(f.open_dataset("names").read_all<int32_t>(), IoError);
  EXPECT_THROW(f.open_dataset("ids").read_strings(), IoError);
}

TEST_F(H5Test, WriteRowsOverwritesInPlace) {
  File f = File::open(path("w.h5"), Mode::kCreateTruncate);
  std::vector<double> zeros(10 * 2, 0.0);
  Dataset d = f.write_dataset("m", Type::kFloat64, {10, 2}, zeros.data());
  const std::vector<double> patch{1, 2, 3, 4};
  d.write_rows(patch.data(), 8, 2);
  std::vector<double> expected = zeros;
  std::copy(patch.begin(), patch.end(), expected.begin() + 16);
  EXPECT_EQ(d.read_all<double>(), expected);
  EXPECT_THROW(d.write_rows(patch.data(), 9, 2), IoError);
}

TEST_F(H5Test, GroupsAndAttributes) {
  {
    File f = File::open(path("g.h5"), Mode::kCreateTruncate);
    Group c = f.create_group("a/b/c");
    EXPECT_EQ(c.path(), "/a/b/c");
    f.create_group("zeta");
    f.create_group("/alpha");
    f.write_vector<int32_t>("a/b/ds", {1, 2});
    EXPECT_THROW(f.create_group("zeta"), IoError);

    f.set_attr("tool", std::string("tessera patchgen"));
    f.set_attr("count", int64_t{42});
    f.set_attr("mpp", 0.25);
    f.set_attr("shape", std::vector<int64_t>{224, 224, 3});
    f.set_attr("mean", std::vector<double>{0.485, 0.456, 0.406});
    f.set_attr("nothing", std::vector<int64_t>{});
    f.set_attr("count", int64_t{43});  // replaces
    c.set_attr("unicode", std::string("µm ✓"));
    Dataset d = f.open_dataset("a/b/ds");
    d.set_attr("model", std::string("uni2-h"));
    d.set_attr("dim", int64_t{1536});
    d.set_attr("scale", 1.5);
    f.close();
  }
  File f = File::open(path("g.h5"), Mode::kReadWrite);
  EXPECT_EQ(f.list(), (std::vector<std::string>{"a", "alpha", "zeta"}));
  EXPECT_EQ(f.open_group("a/b").list(), (std::vector<std::string>{"c", "ds"}));
  EXPECT_TRUE(f.exists("a"));
  EXPECT_TRUE(f.exists("a/b/c"));
  EXPECT_TRUE(f.exists("/a/b/ds"));
  EXPECT_FALSE(f.exists("a/x"));
  EXPECT_FALSE(f.exists("x/y/z"));
  EXPECT_FALSE(f.exists("a/b/ds/deeper"));
  EXPECT_TRUE(f.open_group("a").exists("b/c"));

  EXPECT_EQ(f.attr_string("tool"), "tessera patchgen");
  EXPECT_EQ(f.attr_int("count"), 43);
  EXPECT_EQ(f.attr_double("mpp"), 0.25);
  EXPECT_EQ(f.attr_double("count"), 43.0);
  EXPECT_EQ(f.attr_ints("shape"), (std::vector<int64_t>{224, 224, 3}));
  EXPECT_EQ(f.attr_doubles("mean"), (std::vector<double>{0.485, 0.456, 0.406}));
  EXPECT_TRUE(f.attr_ints("nothing").empty());
  EXPECT_TRUE(f.has_attr("mpp"));
  EXPECT_FALSE(f.has_attr("absent"));
  EXPECT_EQ(f.open_group("a/b/c").attr_string("unicode"), "µm ✓");
  Dataset d = f.open_dataset("a/b/ds");
  EXPECT_EQ(d.attr_string("model"), "uni2-h");
  EXPECT_EQ(d.attr_int("dim"), 1536);
  EXPECT_EQ(d.attr_double("scale"), 1.5);

  const std::string missing = error_of([&] { f.attr_int("absent"); });
  EXPECT_NE(missing.find("'absent'"), std::string::npos) << missing;
  EXPECT_NE(missing.find(path("g.h5")), std::string::npos) << missing;
  EXPECT_NE(error_of([&] { f.attr_int("mpp"); }).find("not a scalar integer"), std::string::npos);
  EXPECT_NE(error_of([&] { f.attr_string("count"); }).find("not a scalar string"),
            std::string::npos);
  EXPECT_NE(error_of([&] { d.attr_string("none"); }).find("'/a/b/ds'"), std::string::npos);
}

TEST_F(H5Test, ReadsFixedLengthStringAttributes) {
  File f = File::open(path("fixed.h5"), Mode::kCreateTruncate);
  Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.id(), 8);
  H5Tset_strpad(type.id(), H5T_STR_NULLPAD);
  Handle space(H5Screate(H5S_SCALAR));
  Handle attr(H5Acreate2(f.id(), "legacy", type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT));
  const char value[8] = {'v', '1', '.', '2', 0, 0, 0, 0};
  ASSERT_GE(H5Awrite(attr.id(), type.id(), value), 0);
  attr.close();
  EXPECT_EQ(f.attr_string("legacy"), "v1.2");
}

TEST_F(H5Test, ErrorsNameFileAndObject) {
  const std::string absent = path("absent.h5");
  const std::string msg = error_of([&] { File::open(absent, Mode::kRead); });
  EXPECT_NE(msg.find(absent), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;

  const std::string text = path("text.h5");
  atomic_write_file(text, "not hdf5 at all");
  const std::string bad = error_of([&] { File::open(text, Mode::kReadWrite); });
  EXPECT_NE(bad.find(text), std::string::npos) << bad;
  EXPECT_NE(bad.find("not an HDF5 file"), std::string::npos) << bad;

  const std::string file = path("shard.h5");
  File f = File::open(file, Mode::kCreateTruncate);
  Group g = f.create_group("slides");
  const std::string ds = error_of([&] { f.open_dataset("patches"); });
  EXPECT_NE(ds.find(fmt::format("HDF5: cannot open dataset '/patches' in '{}'", file)),
            std::string::npos)
      << ds;
  const std::string nested = error_of([&] { g.open_dataset("s1/coords"); });
  EXPECT_NE(nested.find("'/slides/s1/coords'"), std::string::npos) << nested;
  EXPECT_NE(nested.find(file), std::string::npos) << nested;
  const std::string grp = error_of([&] { f.open_group("nope"); });
  EXPECT_NE(grp.find("cannot open group '/nope'"), std::string::npos) << grp;
  EXPECT_THROW(f.create_appendable("nochunk", Type::kInt32, {}, {}), Error);
  EXPECT_THROW(f.create_appendable("badrank", Type::kInt32, {4}, {{1, 2, 3}, 0, false}), Error);
  f.close();
  f.close();

  const std::string dir = path("sub/missing-dir/x.h5");
  const std::string create = error_of([&] { File::open(dir, Mode::kCreateTruncate); });
  EXPECT_NE(create.find("cannot create file"), std::string::npos) << create;
  EXPECT_NE(create.find(dir), std::string::npos) << create;
}

// Writes a representative shard: groups, attributes, appended compressed rows, blobs, strings.
void write_sample(const std::string& file, int variant) {
  File f = File::open(file, Mode::kCreateTruncate);
  f.set_attr("format", std::string("tessera-shard"));
  f.set_attr("version", int64_t{1});
  Group s = f.create_group("slides/s1");
  s.set_attr("mpp", 0.5);
  s.set_attr("level_dims", std::vector<int64_t>{4000, 3000});
  std::vector<int32_t> coords(300 * 2);
  std::iota(coords.begin(), coords.end(), variant);
  Dataset c = s.create_appendable("coords", Type::kInt32, {2}, {{128}, 4, true});
  c.append(coords.data(), 100);
  c.append(coords.data() + 200, 200);
  Dataset b = s.create_appendable("jpeg", Type::kVarBytes, {}, {{64}, 0, false});
  std::vector<std::vector<uint8_t>> blobs;
  for (int i = 0; i < 50; ++i)
    blobs.emplace_back(static_cast<size_t>(i * 37 % 500), static_cast<uint8_t>(i));
  b.append_blobs(blobs);
  std::vector<uint16_t> emb(10 * 4, 0x3C00);
  s.create_appendable("emb", Type::kFloat16, {4}, {{16}, 0, false}).append(emb.data(), 10);
  f.write_strings("slide_ids", {"s1", "s2"});
  f.close();
}

TEST_F(H5Test, IdenticalContentGivesIdenticalBytes) {
  write_sample(path("one.h5"), 0);
  write_sample(path("two.h5"), 0);
  write_sample(path("three.h5"), 1);
  EXPECT_EQ(sha256_file(path("one.h5")), sha256_file(path("two.h5")));
  EXPECT_NE(sha256_file(path("one.h5")), sha256_file(path("three.h5")));
  // Opening read-only and closing changes nothing.
  File::open(path("one.h5"), Mode::kRead).close();
  EXPECT_EQ(sha256_file(path("one.h5")), sha256_file(path("two.h5")));

  // A fresh process (different heap history) writes the same bytes.
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 1;
    try {
      write_sample(path("child.h5"), 0);
      code = 0;
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(sha256_file(path("child.h5")), sha256_file(path("one.h5")));
}

TEST_F(H5Test, ObjectsCarryNoTimestamps) {
  write_sample(path("t.h5"), 0);
  File f = File::open(path("t.h5"), Mode::kRead);
  for (const char* name :
       {"/", "/slides", "/slides/s1", "/slides/s1/coords", "/slides/s1/jpeg", "/slide_ids"}) {
    H5O_info_t info{};
    ASSERT_GE(H5Oget_info_by_name2(f.id(), name, &info, H5O_INFO_TIME, H5P_DEFAULT), 0) << name;
    EXPECT_EQ(info.ctime, 0) << name;
    EXPECT_EQ(info.mtime, 0) << name;
    EXPECT_EQ(info.btime, 0) << name;
  }
}

TEST_F(H5Test, HandlesAreMoveOnlyAndCloseOnce) {
  Handle a(H5Screate(H5S_SCALAR));
  ASSERT_TRUE(a.valid());
  const hid_t id = a.id();
  Handle b = std::move(a);
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(b.id(), id);
  Handle c;
  c = std::move(b);
  EXPECT_EQ(c.id(), id);
  c.close();
  EXPECT_FALSE(c.valid());
  c.close();
  EXPECT_LE(H5Iis_valid(id), 0);
}

}  // namespace
}  // namespace tessera::h5
