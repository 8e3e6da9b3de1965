#include "common/store/store.h"

#include <fcntl.h>
#include <unistd.h>
#include <turbojpeg.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "common/core/clock.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/store/files.h"

namespace tessera {

std::string patch_shard_file(int rank) {
  return std::string(kShardsDir) + "/" + rank_file_name(rank, ".h5");
}

namespace {

// A turbojpeg handle per thread and direction, created on first use.
class TjHandle {
 public:
  explicit TjHandle(bool compress) : h_(compress ? tjInitCompress() : tjInitDecompress()) {
    if (h_ == nullptr) fail<IoError>("libturbojpeg: cannot initialise: {}", tjGetErrorStr2(nullptr));
  }
  ~TjHandle() { tjDestroy(h_); }
  TjHandle(const TjHandle&) = delete;
  TjHandle& operator=(const TjHandle&) = delete;
  tjhandle get() const { return h_; }

 private:
  tjhandle h_;
};

}  // namespace

int parse_compression(const std::string& text) {
  if (text == "none") return 0;
  if (text == "deflate") return 4;
  if (text.rfind("deflate:", 0) == 0) {
    const std::string level = text.substr(8);
    if (level.size() == 1 && level[0] >= '1' && level[0] <= '9') return level[0] - '0';
  }
  fail<InvalidInput>("invalid --compression '{}': expected none, deflate or deflate:1..9", text);
}

std::vector<uint8_t> encode_jpeg(const uint8_t* rgb, int width, int height, int quality) {
  thread_local TjHandle handle(true);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  if (tjCompress2(handle.get(), rgb, width, 0, height, TJPF_RGB, &buffer, &size, TJSAMP_444,
                  quality, TJFLAG_ACCURATEDCT) != 0) {
    std::string reason = tjGetErrorStr2(handle.get());
    tjFree(buffer);
    fail<IoError>("JPEG encoding of a {}x{} patch failed: {}", width, height, reason);
  }
  std::vector<uint8_t> out(buffer, buffer + size);
  tjFree(buffer);
  return out;
}

void decode_jpeg(const uint8_t* data, size_t size, int width, int height, uint8_t* rgb) {
  thread_local TjHandle handle(false);
  int w = 0, h = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle.get(), data, size, &w, &h, &subsampling, &colorspace) != 0) {
    fail<IoError>("JPEG patch header is invalid: {}", tjGetErrorStr2(handle.get()));
  }
  if (w != width || h != height) {
    fail<IoError>("JPEG patch is {}x{}, expected {}x{}", w, h, width, height);
  }
  if (tjDecompress2(handle.get(), data, size, rgb, width, 0, height, TJPF_RGB,
                    TJFLAG_ACCURATEDCT) != 0) {
    fail<IoError>("JPEG patch decoding failed: {}", tjGetErrorStr2(handle.get()));
  }
}

namespace {

// The checksum of one chunk of patches: XXH3-64 of its raw pixels, or of its JPEG blobs one
// after the other, each preceded by its length. Stored as int64 (the bits of the hash).
int64_t bytes_checksum(const uint8_t* data, size_t size) {
  return static_cast<int64_t>(XXH3_64bits(data, size));
}

int64_t blobs_checksum(const std::vector<std::vector<uint8_t>>& blobs) {
  XXH3_state_t* state = XXH3_createState();
  if (state == nullptr || XXH3_64bits_reset(state) != XXH_OK) {
    XXH3_freeState(state);
    throw Error("xxhash: cannot initialise an XXH3 state");
  }
  for (const auto& blob : blobs) {
    const uint64_t length = blob.size();
    XXH3_64bits_update(state, &length, sizeof(length));
    XXH3_64bits_update(state, blob.data(), blob.size());
  }
  const auto sum = static_cast<int64_t>(XXH3_64bits_digest(state));
  XXH3_freeState(state);
  return sum;
}

}  // namespace

struct ShardWriter::Impl {
  std::string path;
  StoreLayout layout;
  std::optional<h5::File> file;
  std::optional<h5::Dataset> patches, patch_id, slide, coords, tissue, patches_xxh3;
  size_t patch_bytes = 0;
  // Raw encoding: the XXH3 of the chunk being filled, and how many of its rows are written.
  XXH3_state_t* chunk_state = nullptr;
  hsize_t chunk_rows = 0;
  std::vector<int64_t> sums;  // checksums of filled chunks, not yet written
  // Buffered rows not yet written (pixels only from add()).
  std::vector<uint8_t> pixels;
  std::vector<std::vector<uint8_t>> blobs;
  std::vector<int64_t> ids, xy;
  std::vector<int32_t> slides;
  std::vector<float> fractions;
  bool closed = false;

  ~Impl() {
    XXH3_freeState(chunk_state);
    if (writeback_fd >= 0) ::close(writeback_fd);
  }

  // Writes `n` raw patches from `rgb` after the rows written so far (spanning chunks as it may)
  // and carries the chunks' checksums along.
  // Starts the kernel's write-back of the shard every kWritebackBytes of pixels
  // (sync_file_range, asynchronous), so that the device writes while patches are still read and
  // the fsync that seals the shard finds little left to write. Best effort: without the
  // descriptor the fsync does it all, and any write error surfaces there.
  static constexpr size_t kWritebackBytes = size_t{64} << 20;
  int writeback_fd = -1;
  size_t unflushed = 0;
  void wrote(size_t bytes) {
    unflushed += bytes;
    if (unflushed < kWritebackBytes || writeback_fd < 0) return;
    ::sync_file_range(writeback_fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    unflushed = 0;
  }

  void write_pixels(const uint8_t* rgb, hsize_t n) {
    if (n == 0) return;
    patches->append(rgb, n);
    wrote(n * patch_bytes);
    const auto chunk = static_cast<hsize_t>(layout.chunk_patches);
    while (n > 0) {
      const hsize_t take = std::min(n, chunk - chunk_rows);
      XXH3_64bits_update(chunk_state, rgb, take * patch_bytes);
      rgb += take * patch_bytes;
      n -= take;
      chunk_rows += take;
      if (chunk_rows == chunk) end_chunk();
    }
  }

  void end_chunk() {
    sums.push_back(static_cast<int64_t>(XXH3_64bits_digest(chunk_state)));
    XXH3_64bits_reset(chunk_state);
    chunk_rows = 0;
  }
};

ShardWriter::ShardWriter(const std::string& path, const StoreLayout& layout, int rank,
                         int world_size)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.path = path;
  s.layout = layout;
  const hsize_t size = static_cast<hsize_t>(layout.patch_size);
  const hsize_t chunk = static_cast<hsize_t>(layout.chunk_patches);
  s.patch_bytes = size * size * 3;
  s.file.emplace(h5::File::open(path, h5::Mode::kCreateTruncate));
  s.writeback_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  h5::DatasetOptions pixel_options;
  // The pixels carry tessera's own checksum per chunk (/patches_xxh3, XXH3 at memory speed)
  // instead of HDF5's Fletcher32: a filter makes HDF5 copy every chunk through a fresh buffer,
  // which made writing 1.28 GB of patches 3-6x slower on the development machine.
  pixel_options.checksum = false;
  if (layout.encoding == "raw") {
    pixel_options.chunk = {chunk, size, size, 3};
    pixel_options.deflate_level = layout.deflate_level;
    // Rows are appended whole, so chunks need no zero fill. With it, HDF5 builds every new chunk
    // in memory (zeros, then the rows) and writes it whole, and a batch that starts a chunk is
    // written twice; without it the rows go straight to the file (docs/performance.md).
    pixel_options.fill = false;
    s.patches.emplace(s.file->create_appendable(shard_names::kPatches, h5::Type::kUInt8, {size, size, 3},
                                                pixel_options));
  } else if (layout.encoding == "jpeg") {
    pixel_options.chunk = {chunk};
    s.patches.emplace(s.file->create_appendable(shard_names::kPatches, h5::Type::kVarBytes, {}, pixel_options));
  } else {
    fail<InvalidInput>("invalid encoding '{}': expected raw or jpeg", layout.encoding);
  }
  h5::DatasetOptions column_options;
  column_options.chunk = {std::max<hsize_t>(chunk, 1024)};
  s.patch_id.emplace(s.file->create_appendable(shard_names::kPatchId, h5::Type::kInt64, {}, column_options));
  s.slide.emplace(s.file->create_appendable(shard_names::kSlide, h5::Type::kInt32, {}, column_options));
  h5::DatasetOptions coord_options;
  coord_options.chunk = {std::max<hsize_t>(chunk, 1024), 2};
  s.coords.emplace(s.file->create_appendable(shard_names::kCoords, h5::Type::kInt64, {2}, coord_options));
  s.tissue.emplace(s.file->create_appendable(shard_names::kTissue, h5::Type::kFloat32, {}, column_options));
  h5::DatasetOptions sum_options;
  sum_options.chunk = {1024};
  s.patches_xxh3.emplace(
      s.file->create_appendable(shard_names::kPatchesXxh3, h5::Type::kInt64, {}, sum_options));

  h5::File& f = *s.file;
  f.set_attr("format_version", kStoreFormatVersion);
  f.set_attr("patch_size", static_cast<int64_t>(layout.patch_size));
  f.set_attr("mpp", layout.mpp);
  f.set_attr("encoding", layout.encoding);
  f.set_attr("jpeg_quality", static_cast<int64_t>(layout.jpeg_quality));
  f.set_attr("compression", layout.deflate_level == 0
                                ? std::string("none")
                                : "deflate:" + std::to_string(layout.deflate_level));
  f.set_attr("chunk_patches", static_cast<int64_t>(layout.chunk_patches));
  f.set_attr("rank", static_cast<int64_t>(rank));
  f.set_attr("world_size", static_cast<int64_t>(world_size));
  if (layout.encoding == "raw") {
    s.chunk_state = XXH3_createState();
    if (s.chunk_state == nullptr || XXH3_64bits_reset(s.chunk_state) != XXH_OK) {
      throw Error("xxhash: cannot initialise an XXH3 state");
    }
  }
  s.pixels.reserve(s.patch_bytes * chunk);
}

ShardWriter::~ShardWriter() = default;

void ShardWriter::add(int64_t patch_id, int32_t slide, int64_t x, int64_t y, float tissue,
                      const uint8_t* rgb) {
  Impl& s = *impl_;
  if (s.layout.encoding == "jpeg") {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<uint8_t> jpeg =
        encode_jpeg(rgb, s.layout.patch_size, s.layout.patch_size, s.layout.jpeg_quality);
    encode_s_ += seconds_since(t0);
    add_encoded(patch_id, slide, x, y, tissue, std::move(jpeg));
    return;
  }
  TESSERA_CHECK(!s.closed, "shard '{}' is already closed", s.path);
  s.pixels.insert(s.pixels.end(), rgb, rgb + s.patch_bytes);
  add_columns(patch_id, slide, x, y, tissue);
}

void ShardWriter::add_encoded(int64_t patch_id, int32_t slide, int64_t x, int64_t y, float tissue,
                              std::vector<uint8_t> jpeg) {
  Impl& s = *impl_;
  TESSERA_CHECK(!s.closed, "shard '{}' is already closed", s.path);
  TESSERA_CHECK(s.layout.encoding == "jpeg", "shard '{}' does not store JPEG patches", s.path);
  s.blobs.push_back(std::move(jpeg));
  add_columns(patch_id, slide, x, y, tissue);
}

void ShardWriter::add_columns(int64_t patch_id, int32_t slide, int64_t x, int64_t y,
                              float tissue) {
  Impl& s = *impl_;
  s.ids.push_back(patch_id);
  s.slides.push_back(slide);
  s.xy.push_back(x);
  s.xy.push_back(y);
  s.fractions.push_back(tissue);
  if (static_cast<int>(s.ids.size()) >= s.layout.chunk_patches) flush_buffer();
}

void ShardWriter::add_rows(size_t n, const int64_t* patch_ids, const int32_t* slides,
                           const int64_t* xy, const float* tissue, const uint8_t* rgb) {
  Impl& s = *impl_;
  if (s.layout.encoding != "raw") {
    for (size_t i = 0; i < n; ++i) {
      add(patch_ids[i], slides[i], xy[2 * i], xy[2 * i + 1], tissue[i], rgb + i * s.patch_bytes);
    }
    return;
  }
  TESSERA_CHECK(!s.closed, "shard '{}' is already closed", s.path);
  auto t0 = std::chrono::steady_clock::now();
  // Rows buffered by add() go first, then these straight from the caller's memory.
  s.write_pixels(s.pixels.data(), s.pixels.size() / s.patch_bytes);
  s.pixels.clear();
  s.write_pixels(rgb, n);
  write_s_ += seconds_since(t0);
  s.ids.insert(s.ids.end(), patch_ids, patch_ids + n);
  s.slides.insert(s.slides.end(), slides, slides + n);
  s.xy.insert(s.xy.end(), xy, xy + 2 * n);
  s.fractions.insert(s.fractions.end(), tissue, tissue + n);
  if (static_cast<int>(s.ids.size()) >= s.layout.chunk_patches) flush_buffer();
}

void ShardWriter::flush_buffer() {
  Impl& s = *impl_;
  if (s.ids.empty()) return;
  auto t0 = std::chrono::steady_clock::now();
  const hsize_t n = s.ids.size();
  if (s.layout.encoding == "jpeg") {
    s.patches->append_blobs(s.blobs);
    s.sums.push_back(blobs_checksum(s.blobs));
    size_t bytes = 0;
    for (const auto& blob : s.blobs) bytes += blob.size();
    s.wrote(bytes);
  } else {
    s.write_pixels(s.pixels.data(), s.pixels.size() / s.patch_bytes);
  }
  if (!s.sums.empty()) s.patches_xxh3->append(s.sums.data(), s.sums.size());
  s.patch_id->append(s.ids.data(), n);
  s.slide->append(s.slides.data(), n);
  s.coords->append(s.xy.data(), n);
  s.tissue->append(s.fractions.data(), n);
  rows_ += static_cast<int64_t>(n);
  s.sums.clear();
  s.pixels.clear();
  s.blobs.clear();
  s.ids.clear();
  s.slides.clear();
  s.xy.clear();
  s.fractions.clear();
  write_s_ += seconds_since(t0);
}

void ShardWriter::close() {
  Impl& s = *impl_;
  if (s.closed) return;
  if (s.chunk_state != nullptr) {
    s.write_pixels(s.pixels.data(), s.pixels.size() / s.patch_bytes);
    s.pixels.clear();
    if (s.chunk_rows > 0) s.end_chunk();  // the last chunk, partly filled
  }
  flush_buffer();
  if (!s.sums.empty()) s.patches_xxh3->append(s.sums.data(), s.sums.size());
  auto t0 = std::chrono::steady_clock::now();
  s.patches->close();
  s.patches_xxh3->close();
  s.patch_id->close();
  s.slide->close();
  s.coords->close();
  s.tissue->close();
  s.file->close();
  s.closed = true;
  write_s_ += seconds_since(t0);
}

struct ShardReader::Impl {
  std::string path;
  std::optional<h5::File> file;
  std::optional<h5::Dataset> patches;
  int64_t rows = 0;
  int patch_size = 0;
  std::string encoding;
  hsize_t chunk_rows = 1;            // patches per chunk (and per checksum)
  std::vector<int64_t> sums;         // /patches_xxh3: one checksum per chunk
  int64_t cached_chunk = -1;         // the chunk held in `pixels` or `blobs`, verified
  std::vector<uint8_t> pixels;       // raw: that chunk's pixels
  std::vector<std::vector<uint8_t>> blobs;  // jpeg: that chunk's blobs

  // Reads chunk `c` whole and checks it against its checksum (once: it stays cached).
  void load_chunk(int64_t c);
};

void ShardReader::Impl::load_chunk(int64_t c) {
  if (c == cached_chunk) return;
  cached_chunk = -1;
  const hsize_t first = static_cast<hsize_t>(c) * chunk_rows;
  const hsize_t count = std::min<hsize_t>(chunk_rows, static_cast<hsize_t>(rows) - first);
  int64_t sum = 0;
  if (encoding == "jpeg") {
    blobs = patches->read_blobs(first, count);
    sum = blobs_checksum(blobs);
  } else {
    const size_t patch_bytes = static_cast<size_t>(patch_size) * patch_size * 3;
    pixels.resize(count * patch_bytes);
    patches->read_rows(pixels.data(), first, count);
    sum = bytes_checksum(pixels.data(), pixels.size());
  }
  if (static_cast<size_t>(c) >= sums.size() || sum != sums[static_cast<size_t>(c)]) {
    fail<IoError>("shard '{}': patches {}..{} (/patches chunk {}) do not match their checksum in "
                  "/patches_xxh3: the file is damaged",
                  path, first, first + count - 1, c);
  }
  cached_chunk = c;
}

ShardReader::ShardReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.path = path;
  s.file.emplace(h5::File::open(path, h5::Mode::kRead));
  int64_t version = s.file->attr_int("format_version");
  if (version != kStoreFormatVersion) {
    fail<IoError>("shard '{}' has format version {}, this build reads version {}", path, version,
                  kStoreFormatVersion);
  }
  s.patch_size = static_cast<int>(s.file->attr_int("patch_size"));
  s.encoding = s.file->attr_string("encoding");
  s.patches.emplace(s.file->open_dataset(shard_names::kPatches));
  const std::vector<hsize_t> chunk = s.patches->chunk_dims();
  if (!chunk.empty()) s.chunk_rows = chunk[0];
  s.rows = static_cast<int64_t>(s.patches->dims().at(0));
  s.sums = s.file->open_dataset(shard_names::kPatchesXxh3).read_all<int64_t>();
  const auto chunks = (static_cast<hsize_t>(s.rows) + s.chunk_rows - 1) / s.chunk_rows;
  if (s.sums.size() != chunks) {
    fail<IoError>("shard '{}' holds {} patch checksums for {} chunks of patches", path,
                  s.sums.size(), chunks);
  }
}

ShardReader::~ShardReader() = default;
ShardReader::ShardReader(ShardReader&&) noexcept = default;
ShardReader& ShardReader::operator=(ShardReader&&) noexcept = default;

const std::string& ShardReader::path() const { return impl_->path; }
int64_t ShardReader::rows() const { return impl_->rows; }
int ShardReader::patch_size() const { return impl_->patch_size; }
const std::string& ShardReader::encoding() const { return impl_->encoding; }

ShardColumns ShardReader::read_columns() const {
  ShardColumns c;
  c.patch_id = impl_->file->open_dataset(shard_names::kPatchId).read_all<int64_t>();
  c.slide = impl_->file->open_dataset(shard_names::kSlide).read_all<int32_t>();
  c.coords = impl_->file->open_dataset(shard_names::kCoords).read_all<int64_t>();
  c.tissue = impl_->file->open_dataset(shard_names::kTissue).read_all<float>();
  const size_t n = c.patch_id.size();
  if (c.slide.size() != n || c.coords.size() != 2 * n || c.tissue.size() != n ||
      static_cast<int64_t>(n) != impl_->rows) {
    fail<IoError>("shard '{}' is inconsistent: {} patches but {} ids, {} slides, {} coords, {} "
                  "tissue values",
                  impl_->path, impl_->rows, n, c.slide.size(), c.coords.size() / 2,
                  c.tissue.size());
  }
  return c;
}

ShardColumns ShardReader::read_columns(int64_t first, int64_t n) const {
  if (first < 0 || n < 0 || first + n > impl_->rows) {
    fail<IoError>("shard '{}' has {} rows: rows {}..{} are past its end", impl_->path,
                  impl_->rows, first, first + n);
  }
  ShardColumns c;
  c.patch_id.resize(static_cast<size_t>(n));
  c.slide.resize(static_cast<size_t>(n));
  c.coords.resize(2 * static_cast<size_t>(n));
  c.tissue.resize(static_cast<size_t>(n));
  if (n == 0) return c;
  const h5::File& f = *impl_->file;
  const auto at = static_cast<hsize_t>(first), count = static_cast<hsize_t>(n);
  f.open_dataset(shard_names::kPatchId).read_rows(c.patch_id.data(), at, count);
  f.open_dataset(shard_names::kSlide).read_rows(c.slide.data(), at, count);
  f.open_dataset(shard_names::kCoords).read_rows(c.coords.data(), at, count);
  f.open_dataset(shard_names::kTissue).read_rows(c.tissue.data(), at, count);
  return c;
}

void ShardReader::read_patches(const std::vector<uint64_t>& rows, uint8_t* rgb) const {
  // Whole chunks are read and verified against their checksum; the chunk last read stays
  // cached, so a rank's batches read each chunk once.
  Impl& s = *impl_;
  const size_t patch_bytes = static_cast<size_t>(s.patch_size) * s.patch_size * 3;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0 && rows[i] <= rows[i - 1]) {
      fail("shard '{}': rows to read are not ascending at {} ({} after {})", s.path, i, rows[i],
           rows[i - 1]);
    }
    if (rows[i] >= static_cast<uint64_t>(s.rows)) {
      fail<IoError>("shard '{}' has {} rows; row {} asked for", s.path, s.rows, rows[i]);
    }
    const auto c = static_cast<int64_t>(rows[i] / s.chunk_rows);
    s.load_chunk(c);
    const size_t k = rows[i] % s.chunk_rows;
    if (s.encoding == "jpeg") {
      try {
        decode_jpeg(s.blobs[k].data(), s.blobs[k].size(), s.patch_size, s.patch_size,
                    rgb + i * patch_bytes);
      } catch (const IoError& e) {
        fail<IoError>("shard '{}' row {}: {}", s.path, rows[i], e.what());
      }
    } else {
      std::memcpy(rgb + i * patch_bytes, s.pixels.data() + k * patch_bytes, patch_bytes);
    }
  }
}

}  // namespace tessera
