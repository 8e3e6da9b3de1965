// Hostile variants of a DICOM file that write_dicom_series wrote (explicit VR little endian), for
// the reader's fuzz corpus: made by the tests from the synthetic files, never committed. Each
// mutant edits the bytes directly (DCMTK would refuse to write most of them): a private sequence
// nested thousands deep before Pixel Data, a Number of Frames chosen so that frames x frame bytes
// wraps to the real pixel length, a Total Pixel Matrix of 4294967295^2 in 1x1 tiles, a UID with a
// byte that is not UTF-8, transfer syntaxes the reader cannot walk, bad VRs and lengths, an
// offset table of 2,000,000 entries that matches no fragment list, truncations and byte flips.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::synth {

// A tag as (group << 16) | element.
constexpr uint32_t dicom_tag(uint16_t group, uint16_t element) {
  return static_cast<uint32_t>(group) << 16 | element;
}

// The byte offset of top-level element `tag` in `bytes` (meta information or data set, explicit VR
// little endian), or std::string::npos when the file has none before its Pixel Data.
size_t find_dicom_element(const std::string& bytes, uint32_t tag);

// `bytes` with the value of top-level element `tag` replaced by `value` (its length field set to
// value.size(), which the caller keeps even). Throws std::invalid_argument when there is no such
// element.
std::string with_dicom_value(const std::string& bytes, uint32_t tag, const std::string& value);

// The value of an IS/DS/UI element as written: `text` padded to even length with `pad`.
std::string dicom_text_value(const std::string& text, char pad = ' ');

// A 2- or 4-byte little endian value (US or UL).
std::string dicom_uint_value(uint32_t value, int bytes);

// `bytes` with a private sequence (0009,1001) nested `depth` sequences deep, each holding one
// item, inserted before the first data set element after group 0009: with undefined lengths and
// delimiters, or with every length defined.
std::string with_nested_sequence(const std::string& bytes, int depth, bool defined_lengths);

struct DicomMutant {
  std::string name;   // what was done, for the test's messages ("nested-undefined-200000")
  std::string bytes;
  // A part of the reader's refusal (which names the file too); empty when the mutant may open or
  // fail, as long as it fails cleanly.
  std::string refusal;
  bool must_open = false;  // a mutant the reader must still read (a nesting within the limit)
};

// The value of top-level element `tag` as written (with its padding); "" without one.
std::string dicom_element_value(const std::string& bytes, uint32_t tag);

// The corpus for one file of `frames` uncompressed or encapsulated frames of `frame_bytes` bytes
// each (the decoded size of a frame): every kind above, plus `random_flips` mutants with a few
// bytes of the header changed (deterministic from `seed`).
std::vector<DicomMutant> dicom_mutants(const std::string& bytes, int64_t frames,
                                       uint64_t frame_bytes, int random_flips, uint32_t seed);

}  // namespace tessera::synth
