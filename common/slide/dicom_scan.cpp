#include "common/slide/dicom_scan.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/core/error.h"

namespace tessera {

namespace {

constexpr uint32_t kUndefined = 0xFFFFFFFFu;
constexpr uint32_t kItem = 0xFFFEE000u;
constexpr uint32_t kItemEnd = 0xFFFEE00Du;
constexpr uint32_t kSequenceEnd = 0xFFFEE0DDu;
constexpr uint32_t kPixelData = 0x7FE00010u;

// Thrown inside the walk; locate_frames turns it into an IoError naming the file.
struct Bad {
  std::string why;
};

class Walker {
 public:
  Walker(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  struct Element {
    uint32_t tag;
    char vr[3];
    uint32_t length;
    uint64_t value;  // offset of the value
  };

  uint64_t pos = 0;

  uint32_t u32(uint64_t at) const {
    need(at, 4);
    return static_cast<uint32_t>(data_[at]) | static_cast<uint32_t>(data_[at + 1]) << 8 |
           static_cast<uint32_t>(data_[at + 2]) << 16 | static_cast<uint32_t>(data_[at + 3]) << 24;
  }
  uint16_t u16(uint64_t at) const {
    need(at, 2);
    return static_cast<uint16_t>(data_[at] | data_[at + 1] << 8);
  }
  void need(uint64_t at, uint64_t n) const {
    if (at > size_ || n > size_ - at) {
      throw Bad{fmt::format("truncated: the file ends at byte {} inside its elements (at {})",
                            size_, at)};
    }
  }

  // The element header at `pos` (explicit VR unless `implicit`); advances past the header.
  Element header(bool implicit) {
    Element e{};
    e.tag = static_cast<uint32_t>(u16(pos)) << 16 | u16(pos + 2);
    if (implicit || (e.tag >> 16) == 0xFFFE) {
      e.length = u32(pos + 4);
      pos += 8;
    } else {
      need(pos + 4, 2);
      e.vr[0] = static_cast<char>(data_[pos + 4]);
      e.vr[1] = static_cast<char>(data_[pos + 5]);
      static const char* kLong[] = {"OB", "OD", "OF", "OL", "OV", "OW", "SQ",
                                    "SV", "UC", "UN", "UR", "UT", "UV"};
      bool long_form = false;
      for (const char* v : kLong) long_form = long_form || (v[0] == e.vr[0] && v[1] == e.vr[1]);
      if (long_form) {
        e.length = u32(pos + 8);
        pos += 12;
      } else {
        e.length = u16(pos + 6);
        pos += 8;
      }
    }
    e.value = pos;
    return e;
  }

  // Skips the value of `e` (pos is at its start), walking undefined-length sequences and items.
  void skip(const Element& e, bool implicit) {
    if (e.length != kUndefined) {
      need(pos, e.length);
      pos += e.length;
      return;
    }
    // A sequence (or UN of undefined length, whose content is implicit VR) of items.
    const bool inner_implicit = implicit || (e.vr[0] == 'U' && e.vr[1] == 'N');
    for (;;) {
      const Element item = header(true);
      if (item.tag == kSequenceEnd) return;
      if (item.tag != kItem) throw Bad{fmt::format("malformed sequence at byte {}", item.value - 8)};
      if (item.length != kUndefined) {
        need(pos, item.length);
        pos += item.length;
        continue;
      }
      for (;;) {
        const Element inner = header(inner_implicit);
        if (inner.tag == kItemEnd) break;
        skip(inner, inner_implicit);
      }
    }
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
};

struct Mapping {
  void* data = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (data != MAP_FAILED) ::munmap(data, size);
  }
};

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

DicomFrames walk(const uint8_t* data, uint64_t size, int64_t frames, uint64_t frame_bytes) {
  Walker w(data, size);
  w.need(0, 132);
  if (std::memcmp(data + 128, "DICM", 4) != 0) throw Bad{"no DICM preamble"};
  w.pos = 132;
  // File meta information (group 0002, explicit VR), then the data set.
  while (w.pos + 2 <= size && w.u16(w.pos) == 0x0002) {
    const auto e = w.header(false);
    w.skip(e, false);
  }
  for (;;) {
    if (w.pos >= size) throw Bad{"no Pixel Data element"};
    const auto e = w.header(false);
    if (e.tag == kPixelData) {
      DicomFrames out;
      if (e.length != kUndefined) {
        if (static_cast<uint64_t>(frames) * frame_bytes > e.length) {
          throw Bad{fmt::format("native Pixel Data of {} bytes, not {} frames of {} bytes",
                                e.length, frames, frame_bytes)};
        }
        w.need(e.value, static_cast<uint64_t>(frames) * frame_bytes);
        for (int64_t f = 0; f < frames; ++f) {
          out.offsets.push_back(e.value + static_cast<uint64_t>(f) * frame_bytes);
          out.sizes.push_back(frame_bytes);
        }
        return out;
      }
      out.encapsulated = true;
      const auto table = w.header(true);
      if (table.tag != kItem || table.length == kUndefined) throw Bad{"no Basic Offset Table item"};
      w.need(w.pos, table.length);
      std::vector<uint64_t> bot;
      for (uint32_t i = 0; i + 4 <= table.length; i += 4) bot.push_back(w.u32(table.value + i));
      w.pos += table.length;
      const uint64_t first_item = w.pos;
      std::vector<uint64_t> item_at, value_at, length;
      for (;;) {
        const auto item = w.header(true);
        if (item.tag == kSequenceEnd) break;
        if (item.tag != kItem || item.length == kUndefined) {
          throw Bad{fmt::format("malformed Pixel Data fragment at byte {}", item.value - 8)};
        }
        w.need(item.value, item.length);
        item_at.push_back(item.value - 8 - first_item);
        value_at.push_back(item.value);
        length.push_back(item.length);
        w.pos += item.length;
      }
      if (static_cast<int64_t>(value_at.size()) == frames) {
        out.offsets = value_at;
        out.sizes = length;
        return out;
      }
      if (static_cast<int64_t>(bot.size()) != frames) {
        throw Bad{fmt::format("{} Pixel Data fragments for {} frames and no offset table to group "
                              "them",
                              value_at.size(), frames)};
      }
      // Frames through the offset table: each must be one fragment.
      for (int64_t f = 0; f < frames; ++f) {
        size_t k = 0;
        while (k < item_at.size() && item_at[k] != bot[f]) ++k;
        if (k == item_at.size()) throw Bad{fmt::format("offset table entry {} is no fragment", f)};
        const uint64_t next = f + 1 < frames ? bot[f + 1] : UINT64_MAX;
        if (k + 1 < item_at.size() && item_at[k + 1] < next) {
          throw Bad{fmt::format("frame {} is split over several fragments (not supported)", f)};
        }
        out.offsets.push_back(value_at[k]);
        out.sizes.push_back(length[k]);
      }
      return out;
    }
    w.skip(e, false);
  }
}

}  // namespace

DicomFrames locate_frames(const std::string& file, int64_t frames, uint64_t frame_bytes) {
  Fd fd{::open(file.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) fail<IoError>("cannot open DICOM file '{}': {}", file, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) fail<IoError>("cannot stat '{}': {}", file, std::strerror(errno));
  Mapping map;
  map.size = static_cast<size_t>(st.st_size);
  if (map.size == 0) fail<IoError>("DICOM file '{}' is empty", file);
  map.data = ::mmap(nullptr, map.size, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (map.data == MAP_FAILED) fail<IoError>("cannot map '{}': {}", file, std::strerror(errno));
  try {
    return walk(static_cast<const uint8_t*>(map.data), map.size, frames, frame_bytes);
  } catch (const Bad& bad) {
    fail<IoError>("DICOM file '{}': {}", file, bad.why);
  }
}

}  // namespace tessera
