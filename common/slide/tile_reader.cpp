#include "common/slide/tile_reader.h"

#include <fcntl.h>
#include <unistd.h>


#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstring>
#include <condition_variable>
#include <list>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "common/core/clock.h"
#include "common/core/error.h"
#include "common/slide/j2k_decode.h"
#include "common/slide/jpeg_decode.h"

namespace tessera {

namespace {

using Clock = std::chrono::steady_clock;

// One thread's buffer for a tile's compressed bytes (tables + one tile's stream), kept for the
// thread's life.
std::vector<uint8_t>& thread_compressed_buffer() {
  thread_local std::vector<uint8_t> buffer;
  return buffer;
}

}  // namespace

struct TileReader::Impl {
  std::string path;
  std::vector<std::string> files;
  std::vector<int> fds;  // one per file
  std::vector<TileLevel> levels;
  size_t capacity = 1;  // tiles kept

  // LRU of decoded tiles, front the most recently used, guarded by `mutex`. An entry that is not
  // `ready` is being decoded by one thread; others needing it wait on `decoded`. Such entries are
  // never evicted (the cache may then exceed its capacity by the tiles in flight).
  struct Entry {
    uint64_t key;
    std::shared_ptr<std::vector<uint8_t>> rgb;
    bool ready = false;
  };
  mutable std::mutex mutex;
  std::condition_variable decoded;
  std::list<Entry> lru;
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> spare;  // evicted buffers nobody holds
  TileReaderStats stats;

  ~Impl() {
    for (int fd : fds) ::close(fd);
  }

  // Evicts the least recently used ready entry while the cache is full; keeps its buffer for
  // reuse when no reader holds it any more.
  void make_room() {
    while (lru.size() >= capacity) {
      auto victim = std::find_if(lru.rbegin(), lru.rend(), [](const Entry& e) { return e.ready; });
      if (victim == lru.rend()) return;
      if (victim->rgb.use_count() == 1 && spare.size() < 4) spare.push_back(std::move(victim->rgb));
      index.erase(victim->key);
      lru.erase(std::next(victim).base());
    }
  }

  // Reads the complete stream of a tile into `out` (JPEG tables spliced in front).
  void read_stream(int level_index, int64_t col, int64_t row, std::vector<uint8_t>& out) const;
  // Reads and decodes a tile of `level_index` into `rgb` (on the calling thread, unlocked).
  void decode_tile(int level_index, int64_t col, int64_t row, std::vector<uint8_t>& rgb,
                   TileReaderStats& counted) const;
};

TileReader::TileReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TileReader::~TileReader() = default;

TileReaderStats TileReader::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats;
}

TileCodec TileReader::codec(int level) const { return impl_->levels.at(level).codec; }

std::pair<int, int> TileReader::tile_size(int level) const {
  const TileLevel& l = impl_->levels.at(level);
  return {l.tile_w, l.tile_h};
}

std::vector<uint8_t> TileReader::jpeg_stream(int level_index, int64_t col, int64_t row) const {
  const TileLevel& level = impl_->levels.at(level_index);
  if (col < 0 || row < 0 || col >= level.cols || row >= level.rows) {
    fail<IoError>("slide '{}': level {} has no tile ({}, {})", impl_->path, level_index, col, row);
  }
  std::vector<uint8_t> out;
  if (level.sizes[row * level.cols + col] > 0) impl_->read_stream(level_index, col, row, out);
  return out;
}

std::unique_ptr<TileReader> TileReader::from_levels(const std::string& path,
                                                    const std::vector<std::string>& files,
                                                    std::vector<TileLevel> levels,
                                                    size_t cache_bytes, std::string* why_not) {
  auto refuse = [&](std::string reason) -> std::unique_ptr<TileReader> {
    if (why_not != nullptr) *why_not = std::move(reason);
    return nullptr;
  };
  if (levels.empty()) return refuse("no levels");
  size_t largest_tile = 0;
  for (size_t l = 0; l < levels.size(); ++l) {
    const TileLevel& level = levels[l];
    const size_t tiles = static_cast<size_t>(level.cols * level.rows);
    const int max_side = level.codec == TileCodec::kSource ? (1 << 30) : 8192;  // strips: any width
    if (level.tile_w <= 0 || level.tile_h <= 0 || level.tile_w > max_side || level.tile_h > max_side ||
        level.cols != (level.width + level.tile_w - 1) / level.tile_w ||
        level.rows != (level.height + level.tile_h - 1) / level.tile_h ||
        level.offsets.size() != tiles || level.sizes.size() != tiles || level.file < 0 ||
        static_cast<size_t>(level.file) >= files.size() ||
        (!level.tile_files.empty() && level.tile_files.size() != tiles) ||
        std::any_of(level.tile_files.begin(), level.tile_files.end(),
                    [&](int f) { return f < 0 || static_cast<size_t>(f) >= files.size(); }) ||
        (level.codec == TileCodec::kSource) != (level.source != nullptr)) {
      return refuse(fmt::format("level {} ({}x{}): inconsistent tile grid ({}x{} tiles)", l,
                                level.width, level.height, level.tile_w, level.tile_h));
    }
    if (level.codec == TileCodec::kRaw) {
      for (uint64_t size : level.sizes) {
        if (size != 0 && size != static_cast<uint64_t>(level.tile_w) * level.tile_h * 3) {
          return refuse(fmt::format("level {}: an uncompressed tile of {} bytes, not {}x{}x3", l,
                                    size, level.tile_w, level.tile_h));
        }
      }
    }
    largest_tile = std::max(largest_tile, static_cast<size_t>(level.tile_w) * level.tile_h * 3);
  }

  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->files = files;
  impl->levels = std::move(levels);
  for (const std::string& file : files) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return refuse(fmt::format("cannot open '{}': {}", file, std::strerror(errno)));
    impl->fds.push_back(fd);
  }
  if (cache_bytes == 0) {
    int64_t cols = 0;
    for (const TileLevel& level : impl->levels) cols = std::max(cols, level.cols);
    impl->capacity = std::min(static_cast<size_t>(3 * cols + 4), kMaxDefaultTileCache / largest_tile);
  } else {
    impl->capacity = cache_bytes / largest_tile;
  }
  impl->capacity = std::max<size_t>(1, impl->capacity);
  std::unique_ptr<TileReader> reader(new TileReader(std::move(impl)));

  // One tile of each level must decode (a JPEG the reader cannot take is OpenSlide's to read).
  for (size_t l = 0; l < reader->impl_->levels.size(); ++l) {
    const TileLevel& level = reader->impl_->levels[l];
    const auto first = std::find_if(level.sizes.begin(), level.sizes.end(),
                                    [](uint64_t s) { return s > 0; });
    if (first == level.sizes.end()) continue;
    try {
      reader->tile(static_cast<int>(l), (first - level.sizes.begin()) % level.cols,
                   (first - level.sizes.begin()) / level.cols);
    } catch (const Error& e) {
      return refuse(fmt::format("level {}: {}", l, e.what()));
    }
  }
  // Counters and cache describe the caller's reads only.
  reader->impl_->lru.clear();
  reader->impl_->index.clear();
  reader->impl_->stats = {};
  return reader;
}

void TileReader::Impl::read_stream(int level_index, int64_t col, int64_t row,
                                   std::vector<uint8_t>& out) const {
  const TileLevel& level = levels[level_index];
  const int64_t t = row * level.cols + col;
  const uint64_t size = level.sizes[t];
  if (size > (256u << 20)) {
    fail<IoError>("slide '{}': level {} tile ({}, {}) claims {} bytes", path, level_index, col,
                  row, size);
  }
  // Tables (without EOI) then the tile's stream (without SOI): one complete JPEG. The stream is
  // read in place, its SOI landing on the tables' last two bytes, which are then put back.
  const bool splice = level.codec == TileCodec::kJpeg && !level.tables.empty();
  const size_t base = splice ? level.tables.size() - 2 : 0;
  out.resize(base + size);
  std::copy(level.tables.begin(), level.tables.begin() + static_cast<std::ptrdiff_t>(base),
            out.begin());
  size_t got = 0;
  while (got < size) {
    const int fd = fds[level.tile_files.empty() ? level.file : level.tile_files[t]];
    const ssize_t n = ::pread(fd, out.data() + base + got, size - got,
                              static_cast<off_t>(level.offsets[t] + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fail<IoError>("slide '{}': cannot read level {} tile ({}, {}) at offset {}: {}", path,
                    level_index, col, row, level.offsets[t],
                    n < 0 ? std::strerror(errno) : "file ends early");
    }
    got += static_cast<size_t>(n);
  }
  if (level.codec == TileCodec::kJpeg && !level.tables.empty()) {
    if (size < 2 || out[base] != 0xFF || out[base + 1] != 0xD8) {
      fail<IoError>("slide '{}': level {} tile ({}, {}) is not a JPEG stream", path, level_index,
                    col, row);
    }
    out[base] = level.tables[base];
    out[base + 1] = level.tables[base + 1];
  }
}

void TileReader::Impl::decode_tile(int level_index, int64_t col, int64_t row,
                                   std::vector<uint8_t>& rgb, TileReaderStats& counted) const {
  const TileLevel& level = levels[level_index];
  if (level.codec == TileCodec::kSource) {
    const auto t0 = Clock::now();
    rgb.resize(static_cast<size_t>(level.tile_w) * level.tile_h * 3);
    level.source->decode(row * level.cols + col, rgb.data());
    counted.bytes_read += static_cast<int64_t>(level.sizes[row * level.cols + col]);
    counted.decode_s += seconds_since(t0);
    ++counted.tiles_decoded;
    return;
  }
  std::vector<uint8_t>& compressed = thread_compressed_buffer();
  auto t0 = Clock::now();
  read_stream(level_index, col, row, compressed);
  counted.bytes_read += static_cast<int64_t>(level.sizes[row * level.cols + col]);
  counted.read_s += seconds_since(t0);

  t0 = Clock::now();
  rgb.resize(static_cast<size_t>(level.tile_w) * level.tile_h * 3);
  std::string error;
  switch (level.codec) {
    case TileCodec::kJpeg:
      error = decode_jpeg_tile(compressed.data(), compressed.size(), level.jpeg_rgb, level.tile_w,
                               level.tile_h, rgb.data());
      break;
    case TileCodec::kJpeg2000:
      error = decode_j2k(compressed.data(), compressed.size(), level.tile_w, level.tile_h,
                         rgb.data());
      break;
    case TileCodec::kRaw:
      std::copy(compressed.begin(), compressed.end(), rgb.begin());
      break;
    case TileCodec::kSource:
      break;  // decoded above
  }
  if (!error.empty()) {
    fail<IoError>("slide '{}': cannot decode level {} tile ({}, {}): {}", path, level_index, col,
                  row, error);
  }
  counted.decode_s += seconds_since(t0);
  ++counted.tiles_decoded;
}

TileReader::TileBuffer TileReader::tile(int level_index, int64_t col, int64_t row) {
  Impl& m = *impl_;
  const TileLevel& level = m.levels[level_index];
  const int64_t t = row * level.cols + col;
  if (level.sizes[t] == 0) return nullptr;
  const uint64_t key = (static_cast<uint64_t>(level_index) << 48) | static_cast<uint64_t>(t);
  std::unique_lock<std::mutex> lock(m.mutex);
  for (auto it = m.index.find(key); it != m.index.end(); it = m.index.find(key)) {
    if (it->second->ready) {
      m.lru.splice(m.lru.begin(), m.lru, it->second);
      ++m.stats.tile_hits;
      return it->second->rgb;
    }
    m.decoded.wait(lock);  // another thread is decoding it (if that fails, this one tries)
  }
  m.make_room();
  std::shared_ptr<std::vector<uint8_t>> rgb;
  if (m.spare.empty()) {
    rgb = std::make_shared<std::vector<uint8_t>>();
  } else {
    rgb = std::move(m.spare.back());
    m.spare.pop_back();
  }
  m.lru.push_front({key, nullptr, false});
  const auto entry = m.lru.begin();
  m.index[key] = entry;
  lock.unlock();

  TileReaderStats counted;
  try {
    m.decode_tile(level_index, col, row, *rgb, counted);
  } catch (...) {
    lock.lock();
    m.index.erase(key);
    m.lru.erase(entry);
    m.decoded.notify_all();
    throw;
  }
  lock.lock();
  entry->rgb = rgb;
  entry->ready = true;
  m.stats.tiles_decoded += counted.tiles_decoded;
  m.stats.bytes_read += counted.bytes_read;
  m.stats.read_s += counted.read_s;
  m.stats.decode_s += counted.decode_s;
  m.decoded.notify_all();
  return rgb;
}

void TileReader::read_rgb(int level_index, int64_t x, int64_t y, int w, int h, uint8_t* rgb) {
  const TileLevel& level = impl_->levels.at(level_index);
  const size_t row_bytes = static_cast<size_t>(w) * 3;
  // The part of the region inside the level; the rest is white.
  const int64_t x0 = std::max<int64_t>(x, 0), y0 = std::max<int64_t>(y, 0);
  const int64_t x1 = std::min<int64_t>(x + w, level.width);
  const int64_t y1 = std::min<int64_t>(y + h, level.height);
  if (x0 != x || y0 != y || x1 != x + w || y1 != y + h) {
    std::memset(rgb, 255, row_bytes * h);
  }
  if (x0 >= x1 || y0 >= y1) return;
  const int tw = level.tile_w, th = level.tile_h;
  // Tiles in storage order (row-major), each copied into the region once.
  for (int64_t row = y0 / th; row <= (y1 - 1) / th; ++row) {
    const int64_t ty0 = std::max(y0, row * th), ty1 = std::min(y1, (row + 1) * th);
    for (int64_t col = x0 / tw; col <= (x1 - 1) / tw; ++col) {
      const int64_t tx0 = std::max(x0, col * tw), tx1 = std::min(x1, (col + 1) * tw);
      const TileBuffer held = tile(level_index, col, row);
      const uint8_t* tile_rgb = held ? held->data() : nullptr;
      const size_t span = static_cast<size_t>(tx1 - tx0) * 3;
      for (int64_t yy = ty0; yy < ty1; ++yy) {
        uint8_t* out = rgb + static_cast<size_t>(yy - y) * row_bytes + static_cast<size_t>(tx0 - x) * 3;
        if (tile_rgb == nullptr) {
          std::memset(out, 255, span);
        } else {
          std::memcpy(out, tile_rgb + (static_cast<size_t>(yy - row * th) * tw + (tx0 - col * tw)) * 3,
                      span);
        }
      }
    }
  }
}

}  // namespace tessera
