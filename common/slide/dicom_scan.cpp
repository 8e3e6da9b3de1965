#include "common/slide/dicom_scan.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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
      static const char* kShort[] = {"AE", "AS", "AT", "CS", "DA", "DS", "DT", "FL", "FD",
                                     "IS", "LO", "LT", "PN", "SH", "SL", "SS", "ST", "TM",
                                     "UI", "UL", "US"};
      bool long_form = false, known = false;
      for (const char* v : kLong) long_form = long_form || (v[0] == e.vr[0] && v[1] == e.vr[1]);
      for (const char* v : kShort) known = known || (v[0] == e.vr[0] && v[1] == e.vr[1]);
      // DCMTK reads an unknown VR its own way; a walk that read it otherwise would not bound
      // DCMTK's parse.
      if (!long_form && !known) {
        throw Bad{fmt::format("element ({:04X},{:04X}) at byte {} has no valid VR", e.tag >> 16,
                              e.tag & 0xFFFF, pos)};
      }
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

  // Whether DCMTK parses the value of `e` as a sequence of items: undefined length, VR SQ, or,
  // in implicit VR where the VR is the dictionary's, a value that starts with an item.
  bool is_sequence(const Element& e, bool implicit) const {
    if (e.length == kUndefined) return true;
    if (!implicit) return e.vr[0] == 'S' && e.vr[1] == 'Q';
    return e.length >= 8 && u32(e.value) == 0xE000FFFEu;
  }

  // Skips the value of `e` (pos is at its start). A sequence's items are walked, iteratively:
  // `depth` sequences enclose `e`, and one nested deeper than kMaxDicomNesting is refused.
  void skip(const Element& e, bool implicit, int depth = 0) {
    if (!is_sequence(e, implicit)) {
      need(pos, e.length);
      pos += e.length;
      return;
    }
    struct Open {
      bool item;        // an item, else a sequence
      uint64_t end;     // of its value; kNoEnd for undefined length
      bool implicit;    // encoding of the elements inside
    };
    constexpr uint64_t kNoEnd = UINT64_MAX;
    std::vector<Open> open;
    int sequences = depth;
    auto enter = [&](const Element& seq, bool seq_implicit) {
      if (++sequences > kMaxDicomNesting) {
        throw Bad{fmt::format("sequences nested more than {} deep (at byte {})", kMaxDicomNesting,
                              seq.value)};
      }
      uint64_t seq_end = kNoEnd;
      if (seq.length != kUndefined) {
        need(seq.value, seq.length);
        seq_end = seq.value + seq.length;
      }
      // An undefined-length UN is a sequence in implicit VR (DICOM PS3.5 6.2.2).
      open.push_back({false, seq_end, seq_implicit || (seq.vr[0] == 'U' && seq.vr[1] == 'N')});
    };
    enter(e, implicit);
    while (!open.empty()) {
      const Open top = open.back();
      if (top.end != kNoEnd && pos >= top.end) {
        if (pos > top.end) throw Bad{fmt::format("an element crosses the end of its item or "
                                                 "sequence at byte {}", top.end)};
        if (!top.item) --sequences;
        open.pop_back();
        continue;
      }
      if (!top.item) {
        const Element item = header(true);
        if (item.tag == kSequenceEnd) {
          --sequences;
          open.pop_back();
          continue;
        }
        if (item.tag != kItem) throw Bad{fmt::format("malformed sequence at byte {}", item.value - 8)};
        uint64_t item_end = kNoEnd;
        if (item.length != kUndefined) {
          need(pos, item.length);
          item_end = pos + item.length;
          if (top.end != kNoEnd && item_end > top.end) {
            throw Bad{fmt::format("an item crosses the end of its sequence at byte {}", top.end)};
          }
        }
        open.push_back({true, item_end, top.implicit});
        continue;
      }
      const Element inner = header(top.implicit);
      if (inner.tag == kItemEnd) {
        open.pop_back();
        continue;
      }
      if (is_sequence(inner, top.implicit)) {
        enter(inner, top.implicit);
      } else {
        need(pos, inner.length);
        pos += inner.length;
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

// Walks the file meta information (explicit VR, group 0002) from byte 132; returns its Transfer
// Syntax UID ("" without one) and leaves w.pos at the data set.
std::string walk_meta(Walker& w, const uint8_t* data, uint64_t size) {
  w.need(0, 132);
  if (std::memcmp(data + 128, "DICM", 4) != 0) throw Bad{"no DICM preamble"};
  w.pos = 132;
  std::string transfer;
  while (w.pos + 2 <= size && w.u16(w.pos) == 0x0002) {
    const auto e = w.header(false);
    if (e.tag == 0x00020010u && e.length != kUndefined) {
      w.need(e.value, e.length);
      transfer.assign(reinterpret_cast<const char*>(data + e.value), e.length);
      while (!transfer.empty() && (transfer.back() == '\0' || transfer.back() == ' ')) {
        transfer.pop_back();
      }
    }
    w.skip(e, false);
  }
  return transfer;
}

// Walks the data set from w.pos to its top-level Pixel Data; returns that element's header.
Walker::Element walk_to_pixel_data(Walker& w, uint64_t size, bool implicit) {
  for (;;) {
    if (w.pos >= size) throw Bad{"no Pixel Data element"};
    const auto e = w.header(implicit);
    if (e.tag == kPixelData) return e;
    w.skip(e, implicit);
  }
}

DicomFrames walk(const uint8_t* data, uint64_t size, int64_t frames, uint64_t frame_bytes) {
  Walker w(data, size);
  walk_meta(w, data, size);
  // A frame takes at least a byte of the file: a larger count is not looked for.
  if (frames <= 0 || static_cast<uint64_t>(frames) > size) {
    throw Bad{fmt::format("{} frames claimed in a file of {} bytes", frames, size)};
  }
  const auto e = walk_to_pixel_data(w, size, false);
  DicomFrames out;
  if (e.length != kUndefined) {
    // Divided, not multiplied: a count chosen so that frames x frame_bytes wraps to the
    // real length must not pass.
    if (frame_bytes == 0 || static_cast<uint64_t>(frames) > e.length / frame_bytes) {
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
    // Fragments lie in file order: a binary search keeps a table of a million entries fast.
    const size_t k = static_cast<size_t>(
        std::lower_bound(item_at.begin(), item_at.end(), bot[f]) - item_at.begin());
    if (k == item_at.size() || item_at[k] != bot[f]) {
      throw Bad{fmt::format("offset table entry {} is no fragment", f)};
    }
    const uint64_t next = f + 1 < frames ? bot[f + 1] : UINT64_MAX;
    if (k + 1 < item_at.size() && item_at[k + 1] < next) {
      throw Bad{fmt::format("frame {} is split over several fragments (not supported)", f)};
    }
    out.offsets.push_back(value_at[k]);
    out.sizes.push_back(length[k]);
  }
  return out;
}

// Maps `file` and calls `walk_file(data, size)`, turning its Bad into an IoError naming the file.
template <typename Fn>
auto with_mapped_dicom(const std::string& file, Fn walk_file) {
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
    return walk_file(static_cast<const uint8_t*>(map.data), static_cast<uint64_t>(map.size));
  } catch (const Bad& bad) {
    fail<IoError>("DICOM file '{}': {}", file, bad.why);
  }
}

}  // namespace

std::string dicom_transfer_syntax(const std::string& file) {
  return with_mapped_dicom(file, [](const uint8_t* data, uint64_t size) {
    Walker w(data, size);
    return walk_meta(w, data, size);
  });
}

void check_dicom_structure(const std::string& file, DicomEncoding encoding) {
  with_mapped_dicom(file, [&](const uint8_t* data, uint64_t size) {
    Walker w(data, size);
    walk_meta(w, data, size);
    walk_to_pixel_data(w, size, encoding == DicomEncoding::kImplicitVr);
    return 0;
  });
}

DicomFrames locate_frames(const std::string& file, int64_t frames, uint64_t frame_bytes) {
  return with_mapped_dicom(file, [&](const uint8_t* data, uint64_t size) {
    return walk(data, size, frames, frame_bytes);
  });
}

}  // namespace tessera
