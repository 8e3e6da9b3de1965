// Read access to a completed patchgen stage (of one part): RUN/patchgen[/part-P-of-Q]/index.h5,
// one row per patch sorted by patch_id, and its slide table. Used by embed, ingest, query, serve
// and aggregate, by patchgen's digest, by store's index_writer.h and vector_meta.cpp, and by the
// benchmarks. The slide table and the attributes are read whole (O(slides)); patch rows are read
// by range or by list, so a reader holds only the rows it works on, whatever the cohort's size.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera {

inline constexpr int64_t kIndexFormatVersion = 2;

// Dataset and group names of index.h5 (its writer is index_writer.h). They live here once.
namespace index_names {
inline constexpr const char* kPatchId = "patch_id";  // int64 [n], sorted
inline constexpr const char* kSlide = "slide";       // int32 [n], manifest index
inline constexpr const char* kCoords = "coords";     // int64 [n, 2], level-0 x, y
inline constexpr const char* kTissue = "tissue";     // float32 [n]
inline constexpr const char* kShard = "shard";       // int32 [n], patchgen rank shard
inline constexpr const char* kRow = "row";           // int64 [n], row in that shard
inline constexpr const char* kSlides = "slides";     // group: the slide table
inline constexpr const char* kMetadata = "metadata";  // group in slides: one dataset per column
inline constexpr const char* kMetadataColumns = "metadata_columns";
}  // namespace index_names

// The status of a slide in the slide table of a cohort part that does not hold it: every part's
// table lists the whole manifest.
inline constexpr const char* kOtherPartStatus = "other_part";

struct SlideTable {
  std::vector<std::string> slide_id, path, path_as_written, patient_id, status, reason;
  std::vector<std::string> mpp_source, vendor;
  std::vector<int64_t> width, height, patch_count;
  std::vector<int32_t> level, read_size;
  std::vector<double> mpp_x, mpp_y, downsample;
  std::vector<std::string> metadata_columns;
  std::vector<std::vector<std::string>> metadata;  // [column][slide]
  size_t size() const { return slide_id.size(); }
};

struct IndexInfo {
  std::string stage_dir;   // the patchgen stage directory of the part
  std::string path;        // its index.h5
  int patch_size = 0;
  double mpp = 0;
  std::string encoding;
  int num_shards = 0;
  int part = 0;
  int parts = 1;
  // Target pixels neighbouring patches share (max(0, patch_size - stride)), attribute `overlap`;
  // for an index.h5 written before it was recorded, from the `stride` line of the stage
  // directory's config.ini (0 when there is none), as embed read it then.
  int64_t overlap = 0;
  int64_t rows = 0;
  std::string config_fingerprint;
  nlohmann::json success;  // the _SUCCESS summary
  SlideTable slides;
  // Rows are sorted by patch_id, so each slide's rows are contiguous: slide s holds rows
  // [slide_offset[s], slide_offset[s] + slides.patch_count[s]).
  std::vector<int64_t> slide_offset;
  std::string shard_path(int shard) const;
};

// max(0, patch_size - step) where step is `stride` (patch_size when 0): the overlap recorded in
// index.h5.
int64_t patch_overlap(int64_t patch_size, int64_t stride);

// Loads the attributes and the slide table of a patchgen stage directory. Throws InvalidInput
// naming the directory when it is not complete (no _SUCCESS: "run patchgen first or finish its
// rerun") and IoError when the index is unreadable, of another format version, or inconsistent.
// Not collective; every rank may call it.
IndexInfo load_index_info(const std::string& stage_dir);

// Columns of a set of index rows, in the order asked for.
struct IndexRows {
  std::vector<int64_t> patch_id;
  std::vector<int32_t> slide;
  std::vector<int64_t> coords;  // x0, y0, x1, y1, ...
  std::vector<float> tissue;
  std::vector<int32_t> shard;
  std::vector<int64_t> row;
  size_t size() const { return patch_id.size(); }
};

// Reads rows of index.h5; keeps the file open. Move-only; not thread-safe.
class IndexReader {
 public:
  explicit IndexReader(const std::string& path);
  ~IndexReader();
  IndexReader(IndexReader&&) noexcept;
  IndexReader& operator=(IndexReader&&) noexcept;
  int64_t rows() const;
  IndexRows read_range(int64_t first, int64_t count) const;
  // `rows` ascending and unique.
  IndexRows read_rows(const std::vector<int64_t>& rows) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
