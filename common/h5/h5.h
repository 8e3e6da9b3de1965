// RAII handles for HDF5 objects and checked helpers for the few access patterns tessera uses.
// Every failing HDF5 call throws IoError naming the operation, the file and the object path; the
// HDF5 library's own error stack printing is switched off process-wide by h5::init().
//
// tessera links Debian's serial, thread-safe HDF5 build (docs/architecture.md says why): the
// library serialises its calls internally, so handles may be used from several threads, one
// thread per handle at a time. Files are opened with the default (POSIX) driver; each rank owns
// the files it writes.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::h5 {

// Switches off HDF5's automatic error printing (errors become exceptions instead). Idempotent.
void init();

// Owns one hid_t and closes it with the matching H5*close. Move-only; destructor is silent.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { close_silently(); }
  hid_t id() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes and reports failure as IoError; safe to call twice.
  void close();

 private:
  void close_silently() noexcept;
  hid_t id_ = H5I_INVALID_HID;
};

enum class Mode { kRead, kReadWrite, kCreateTruncate };

class File;
class Group;

// Element types used by tessera datasets. Stored little-endian (u8, i32, i64, IEEE f32/f16/f64).
// kFloat16 is IEEE binary16; in memory its elements are uint16_t holding the raw half bits (no
// conversion on append/write/read), while read_all<float>/<double> converts halves to floats.
// kVarString: variable-length UTF-8 strings; kVarBytes: variable-length uint8 sequences (blobs).
enum class Type { kUInt8, kInt32, kInt64, kFloat32, kFloat16, kFloat64, kVarString, kVarBytes };

// A chunk of one extent ({rows}) for a multi-dimensional dataset means {rows, row_shape...}.
struct DatasetOptions {
  std::vector<hsize_t> chunk;  // empty: contiguous (only allowed for fixed-size datasets)
  int deflate_level = 0;       // 0: no compression
  bool shuffle = false;
  // Fletcher32 checksum per chunk (chunked fixed-size datasets; ignored for variable-length
  // types, whose chunks hold only heap references): a read that meets a damaged chunk fails with
  // an error naming the file and the dataset. Costs one pass over each chunk when it is written
  // and read, negligible next to the I/O.
  bool checksum = true;
  // false: chunks are never filled with the fill value (H5D_FILL_TIME_NEVER). With the default,
  // HDF5 fills a chunk with zeros in memory and writes it whole when a write first touches part
  // of it, then writes the part again; never filling lets a part go straight to the file. Only
  // for datasets whose rows are always written (appended whole): an unwritten element would read
  // as whatever the file holds there.
  bool fill = true;
};

// One source of a virtual dataset: rows [0, blocks * block) of `dataset` in `file` (a path
// relative to the virtual dataset's file is resolved against that file's directory) fill the
// virtual rows start + j * stride + [0, block), j = 0..blocks-1, all columns. A regular
// (block-)cyclic or contiguous layout of rows over source files is one mapping per source.
struct VirtualSource {
  std::string file;
  std::string dataset;
  hsize_t start = 0;
  hsize_t stride = 1;
  hsize_t block = 1;
  hsize_t blocks = 0;
  hsize_t source_first = 0;  // first source row
};

// A dataset handle that knows its file and path for error messages.
class Dataset {
 public:
  Dataset(Handle h, std::string file, std::string path)
      : h_(std::move(h)), file_(std::move(file)), path_(std::move(path)) {}
  hid_t id() const { return h_.id(); }
  const std::string& path() const { return path_; }
  std::vector<hsize_t> dims() const;
  // The chunk shape; empty for a contiguous dataset.
  std::vector<hsize_t> chunk_dims() const;

  // Appends rows along dimension 0 of an extendible dataset; `data` holds rows * row_elems
  // elements of the dataset's element type (not for var-length types). "The dataset's element
  // type" below means its native in-memory equivalent (uint16_t raw bits for kFloat16).
  void append(const void* data, hsize_t rows);
  // Appends / reads float32 values whatever the stored floating type (HDF5 converts, e.g. to and
  // from IEEE half for kFloat16 datasets).
  void append_floats(const float* data, hsize_t rows);
  void read_rows_as_floats(float* data, hsize_t first, hsize_t rows) const;
  // Writes / reads rows [first, first+rows) of a fixed-size-element dataset.
  void write_rows(const void* data, hsize_t first, hsize_t rows);
  void read_rows(void* data, hsize_t first, hsize_t rows) const;
  // Reads the listed rows (sorted ascending, no duplicates) in one call via a hyperslab union into
  // `data`, rows.size() * row_elems elements, in list order. Throws Error for an unsorted list and
  // IoError for a row past the end.
  void read_row_list(void* data, const std::vector<hsize_t>& rows) const;
  // As read_row_list, as float32 whatever the stored floating type (HDF5 converts halves).
  void read_row_list_as_floats(float* data, const std::vector<hsize_t>& rows) const;

  // Variable-length byte blobs (e.g. one JPEG per patch), stored as vlen uint8.
  void append_blobs(const std::vector<std::vector<uint8_t>>& blobs);
  std::vector<std::vector<uint8_t>> read_blobs(hsize_t first, hsize_t rows) const;
  std::vector<std::vector<uint8_t>> read_blob_list(const std::vector<hsize_t>& rows) const;

  // Variable-length UTF-8 strings.
  std::vector<std::string> read_strings() const;

  // Reads the whole dataset converted to T (HDF5 numeric conversion, e.g. half -> float).
  // Instantiated for uint8_t, int32_t, int64_t, float, double and uint16_t (raw half bits).
  template <typename T>
  std::vector<T> read_all() const;  // fixed-size numeric types only

  // Attributes: strings are stored as scalar variable-length UTF-8 strings (fixed-length string
  // attributes written by other tools are read too); numbers as scalar int64 / double. Setting an
  // existing attribute replaces it. Reading a missing attribute or one of another class throws.

  void set_attr(const std::string& name, const std::string& value);
  void set_attr(const std::string& name, int64_t value);
  void set_attr(const std::string& name, double value);
  std::string attr_string(const std::string& name) const;
  int64_t attr_int(const std::string& name) const;
  double attr_double(const std::string& name) const;

  void close() { h_.close(); }

 private:
  Handle h_;
  std::string file_;
  std::string path_;
};

// A group (or the file's root group) handle.
class Group {
 public:
  Group(Handle h, std::string file, std::string path)
      : h_(std::move(h)), file_(std::move(file)), path_(std::move(path)) {}
  hid_t id() const { return h_.id(); }
  const std::string& file_name() const { return file_; }
  const std::string& path() const { return path_; }

  // `name` may be a relative path ("a/b"); missing intermediate groups are created.
  Group create_group(const std::string& name);
  Group open_group(const std::string& name) const;
  bool exists(const std::string& name) const;
  std::vector<std::string> list() const;  // member names, sorted

  // Creates an extendible dataset of `type` with dims {0, row_shape...}, max {unlimited, ...}.
  Dataset create_appendable(const std::string& name, Type type, const std::vector<hsize_t>& row_shape,
                            const DatasetOptions& options);
  // Creates a fixed-size dataset and writes `data` (dims.product elements) in one call.
  Dataset write_dataset(const std::string& name, Type type, const std::vector<hsize_t>& dims,
                        const void* data, const DatasetOptions& options = {});
  // A 1-D dataset of variable-length UTF-8 strings.
  Dataset write_strings(const std::string& name, const std::vector<std::string>& values);
  // Creates a virtual dataset (no data of its own) of `dims` whose rows come from other files'
  // datasets, one mapping per source (see VirtualSource). Readers (HDF5 1.10+, h5py) see one
  // dataset; the sources must exist when it is read.
  Dataset create_virtual(const std::string& name, Type type, const std::vector<hsize_t>& dims,
                         const std::vector<VirtualSource>& sources);
  Dataset open_dataset(const std::string& name) const;

  // A 1-D dataset of type_of<T>(); instantiated for the same T as Dataset::read_all.
  template <typename T>
  Dataset write_vector(const std::string& name, const std::vector<T>& values,
                       const DatasetOptions& options = {});

  // Attributes as on Dataset, plus 1-D int64 / double arrays.

  void set_attr(const std::string& name, const std::string& value);
  void set_attr(const std::string& name, int64_t value);
  void set_attr(const std::string& name, double value);
  void set_attr(const std::string& name, const std::vector<int64_t>& values);
  void set_attr(const std::string& name, const std::vector<double>& values);
  bool has_attr(const std::string& name) const;
  std::string attr_string(const std::string& name) const;
  int64_t attr_int(const std::string& name) const;
  double attr_double(const std::string& name) const;
  std::vector<int64_t> attr_ints(const std::string& name) const;
  std::vector<double> attr_doubles(const std::string& name) const;

 protected:
  Handle h_;
  std::string file_;
  std::string path_;
};

// A file; its root group is the File itself. Files are created with object time tracking off and
// format bounds fixed to [1.8, latest of 1.10] so identical content gives identical bytes.
// open() calls init(); a missing file, or one that is not HDF5, throws IoError naming the path.
class File : public Group {
 public:
  static File open(const std::string& path, Mode mode);
  // Flushes and closes, reporting errors; safe to call twice.
  void close();

 private:
  File(Handle h, std::string path) : Group(std::move(h), path, "/") {}
};

// Type mapping for templates: Type of a C++ element type. uint16_t maps to kFloat16 and carries
// raw IEEE half bits (there is no 16-bit integer Type).
template <typename T>
constexpr Type type_of();
template <>
constexpr Type type_of<uint8_t>() { return Type::kUInt8; }
template <>
constexpr Type type_of<int32_t>() { return Type::kInt32; }
template <>
constexpr Type type_of<int64_t>() { return Type::kInt64; }
template <>
constexpr Type type_of<float>() { return Type::kFloat32; }
template <>
constexpr Type type_of<double>() { return Type::kFloat64; }
template <>
constexpr Type type_of<uint16_t>() { return Type::kFloat16; }

}  // namespace tessera::h5
