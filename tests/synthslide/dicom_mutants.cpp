#include "tests/synthslide/dicom_mutants.h"

#include <cstring>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

namespace tessera::synth {

namespace {

constexpr uint32_t kPixelData = dicom_tag(0x7FE0, 0x0010);
constexpr uint32_t kUndefined = 0xFFFFFFFFu;

uint32_t read_u16(const std::string& b, size_t at) {
  if (at + 2 > b.size()) throw std::invalid_argument("truncated DICOM bytes");
  return static_cast<uint8_t>(b[at]) | static_cast<uint32_t>(static_cast<uint8_t>(b[at + 1])) << 8;
}

uint32_t read_u32(const std::string& b, size_t at) {
  return read_u16(b, at) | read_u16(b, at + 2) << 16;
}

bool long_form_vr(const char* vr) {
  for (const char* v : {"OB", "OD", "OF", "OL", "OV", "OW", "SQ", "SV", "UC", "UN", "UR", "UT",
                        "UV"}) {
    if (vr[0] == v[0] && vr[1] == v[1]) return true;
  }
  return false;
}

// One element header of a file write_dicom_series wrote (explicit VR; items and delimiters
// without VR).
struct Header {
  uint32_t tag = 0;
  size_t at = 0;          // offset of the header
  size_t length_at = 0;   // offset of the length field
  int length_bytes = 0;   // 2 or 4
  uint32_t length = 0;
  size_t value = 0;       // offset of the value
};

Header read_header(const std::string& b, size_t at) {
  Header h;
  h.at = at;
  h.tag = read_u16(b, at) << 16 | read_u16(b, at + 2);
  if ((h.tag >> 16) == 0xFFFE) {
    h.length_at = at + 4, h.length_bytes = 4, h.value = at + 8;
  } else if (long_form_vr(b.c_str() + at + 4)) {
    h.length_at = at + 8, h.length_bytes = 4, h.value = at + 12;
  } else {
    h.length_at = at + 6, h.length_bytes = 2, h.value = at + 8;
  }
  h.length = h.length_bytes == 4 ? read_u32(b, h.length_at) : read_u16(b, h.length_at);
  return h;
}

// The offset just past the value of `h` (a sequence of undefined length walked to its delimiter).
size_t end_of(const std::string& b, const Header& h) {
  if (h.length != kUndefined) return h.value + h.length;
  size_t at = h.value;
  for (;;) {
    const Header item = read_header(b, at);
    if (item.tag == dicom_tag(0xFFFE, 0xE0DD)) return item.value;
    if (item.length != kUndefined) {
      at = item.value + item.length;
      continue;
    }
    at = item.value;
    for (;;) {
      const Header inner = read_header(b, at);
      if (inner.tag == dicom_tag(0xFFFE, 0xE00D)) break;
      at = end_of(b, inner);
    }
    at += 8;
  }
}

// The top-level element headers up to and including Pixel Data.
std::vector<Header> top_level(const std::string& b) {
  std::vector<Header> out;
  size_t at = 132;
  while (at + 8 <= b.size()) {
    out.push_back(read_header(b, at));
    if (out.back().tag == kPixelData) break;
    at = end_of(b, out.back());
  }
  return out;
}

std::string le(uint32_t v, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i) & 0xFF));
  return out;
}

std::string tag_bytes(uint32_t tag) { return le(tag >> 16, 2) + le(tag & 0xFFFF, 2); }

std::string set_length_field(std::string b, const Header& h, uint32_t length) {
  b.replace(h.length_at, static_cast<size_t>(h.length_bytes), le(length, h.length_bytes));
  return b;
}

}  // namespace

size_t find_dicom_element(const std::string& bytes, uint32_t tag) {
  for (const Header& h : top_level(bytes)) {
    if (h.tag == tag) return h.at;
  }
  return std::string::npos;
}

std::string dicom_element_value(const std::string& bytes, uint32_t tag) {
  const size_t at = find_dicom_element(bytes, tag);
  if (at == std::string::npos) return "";
  const Header h = read_header(bytes, at);
  return bytes.substr(h.value, h.length);
}

std::string dicom_text_value(const std::string& text, char pad) {
  return text.size() % 2 == 0 ? text : text + pad;
}

std::string dicom_uint_value(uint32_t value, int bytes) { return le(value, bytes); }

std::string with_dicom_value(const std::string& bytes, uint32_t tag, const std::string& value) {
  const size_t at = find_dicom_element(bytes, tag);
  if (at == std::string::npos) {
    throw std::invalid_argument(fmt::format("no element ({:04X},{:04X})", tag >> 16, tag & 0xFFFF));
  }
  const Header h = read_header(bytes, at);
  std::string out = set_length_field(bytes, h, static_cast<uint32_t>(value.size()));
  out.replace(h.value, h.length, value);
  // The meta information's group length follows its elements.
  const size_t group_length = find_dicom_element(out, dicom_tag(0x0002, 0x0000));
  if ((tag >> 16) == 0x0002 && group_length != std::string::npos) {
    const Header g = read_header(out, group_length);
    const int64_t delta = static_cast<int64_t>(value.size()) - h.length;
    out.replace(g.value, 4, le(static_cast<uint32_t>(read_u32(out, g.value) + delta), 4));
  }
  return out;
}

std::string with_nested_sequence(const std::string& bytes, int depth, bool defined_lengths) {
  size_t insert_at = std::string::npos;
  for (const Header& h : top_level(bytes)) {
    if ((h.tag >> 16) > 0x0009) {
      insert_at = h.at;
      break;
    }
  }
  if (insert_at == std::string::npos) throw std::invalid_argument("no data set element");
  const std::string creator = "TESSERA FUZZ";
  std::string nested = tag_bytes(dicom_tag(0x0009, 0x0010)) + "LO" +
                       le(static_cast<uint32_t>(creator.size()), 2) + creator;
  nested.reserve(nested.size() + static_cast<size_t>(depth) * 36);
  const std::string sequence = tag_bytes(dicom_tag(0x0009, 0x1001)) + "SQ" + le(0, 2);
  const std::string item = tag_bytes(dicom_tag(0xFFFE, 0xE000));
  // Level k (0 outermost) of a defined-length nest: a sequence header (12 bytes) and an item
  // header (8 bytes) around the levels inside, the innermost item empty.
  for (int k = 0; k < depth; ++k) {
    const uint32_t inside = 20u * static_cast<uint32_t>(depth - k - 1);
    nested += sequence + (defined_lengths ? le(inside + 8, 4) : le(kUndefined, 4));
    nested += item + (defined_lengths ? le(inside, 4) : le(kUndefined, 4));
  }
  if (!defined_lengths) {
    const std::string close = tag_bytes(dicom_tag(0xFFFE, 0xE00D)) + le(0, 4) +
                              tag_bytes(dicom_tag(0xFFFE, 0xE0DD)) + le(0, 4);
    for (int k = 0; k < depth; ++k) nested += close;
  }
  std::string out = bytes;
  out.insert(insert_at, nested);
  return out;
}

std::vector<DicomMutant> dicom_mutants(const std::string& bytes, int64_t frames,
                                       uint64_t frame_bytes, int random_flips, uint32_t seed) {
  std::vector<DicomMutant> out;
  auto add = [&](std::string name, std::string mutated, std::string refusal) {
    out.push_back({std::move(name), std::move(mutated), std::move(refusal), false});
  };
  auto text_of = [&](uint32_t tag, const std::string& text) {
    return with_dicom_value(bytes, tag, dicom_text_value(text, tag == dicom_tag(0x0002, 0x0010) ||
                                                                      (tag >> 16) == 0x0008 ||
                                                                      (tag >> 16) == 0x0020
                                                                  ? '\0'
                                                                  : ' '));
  };
  const std::string nesting = "sequences nested more than";
  for (const int depth : {6000, 20000, 200000}) {
    add(fmt::format("nested-undefined-{}", depth), with_nested_sequence(bytes, depth, false),
        nesting);
  }
  for (const int depth : {65, 6000, 200000}) {
    add(fmt::format("nested-defined-{}", depth), with_nested_sequence(bytes, depth, true), nesting);
  }
  add("nested-undefined-10", with_nested_sequence(bytes, 10, false), "");
  out.back().must_open = true;
  add("nested-defined-64", with_nested_sequence(bytes, 64, true), "");
  out.back().must_open = true;

  const uint32_t kFrames = dicom_tag(0x0028, 0x0008);
  int trailing_zeros = 0;
  while (trailing_zeros < 64 && (frame_bytes >> trailing_zeros & 1) == 0) ++trailing_zeros;
  if (trailing_zeros >= 2) {
    // frames x frame_bytes wraps to the real pixel length.
    const uint64_t wrap = static_cast<uint64_t>(frames) + (uint64_t{1} << (64 - trailing_zeros));
    add("frames-wrap", text_of(kFrames, std::to_string(wrap)), "frames");
  }
  add("frames-max", text_of(kFrames, "9223372036854775807"), "frames");
  add("frames-over-int64", text_of(kFrames, "99999999999999999999"), "frames");
  add("frames-negative", text_of(kFrames, "-3"), "frames");
  add("frames-zero", text_of(kFrames, "0"), "frames");
  add("frames-one-more", text_of(kFrames, std::to_string(frames + 1)), "");

  const uint32_t kRows = dicom_tag(0x0028, 0x0010), kColumns = dicom_tag(0x0028, 0x0011);
  const uint32_t kTotalColumns = dicom_tag(0x0048, 0x0006), kTotalRows = dicom_tag(0x0048, 0x0007);
  {
    std::string huge = with_dicom_value(bytes, kTotalColumns, dicom_uint_value(4294967295u, 4));
    huge = with_dicom_value(huge, kTotalRows, dicom_uint_value(4294967295u, 4));
    add("matrix-4294967295-squared", huge, "tiles: more than");
    huge = with_dicom_value(huge, kRows, dicom_uint_value(1, 2));
    add("matrix-4294967295-squared-1x1-tiles", with_dicom_value(huge, kColumns, dicom_uint_value(1, 2)),
        "tiles: more than");
  }
  add("rows-zero", with_dicom_value(bytes, kRows, dicom_uint_value(0, 2)), "");
  add("columns-65535", with_dicom_value(bytes, kColumns, dicom_uint_value(65535, 2)), "");

  const uint32_t kSopClass = dicom_tag(0x0008, 0x0016), kSeries = dicom_tag(0x0020, 0x000E);
  add("sop-class-not-utf8", text_of(kSopClass, "1.2.840.10008.5.1.4.1.1.77.1.\xff"),
      "not a whole-slide image");
  add("series-uid-not-utf8", text_of(kSeries, "1.2.826.0.1.\xc3\x28.\xff"), "");
  out.back().must_open = true;

  const uint32_t kTransfer = dicom_tag(0x0002, 0x0010);
  add("transfer-big-endian", text_of(kTransfer, "1.2.840.10008.1.2.2"), "transfer syntax");
  add("transfer-deflated", text_of(kTransfer, "1.2.840.10008.1.2.1.99"), "transfer syntax");
  add("transfer-unknown", text_of(kTransfer, "1.2.3.4.5.6"), "transfer syntax");
  add("transfer-not-utf8", text_of(kTransfer, "1.2.840.10008.1.2.\xfe"), "transfer syntax");
  add("transfer-implicit", text_of(kTransfer, "1.2.840.10008.1.2"), "");

  // A VR no reader knows, and lengths that run past the end of the file.
  const std::vector<Header> headers = top_level(bytes);
  for (const Header& h : headers) {
    if ((h.tag >> 16) < 0x0008 || h.tag == kPixelData) continue;
    std::string bad_vr = bytes;
    bad_vr.replace(h.at + 4, 2, "\x01\x02");
    add("vr-invalid", bad_vr, "no valid VR");
    add("length-past-end", set_length_field(bytes, h, h.length_bytes == 4 ? 0x7FFFFFF0u : 0xFFF0u),
        "");
    break;
  }
  for (const Header& h : headers) {
    if (h.length_bytes == 4 && h.tag != kPixelData && (h.tag >> 16) >= 0x0008) {
      add("long-length-undefined", set_length_field(bytes, h, kUndefined), "");
      break;
    }
  }
  const size_t pixel_at = headers.back().tag == kPixelData ? headers.back().at : bytes.size() / 2;
  for (const size_t size : {size_t{100}, size_t{131}, size_t{140}, pixel_at / 2, pixel_at,
                            pixel_at + 10, (pixel_at + bytes.size()) / 2, bytes.size() - 1}) {
    if (size < bytes.size()) add(fmt::format("truncated-{}", size), bytes.substr(0, size), "");
  }

  if (headers.back().tag == kPixelData && headers.back().length == kUndefined) {
    // Encapsulated: an offset table of 2,000,000 entries over one fragment fewer, the last entry
    // pointing at none. A linear search per entry took hours (no signal, no answer).
    constexpr uint32_t kEntries = 2000000;
    std::string table = tag_bytes(dicom_tag(0xFFFE, 0xE000)) + le(4 * kEntries, 4);
    table.reserve(table.size() + size_t{12} * kEntries + 8);
    for (uint32_t f = 0; f + 1 < kEntries; ++f) table += le(8 * f, 4);
    table += le(0xFFFFFFF0u, 4);
    for (uint32_t f = 0; f + 1 < kEntries; ++f) table += tag_bytes(dicom_tag(0xFFFE, 0xE000)) + le(0, 4);
    table += tag_bytes(dicom_tag(0xFFFE, 0xE0DD)) + le(0, 4);
    std::string mutated = with_dicom_value(bytes, kFrames, dicom_text_value(std::to_string(kEntries)));
    const size_t pixel = find_dicom_element(mutated, kPixelData);
    mutated.resize(pixel + 12);  // Pixel Data's header: OB, undefined length
    add("offset-table-2000000", mutated + table,
        fmt::format("offset table entry {} is no fragment", kEntries - 1));
  }

  std::mt19937 random(seed);
  const size_t header_end = std::min(bytes.size(), pixel_at + 64);
  for (int m = 0; m < random_flips; ++m) {
    std::string flipped = bytes;
    const int flips = 1 + static_cast<int>(random() % 4);
    for (int f = 0; f < flips; ++f) {
      const size_t at = 132 + random() % (header_end - 132);
      flipped[at] = static_cast<char>(random() & 0xFF);
    }
    add(fmt::format("flip-{}", m), flipped, "");
  }
  return out;
}

}  // namespace tessera::synth
