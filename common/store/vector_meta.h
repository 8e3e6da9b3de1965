// The metadata file of one ingest shard (meta.h5, layout in docs/formats.md): one row per vector,
// in the order the vectors were added to the shard's index, and the cohort's slide table with the
// manifest's metadata columns typed. Row-level values (patch id, slide, x, y, tissue fraction)
// are stored per row; slide-level values (slide id, patient, level, mpp, patch size, metadata)
// once per slide and joined through the row's slide index, so a shard's metadata costs 28 bytes
// per vector whatever the number of metadata columns.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/core/value_type.h"

namespace tessera {

struct IndexInfo;

// 2: per-chunk XXH3 of the row columns (/rows_xxh3) and of the slide table (slides_xxh3)
// replace Fletcher32, which a 00 00 -> FF FF change passes. Version 1 files are still read.
inline constexpr int64_t kVectorMetaFormatVersion = 2;

// A metadata column's type, inferred from the manifest's text by infer_value_type
// (common/core/value_type.h, the rule the query filter uses too).
using MetaType = ValueType;
const char* meta_type_name(MetaType type);  // "int64", "float64", "string"

// One typed column; only the vector of its type is filled.
struct MetaColumn {
  std::string name;
  MetaType type = MetaType::kString;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  // Converts `values` to `type` by parse_int64 / parse_double (value_type.h); empty values
  // become 0 (int64) or NaN (float64). Throws InvalidInput naming the column when a value does
  // not convert.
  static MetaColumn from_text(const std::string& name, MetaType type,
                              const std::vector<std::string>& values);
  std::string text(size_t i) const;  // value i as text (numbers in shortest round-trip form)
};

// The slide-level columns, one entry per manifest slide (entry s = slide_index s).
struct VectorSlideTable {
  std::vector<std::string> slide_id, patient_id, path;
  std::vector<int32_t> level, read_size;
  std::vector<double> slide_mpp, downsample;
  std::vector<MetaColumn> metadata;  // the manifest's extra columns, typed, in header order
  size_t size() const { return slide_id.size(); }
};

// The slide table of a patchgen index (any part: every part's index holds the whole manifest),
// with the metadata columns typed by infer_value_type. Level, read size and downsample come from
// the part that holds the slide; slides of other parts get level -1 until merged (merge_from).
VectorSlideTable vector_slide_table(const IndexInfo& index);
// Fills the entries of `other`'s slides that `table` lacks (level -1) from `other`. Throws
// IoError when the two tables do not list the same slides.
void merge_slide_table(VectorSlideTable& table, const VectorSlideTable& other,
                       const std::string& what);

// Row-level columns of a set of vectors.
struct VectorRows {
  std::vector<int64_t> patch_id;
  std::vector<int32_t> slide;   // slide_index into the slide table
  std::vector<int64_t> coords;  // level-0 x0, y0, x1, y1, ...
  std::vector<float> tissue;
  size_t size() const { return patch_id.size(); }
  void clear();
};

// The whole content of a meta.h5.
struct VectorMeta {
  int patch_size = 0;  // S, pixels per patch side at the target resolution
  double mpp = 0;      // target um/px of the patches
  int shard = 0;
  VectorSlideTable slides;
  VectorRows rows;
};

// Writes a meta.h5: rows appended in chunks, the slide table and attributes at close(). Not
// thread-safe; move-only.
class VectorMetaWriter {
 public:
  VectorMetaWriter(const std::string& path, int shard, int patch_size, double mpp);
  ~VectorMetaWriter();
  VectorMetaWriter(VectorMetaWriter&&) noexcept;
  VectorMetaWriter& operator=(VectorMetaWriter&&) noexcept;
  // Appends rows [first, first + n) of `rows`.
  void append(const VectorRows& rows, size_t first, size_t n);
  int64_t rows() const;
  // Writes the slide table and closes the file. Throws IoError naming it on failure.
  void close(const VectorSlideTable& slides);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reads a meta.h5; with rows == false only the attributes and the slide table. Checks what it
// reads against the file's XXH3 checksums (the slide table always, the row columns chunk by
// chunk). Throws IoError naming the file when it is unreadable, of another format version, or
// damaged (naming the dataset and the rows).
VectorMeta read_vector_meta(const std::string& path, bool rows = true);

}  // namespace tessera
