#include "common/h5/h5.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string_view>
#include <utility>

#include "common/core/error.h"

namespace tessera::h5 {
namespace {

// The most specific message on HDF5's error stack, e.g. "object 'patches' doesn't exist".
std::string stack_detail() {
  std::string detail;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* err, void* data) -> herr_t {
        if (n == 0 && err->desc != nullptr) *static_cast<std::string*>(data) = err->desc;
        return 0;
      },
      &detail);
  H5Eclear2(H5E_DEFAULT);
  return detail;
}

// Names the file and object of an operation for error messages.
struct Where {
  const std::string& file;
  const std::string& path;
};

[[noreturn]] void raise(std::string_view what, const Where& w) {
  const std::string detail = stack_detail();
  throw IoError(fmt::format("HDF5: cannot {} '{}' in '{}'{}{}", what, w.path, w.file,
                            detail.empty() ? "" : ": ", detail));
}

template <typename R>
R check(R result, std::string_view what, const Where& w) {
  if (result < 0) raise(what, w);
  return result;
}

Handle checked_handle(hid_t id, std::string_view what, const Where& w) {
  return Handle(check(id, what, w));
}

std::string join(const std::string& base, const std::string& name) {
  if (!name.empty() && name.front() == '/') return name;
  if (base == "/") return "/" + name;
  return base + "/" + name;
}

std::vector<std::string> split_path(const std::string& name) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos <= name.size()) {
    const size_t next = std::min(name.find('/', pos), name.size());
    if (next > pos) parts.push_back(name.substr(pos, next - pos));
    pos = next + 1;
  }
  return parts;
}

hsize_t product(const std::vector<hsize_t>& v, size_t from = 0) {
  hsize_t n = 1;
  for (size_t i = from; i < v.size(); ++i) n *= v[i];
  return n;
}

Handle half_type(hid_t base) {
  Handle t(H5Tcopy(base));
  if (!t.valid() || H5Tset_fields(t.id(), 15, 10, 5, 0, 10) < 0 || H5Tset_size(t.id(), 2) < 0 ||
      H5Tset_ebias(t.id(), 15) < 0) {
    throw IoError("HDF5: cannot create the IEEE half-precision type: " + stack_detail());
  }
  return t;
}

Handle string_type(H5T_cset_t cset) {
  Handle t(H5Tcopy(H5T_C_S1));
  if (!t.valid() || H5Tset_size(t.id(), H5T_VARIABLE) < 0 || H5Tset_cset(t.id(), cset) < 0) {
    throw IoError("HDF5: cannot create the variable-length string type: " + stack_detail());
  }
  return t;
}

Handle copy_type(hid_t predefined) {
  Handle t(H5Tcopy(predefined));
  if (!t.valid()) throw IoError("HDF5: cannot copy a predefined datatype: " + stack_detail());
  return t;
}

// The type an element of `type` has in a file.
Handle file_type(Type type) {
  switch (type) {
    case Type::kUInt8: return copy_type(H5T_STD_U8LE);
    case Type::kInt32: return copy_type(H5T_STD_I32LE);
    case Type::kInt64: return copy_type(H5T_STD_I64LE);
    case Type::kFloat32: return copy_type(H5T_IEEE_F32LE);
    case Type::kFloat16: return half_type(H5T_IEEE_F32LE);
    case Type::kFloat64: return copy_type(H5T_IEEE_F64LE);
    case Type::kVarString: return string_type(H5T_CSET_UTF8);
    case Type::kVarBytes: return Handle(H5Tvlen_create(H5T_STD_U8LE));
  }
  fail("HDF5: unknown element type {}", static_cast<int>(type));
}

// The type an element of `type` has in memory (uint16_t raw bits for kFloat16, const char* for
// kVarString, hvl_t for kVarBytes).
Handle mem_type(Type type) {
  switch (type) {
    case Type::kUInt8: return copy_type(H5T_NATIVE_UINT8);
    case Type::kInt32: return copy_type(H5T_NATIVE_INT32);
    case Type::kInt64: return copy_type(H5T_NATIVE_INT64);
    case Type::kFloat32: return copy_type(H5T_NATIVE_FLOAT);
    case Type::kFloat16: return half_type(H5T_NATIVE_FLOAT);
    case Type::kFloat64: return copy_type(H5T_NATIVE_DOUBLE);
    case Type::kVarString: return string_type(H5T_CSET_UTF8);
    case Type::kVarBytes: return Handle(H5Tvlen_create(H5T_NATIVE_UINT8));
  }
  fail("HDF5: unknown element type {}", static_cast<int>(type));
}

bool is_var_length(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  return cls == H5T_VLEN || (cls == H5T_STRING && H5Tis_variable_str(type) > 0);
}

// The in-memory equivalent of a fixed-size dataset's element type.
Handle fixed_mem_type(hid_t dset, const Where& w) {
  Handle ft = checked_handle(H5Dget_type(dset), "get the type of dataset", w);
  if (is_var_length(ft.id())) {
    fail("HDF5: dataset '{}' in '{}' holds variable-length elements; use the blob or string calls",
         w.path, w.file);
  }
  if (H5Tget_class(ft.id()) == H5T_FLOAT && H5Tget_size(ft.id()) == 2)
    return mem_type(Type::kFloat16);
  return checked_handle(H5Tget_native_type(ft.id(), H5T_DIR_ASCEND),
                        "get the memory type of dataset", w);
}

// Checks that a dataset holds variable-length byte sequences; returns its in-memory type.
Handle blob_mem_type(hid_t dset, const Where& w) {
  Handle ft = checked_handle(H5Dget_type(dset), "get the type of dataset", w);
  if (H5Tget_class(ft.id()) != H5T_VLEN) {
    fail("HDF5: dataset '{}' in '{}' does not hold variable-length blobs", w.path, w.file);
  }
  return mem_type(Type::kVarBytes);
}

std::vector<hsize_t> space_dims(hid_t space, const Where& w) {
  const int rank = check(H5Sget_simple_extent_ndims(space), "get the rank of", w);
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0)
    check(H5Sget_simple_extent_dims(space, dims.data(), nullptr), "get the extent of", w);
  return dims;
}

std::vector<hsize_t> dataset_dims(hid_t dset, const Where& w) {
  Handle space = checked_handle(H5Dget_space(dset), "get the dataspace of dataset", w);
  return space_dims(space.id(), w);
}

void require_rows(const std::vector<hsize_t>& dims, hsize_t first, hsize_t rows, const Where& w) {
  if (dims.empty())
    fail<IoError>("HDF5: dataset '{}' in '{}' is scalar, not row-major", w.path, w.file);
  if (first > dims[0] || rows > dims[0] - first) {
    fail<IoError>("HDF5: rows [{}, {}) are out of range for dataset '{}' in '{}' ({} rows)", first,
                  first + rows, w.path, w.file, dims[0]);
  }
}

// Writes rows [first, first + rows) of a dataset with extent `dims` from `data` of `mtype`.
void write_row_block(hid_t dset, hid_t mtype, const std::vector<hsize_t>& dims, hsize_t first,
                     hsize_t rows, const void* data, const Where& w) {
  std::vector<hsize_t> start(dims.size(), 0);
  std::vector<hsize_t> count = dims;
  start[0] = first;
  count[0] = rows;
  Handle fspace = checked_handle(H5Dget_space(dset), "get the dataspace of dataset", w);
  check(H5Sselect_hyperslab(fspace.id(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                            nullptr),
        "select rows of dataset", w);
  Handle mspace =
      checked_handle(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr),
                     "create a memory dataspace for dataset", w);
  check(H5Dwrite(dset, mtype, mspace.id(), fspace.id(), H5P_DEFAULT, data), "write rows of dataset",
        w);
}

// Extends dimension 0 of a dataset whose extent is `dims` by `rows` and writes them from `data`;
// on failure the extent is restored so no unwritten rows remain visible.
void extend_and_write(hid_t dset, hid_t mtype, std::vector<hsize_t> dims, hsize_t rows,
                      const void* data, const Where& w) {
  const std::vector<hsize_t> old_dims = dims;
  dims[0] += rows;
  check(H5Dset_extent(dset, dims.data()), "extend dataset", w);
  try {
    write_row_block(dset, mtype, dims, old_dims[0], rows, data, w);
  } catch (...) {
    H5Dset_extent(dset, old_dims.data());
    throw;
  }
}

void read_row_block(hid_t dset, hid_t mtype, const std::vector<hsize_t>& dims, hsize_t first,
                    hsize_t rows, void* data, const Where& w) {
  std::vector<hsize_t> start(dims.size(), 0);
  std::vector<hsize_t> count = dims;
  start[0] = first;
  count[0] = rows;
  Handle fspace = checked_handle(H5Dget_space(dset), "get the dataspace of dataset", w);
  check(H5Sselect_hyperslab(fspace.id(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                            nullptr),
        "select rows of dataset", w);
  Handle mspace =
      checked_handle(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr),
                     "create a memory dataspace for dataset", w);
  check(H5Dread(dset, mtype, mspace.id(), fspace.id(), H5P_DEFAULT, data), "read rows of dataset",
        w);
}

// A file dataspace of `dset` selecting blocks [lo, hi) of whole rows. HDF5 1.10 merges each OR'ed
// hyperslab by walking the whole selection, so adding blocks one by one costs O(n^2); unions of
// halves built recursively keep it O(n log n) (~0.1 s for 30k blocks).
Handle select_blocks(hid_t dset, const std::vector<hsize_t>& dims,
                     const std::vector<std::pair<hsize_t, hsize_t>>& blocks, size_t lo, size_t hi,
                     const Where& w) {
  constexpr size_t kLeafBlocks = 16;
  if (hi - lo > kLeafBlocks) {
    const size_t mid = lo + (hi - lo) / 2;
    Handle left = select_blocks(dset, dims, blocks, lo, mid, w);
    Handle right = select_blocks(dset, dims, blocks, mid, hi, w);
    check(H5Smodify_select(left.id(), H5S_SELECT_OR, right.id()), "select rows of dataset", w);
    return left;
  }
  Handle space = checked_handle(H5Dget_space(dset), "get the dataspace of dataset", w);
  std::vector<hsize_t> start(dims.size(), 0);
  std::vector<hsize_t> count = dims;
  for (size_t i = lo; i < hi; ++i) {
    start[0] = blocks[i].first;
    count[0] = blocks[i].second;
    check(H5Sselect_hyperslab(space.id(), i == lo ? H5S_SELECT_SET : H5S_SELECT_OR, start.data(),
                              nullptr, count.data(), nullptr),
          "select rows of dataset", w);
  }
  return space;
}

// Reads the listed rows (ascending, unique) into `data` with one H5Dread over a union of
// hyperslabs, one block per run of consecutive rows.
void read_row_union(hid_t dset, hid_t mtype, const std::vector<hsize_t>& rows, void* data,
                    const Where& w) {
  if (rows.empty()) return;
  const std::vector<hsize_t> dims = dataset_dims(dset, w);
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i] <= rows[i - 1]) {
      fail(
          "HDF5: row list for dataset '{}' in '{}' is not strictly ascending at index {} ({} after "
          "{})",
          w.path, w.file, i, rows[i], rows[i - 1]);
    }
  }
  require_rows(dims, rows.back(), 1, w);

  std::vector<std::pair<hsize_t, hsize_t>> blocks;  // (first row, row count)
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    blocks.emplace_back(rows[i], j - i);
    i = j;
  }
  Handle fspace = select_blocks(dset, dims, blocks, 0, blocks.size(), w);
  std::vector<hsize_t> count = dims;
  count[0] = rows.size();
  Handle mspace =
      checked_handle(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr),
                     "create a memory dataspace for dataset", w);
  check(H5Dread(dset, mtype, mspace.id(), fspace.id(), H5P_DEFAULT, data), "read rows of dataset",
        w);
}

// Copies vlen buffers read by HDF5 into vectors and frees HDF5's allocations, also on exceptions.
std::vector<std::vector<uint8_t>> take_blobs(std::vector<hvl_t>& buf, hid_t mtype) {
  struct Reclaim {
    std::vector<hvl_t>& buf;
    hid_t mtype;
    ~Reclaim() {
      const hsize_t n = buf.size();
      hid_t space = H5Screate_simple(1, &n, nullptr);
      if (space >= 0) {
        H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, buf.data());
        H5Sclose(space);
      }
    }
  } reclaim{buf, mtype};
  std::vector<std::vector<uint8_t>> out(buf.size());
  for (size_t i = 0; i < buf.size(); ++i) {
    const auto* p = static_cast<const uint8_t*>(buf[i].p);
    if (buf[i].len > 0) out[i].assign(p, p + buf[i].len);
  }
  return out;
}

Handle object_create_plist(hid_t cls, const Where& w) {
  Handle plist = checked_handle(H5Pcreate(cls), "create a property list for", w);
  check(H5Pset_obj_track_times(plist.id(), false), "disable time tracking for", w);
  return plist;
}

Handle dataset_create_plist(const std::vector<hsize_t>& chunk, const DatasetOptions& options,
                            bool variable_length, const Where& w) {
  Handle dcpl = object_create_plist(H5P_DATASET_CREATE, w);
  if (!chunk.empty()) {
    check(H5Pset_chunk(dcpl.id(), static_cast<int>(chunk.size()), chunk.data()),
          "set the chunk shape of", w);
    if (options.checksum && !variable_length) {
      check(H5Pset_fletcher32(dcpl.id()), "set the Fletcher32 checksum of", w);
    }
    if (options.shuffle) check(H5Pset_shuffle(dcpl.id()), "set the shuffle filter of", w);
    if (options.deflate_level > 0) {
      check(H5Pset_deflate(dcpl.id(), static_cast<unsigned>(options.deflate_level)),
            "set the deflate filter of", w);
    }
  } else if (options.shuffle || options.deflate_level > 0) {
    fail("HDF5: dataset '{}' in '{}': compression needs a chunk shape", w.path, w.file);
  }
  if (!options.fill) {
    check(H5Pset_fill_time(dcpl.id(), H5D_FILL_TIME_NEVER), "set the fill time of", w);
  }
  return dcpl;
}

// ---- attributes, shared by Group and Dataset ----

// Creates (or replaces) attribute `name` of `file_t` over `space` and writes `buf` of `mem_t`
// unless it is null.
void write_attr(hid_t obj, const Where& w, const std::string& name, hid_t file_t, hid_t mem_t,
                hid_t space, const void* buf) {
  const std::string what = fmt::format("write attribute '{}' of", name);
  if (check(H5Aexists(obj, name.c_str()), what, w) > 0)
    check(H5Adelete(obj, name.c_str()), what, w);
  Handle attr = checked_handle(
      H5Acreate2(obj, name.c_str(), file_t, space, H5P_DEFAULT, H5P_DEFAULT), what, w);
  if (buf != nullptr) check(H5Awrite(attr.id(), mem_t, buf), what, w);
  attr.close();
}

void set_attr_string(hid_t obj, const Where& w, const std::string& name, const std::string& value) {
  Handle type = string_type(H5T_CSET_UTF8);
  Handle space = checked_handle(H5Screate(H5S_SCALAR), "create a dataspace for", w);
  const char* p = value.c_str();
  write_attr(obj, w, name, type.id(), type.id(), space.id(), &p);
}

template <typename T>
void set_attr_scalar(hid_t obj, const Where& w, const std::string& name, hid_t file_t, hid_t mem_t,
                     T value) {
  Handle space = checked_handle(H5Screate(H5S_SCALAR), "create a dataspace for", w);
  write_attr(obj, w, name, file_t, mem_t, space.id(), &value);
}

template <typename T>
void set_attr_array(hid_t obj, const Where& w, const std::string& name, hid_t file_t, hid_t mem_t,
                    const std::vector<T>& values) {
  const hsize_t n = values.size();
  Handle space = checked_handle(n == 0 ? H5Screate(H5S_NULL) : H5Screate_simple(1, &n, nullptr),
                                "create a dataspace for", w);
  write_attr(obj, w, name, file_t, mem_t, space.id(), n == 0 ? nullptr : values.data());
}

struct OpenAttr {
  Handle attr;
  Handle type;
  hssize_t points;
};

OpenAttr open_attr(hid_t obj, const Where& w, const std::string& name) {
  const std::string what = fmt::format("read attribute '{}' of", name);
  OpenAttr a;
  a.attr = checked_handle(H5Aopen(obj, name.c_str(), H5P_DEFAULT), what, w);
  a.type = checked_handle(H5Aget_type(a.attr.id()), what, w);
  Handle space = checked_handle(H5Aget_space(a.attr.id()), what, w);
  a.points = check(H5Sget_simple_extent_npoints(space.id()), what, w);
  return a;
}

[[noreturn]] void attr_mismatch(const Where& w, const std::string& name,
                                std::string_view expected) {
  fail<IoError>("HDF5: attribute '{}' of '{}' in '{}' is not {}", name, w.path, w.file, expected);
}

std::string trim_fixed_string(const char* p, size_t size, H5T_str_t pad) {
  size_t len = pad == H5T_STR_SPACEPAD ? size : strnlen(p, size);
  if (pad == H5T_STR_SPACEPAD) {
    while (len > 0 && p[len - 1] == ' ') --len;
  }
  return std::string(p, len);
}

std::string attr_string(hid_t obj, const Where& w, const std::string& name) {
  OpenAttr a = open_attr(obj, w, name);
  if (H5Tget_class(a.type.id()) != H5T_STRING || a.points != 1)
    attr_mismatch(w, name, "a scalar string");
  const std::string what = fmt::format("read attribute '{}' of", name);
  if (H5Tis_variable_str(a.type.id()) > 0) {
    Handle mtype = string_type(H5Tget_cset(a.type.id()));
    char* p = nullptr;
    check(H5Aread(a.attr.id(), mtype.id(), &p), what, w);
    std::string value = p != nullptr ? std::string(p) : std::string();
    H5free_memory(p);
    return value;
  }
  const size_t size = H5Tget_size(a.type.id());
  std::string buf(size, '\0');
  check(H5Aread(a.attr.id(), a.type.id(), buf.data()), what, w);
  return trim_fixed_string(buf.data(), size, H5Tget_strpad(a.type.id()));
}

template <typename T>
std::vector<T> attr_values(hid_t obj, const Where& w, const std::string& name, hid_t mem_t,
                           bool allow_float, std::string_view expected, bool scalar) {
  OpenAttr a = open_attr(obj, w, name);
  const H5T_class_t cls = H5Tget_class(a.type.id());
  if (!(cls == H5T_INTEGER || (allow_float && cls == H5T_FLOAT))) attr_mismatch(w, name, expected);
  if (scalar && a.points != 1) attr_mismatch(w, name, expected);
  std::vector<T> values(static_cast<size_t>(a.points));
  if (!values.empty()) {
    check(H5Aread(a.attr.id(), mem_t, values.data()), fmt::format("read attribute '{}' of", name),
          w);
  }
  return values;
}

bool has_attr(hid_t obj, const Where& w, const std::string& name) {
  return check(H5Aexists(obj, name.c_str()), fmt::format("check attribute '{}' of", name), w) > 0;
}

}  // namespace

void init() {
  static bool done = false;
  if (done) return;
  if (H5open() < 0) throw IoError("HDF5: cannot initialise the library");
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  done = true;
}

// ---- Handle ----

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    close_silently();
    id_ = std::exchange(o.id_, H5I_INVALID_HID);
  }
  return *this;
}

namespace {
herr_t close_id(hid_t id) {
  switch (H5Iget_type(id)) {
    case H5I_FILE: return H5Fclose(id);
    case H5I_GROUP: return H5Gclose(id);
    case H5I_DATASET: return H5Dclose(id);
    case H5I_DATASPACE: return H5Sclose(id);
    case H5I_DATATYPE: return H5Tclose(id);
    case H5I_ATTR: return H5Aclose(id);
    case H5I_GENPROP_LST: return H5Pclose(id);
    default: return H5Idec_ref(id) < 0 ? -1 : 0;
  }
}
}  // namespace

void Handle::close() {
  if (id_ < 0) return;
  const hid_t id = std::exchange(id_, H5I_INVALID_HID);
  if (close_id(id) < 0) throw IoError("HDF5: cannot close a handle: " + stack_detail());
}

void Handle::close_silently() noexcept {
  if (id_ < 0) return;
  close_id(id_);
  id_ = H5I_INVALID_HID;
}

// ---- Dataset ----

std::vector<hsize_t> Dataset::dims() const {
  return dataset_dims(id(), {file_, path_});
}

void Dataset::append(const void* data, hsize_t rows) {
  const Where w{file_, path_};
  if (rows == 0) return;
  Handle mtype = fixed_mem_type(id(), w);
  std::vector<hsize_t> dims = dataset_dims(id(), w);
  if (dims.empty())
    fail<IoError>("HDF5: cannot append to scalar dataset '{}' in '{}'", path_, file_);
  extend_and_write(id(), mtype.id(), std::move(dims), rows, data, w);
}

void Dataset::append_floats(const float* data, hsize_t rows) {
  const Where w{file_, path_};
  if (rows == 0) return;
  std::vector<hsize_t> dims = dataset_dims(id(), w);
  if (dims.empty())
    fail<IoError>("HDF5: cannot append to scalar dataset '{}' in '{}'", path_, file_);
  extend_and_write(id(), H5T_NATIVE_FLOAT, std::move(dims), rows, data, w);
}

void Dataset::read_rows_as_floats(float* data, hsize_t first, hsize_t rows) const {
  const Where w{file_, path_};
  const std::vector<hsize_t> dims = dataset_dims(id(), w);
  require_rows(dims, first, rows, w);
  if (rows > 0) read_row_block(id(), H5T_NATIVE_FLOAT, dims, first, rows, data, w);
}

void Dataset::write_rows(const void* data, hsize_t first, hsize_t rows) {
  const Where w{file_, path_};
  Handle mtype = fixed_mem_type(id(), w);
  const std::vector<hsize_t> dims = dataset_dims(id(), w);
  require_rows(dims, first, rows, w);
  if (rows > 0) write_row_block(id(), mtype.id(), dims, first, rows, data, w);
}

void Dataset::read_rows(void* data, hsize_t first, hsize_t rows) const {
  const Where w{file_, path_};
  Handle mtype = fixed_mem_type(id(), w);
  const std::vector<hsize_t> dims = dataset_dims(id(), w);
  require_rows(dims, first, rows, w);
  if (rows > 0) read_row_block(id(), mtype.id(), dims, first, rows, data, w);
}

void Dataset::read_row_list(void* data, const std::vector<hsize_t>& rows) const {
  const Where w{file_, path_};
  Handle mtype = fixed_mem_type(id(), w);
  read_row_union(id(), mtype.id(), rows, data, w);
}

void Dataset::append_blobs(const std::vector<std::vector<uint8_t>>& blobs) {
  const Where w{file_, path_};
  if (blobs.empty()) return;
  Handle mtype = blob_mem_type(id(), w);
  std::vector<hsize_t> dims = dataset_dims(id(), w);
  if (dims.size() != 1)
    fail<IoError>("HDF5: blob dataset '{}' in '{}' is not one-dimensional", path_, file_);
  std::vector<hvl_t> buf(blobs.size());
  for (size_t i = 0; i < blobs.size(); ++i) {
    buf[i].len = blobs[i].size();
    buf[i].p = blobs[i].empty() ? nullptr : const_cast<uint8_t*>(blobs[i].data());
  }
  extend_and_write(id(), mtype.id(), std::move(dims), blobs.size(), buf.data(), w);
}

std::vector<std::vector<uint8_t>> Dataset::read_blobs(hsize_t first, hsize_t rows) const {
  const Where w{file_, path_};
  Handle mtype = blob_mem_type(id(), w);
  const std::vector<hsize_t> dims = dataset_dims(id(), w);
  require_rows(dims, first, rows, w);
  if (rows == 0) return {};
  std::vector<hvl_t> buf(rows);
  read_row_block(id(), mtype.id(), dims, first, rows, buf.data(), w);
  return take_blobs(buf, mtype.id());
}

std::vector<std::vector<uint8_t>> Dataset::read_blob_list(const std::vector<hsize_t>& rows) const {
  const Where w{file_, path_};
  Handle mtype = blob_mem_type(id(), w);
  if (rows.empty()) return {};
  std::vector<hvl_t> buf(rows.size());
  read_row_union(id(), mtype.id(), rows, buf.data(), w);
  return take_blobs(buf, mtype.id());
}

std::vector<std::string> Dataset::read_strings() const {
  const Where w{file_, path_};
  Handle ftype = checked_handle(H5Dget_type(id()), "get the type of dataset", w);
  if (H5Tget_class(ftype.id()) != H5T_STRING) {
    fail<IoError>("HDF5: dataset '{}' in '{}' does not hold strings", path_, file_);
  }
  Handle space = checked_handle(H5Dget_space(id()), "get the dataspace of dataset", w);
  const auto n = static_cast<size_t>(
      check(H5Sget_simple_extent_npoints(space.id()), "count elements of dataset", w));
  std::vector<std::string> out(n);
  if (n == 0) return out;
  if (H5Tis_variable_str(ftype.id()) > 0) {
    Handle mtype = string_type(H5Tget_cset(ftype.id()));
    std::vector<char*> buf(n, nullptr);
    check(H5Dread(id(), mtype.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()),
          "read strings of dataset", w);
    for (size_t i = 0; i < n; ++i) {
      if (buf[i] != nullptr) out[i] = buf[i];
    }
    H5Dvlen_reclaim(mtype.id(), space.id(), H5P_DEFAULT, buf.data());
    return out;
  }
  const size_t size = H5Tget_size(ftype.id());
  std::vector<char> buf(n * size);
  check(H5Dread(id(), ftype.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()),
        "read strings of dataset", w);
  const H5T_str_t pad = H5Tget_strpad(ftype.id());
  for (size_t i = 0; i < n; ++i) out[i] = trim_fixed_string(buf.data() + i * size, size, pad);
  return out;
}

template <typename T>
std::vector<T> Dataset::read_all() const {
  const Where w{file_, path_};
  Handle ftype = checked_handle(H5Dget_type(id()), "get the type of dataset", w);
  const H5T_class_t cls = H5Tget_class(ftype.id());
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) {
    fail<IoError>("HDF5: dataset '{}' in '{}' does not hold numbers", path_, file_);
  }
  Handle space = checked_handle(H5Dget_space(id()), "get the dataspace of dataset", w);
  const auto n = static_cast<size_t>(
      check(H5Sget_simple_extent_npoints(space.id()), "count elements of dataset", w));
  std::vector<T> out(n);
  if (n == 0) return out;
  Handle mtype = mem_type(type_of<T>());
  check(H5Dread(id(), mtype.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "read dataset", w);
  return out;
}

void Dataset::set_attr(const std::string& name, const std::string& value) {
  set_attr_string(id(), {file_, path_}, name, value);
}
void Dataset::set_attr(const std::string& name, int64_t value) {
  set_attr_scalar(id(), {file_, path_}, name, H5T_STD_I64LE, H5T_NATIVE_INT64, value);
}
void Dataset::set_attr(const std::string& name, double value) {
  set_attr_scalar(id(), {file_, path_}, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, value);
}
std::string Dataset::attr_string(const std::string& name) const {
  return h5::attr_string(id(), {file_, path_}, name);
}
int64_t Dataset::attr_int(const std::string& name) const {
  return attr_values<int64_t>(id(), {file_, path_}, name, H5T_NATIVE_INT64, false,
                              "a scalar integer", true)[0];
}
double Dataset::attr_double(const std::string& name) const {
  return attr_values<double>(id(), {file_, path_}, name, H5T_NATIVE_DOUBLE, true, "a scalar number",
                             true)[0];
}

// ---- Group ----

Group Group::create_group(const std::string& name) {
  const std::string full = join(path_, name);
  const Where w{file_, full};
  const std::vector<std::string> parts = split_path(name);
  if (parts.empty())
    fail("HDF5: cannot create a group with the empty name '{}' in '{}'", name, file_);
  Handle gcpl = object_create_plist(H5P_GROUP_CREATE, w);
  Handle parent;
  hid_t loc = h_.id();
  if (name.front() == '/') {
    parent = checked_handle(H5Gopen2(h_.id(), "/", H5P_DEFAULT), "open the root group for", w);
    loc = parent.id();
  }
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const char* part = parts[i].c_str();
    Handle next;
    if (check(H5Lexists(loc, part, H5P_DEFAULT), "look up a parent of group", w) > 0) {
      next = checked_handle(H5Gopen2(loc, part, H5P_DEFAULT), "open a parent of group", w);
    } else {
      next = checked_handle(H5Gcreate2(loc, part, H5P_DEFAULT, gcpl.id(), H5P_DEFAULT),
                            "create a parent of group", w);
    }
    parent = std::move(next);
    loc = parent.id();
  }
  Handle g =
      checked_handle(H5Gcreate2(loc, parts.back().c_str(), H5P_DEFAULT, gcpl.id(), H5P_DEFAULT),
                     "create group", w);
  return Group(std::move(g), file_, full);
}

Group Group::open_group(const std::string& name) const {
  const std::string full = join(path_, name);
  Handle g =
      checked_handle(H5Gopen2(h_.id(), name.c_str(), H5P_DEFAULT), "open group", {file_, full});
  return Group(std::move(g), file_, full);
}

bool Group::exists(const std::string& name) const {
  const std::vector<std::string> parts = split_path(name);
  if (parts.empty()) return !name.empty();  // "/" names the root group
  std::string prefix = name.front() == '/' ? "/" : "";
  for (const std::string& part : parts) {
    prefix += part;
    const htri_t found = H5Lexists(h_.id(), prefix.c_str(), H5P_DEFAULT);
    if (found < 0) {
      // An intermediate component that is not a group; anything else is reported by open.
      H5Eclear2(H5E_DEFAULT);
      return false;
    }
    if (found == 0) return false;
    prefix += "/";
  }
  return true;
}

std::vector<std::string> Group::list() const {
  std::vector<std::string> names;
  hsize_t idx = 0;
  check(H5Literate(
            h_.id(), H5_INDEX_NAME, H5_ITER_INC, &idx,
            [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
              static_cast<std::vector<std::string>*>(data)->emplace_back(name);
              return 0;
            },
            &names),
        "list group", {file_, path_});
  std::sort(names.begin(), names.end());
  return names;
}

Dataset Group::create_appendable(const std::string& name, Type type,
                                 const std::vector<hsize_t>& row_shape,
                                 const DatasetOptions& options) {
  const std::string full = join(path_, name);
  const Where w{file_, full};
  std::vector<hsize_t> dims{0};
  dims.insert(dims.end(), row_shape.begin(), row_shape.end());
  std::vector<hsize_t> max_dims = dims;
  max_dims[0] = H5S_UNLIMITED;
  std::vector<hsize_t> chunk = options.chunk;
  if (chunk.empty()) fail("HDF5: appendable dataset '{}' in '{}' needs a chunk shape", full, file_);
  if (chunk.size() == 1) {
    for (hsize_t d : row_shape) chunk.push_back(std::max<hsize_t>(d, 1));
  }
  if (chunk.size() != dims.size()) {
    fail("HDF5: chunk rank {} does not match the rank {} of dataset '{}' in '{}'", chunk.size(),
         dims.size(), full, file_);
  }
  Handle space =
      checked_handle(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), max_dims.data()),
                     "create the dataspace of dataset", w);
  const bool vlen = type == Type::kVarString || type == Type::kVarBytes;
  Handle dcpl = dataset_create_plist(chunk, options, vlen, w);
  Handle ftype = file_type(type);
  Handle d = checked_handle(H5Dcreate2(h_.id(), name.c_str(), ftype.id(), space.id(), H5P_DEFAULT,
                                       dcpl.id(), H5P_DEFAULT),
                            "create dataset", w);
  return Dataset(std::move(d), file_, full);
}

Dataset Group::write_dataset(const std::string& name, Type type, const std::vector<hsize_t>& dims,
                             const void* data, const DatasetOptions& options) {
  const std::string full = join(path_, name);
  const Where w{file_, full};
  const hsize_t elements = product(dims);
  std::vector<hsize_t> chunk = options.chunk;
  if (!chunk.empty()) {
    if (chunk.size() == 1 && dims.size() > 1) {
      for (size_t i = 1; i < dims.size(); ++i) chunk.push_back(dims[i]);
    }
    if (chunk.size() != dims.size()) {
      fail("HDF5: chunk rank {} does not match the rank {} of dataset '{}' in '{}'", chunk.size(),
           dims.size(), full, file_);
    }
    // A fixed-size dataset's chunk may not exceed its extent; an empty one is stored contiguously.
    for (size_t i = 0; i < dims.size(); ++i)
      chunk[i] = std::max<hsize_t>(1, std::min(chunk[i], dims[i]));
    if (elements == 0) chunk.clear();
  }
  DatasetOptions effective = options;
  if (chunk.empty()) effective = {};
  Handle space =
      checked_handle(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                     "create the dataspace of dataset", w);
  const bool vlen = type == Type::kVarString || type == Type::kVarBytes;
  Handle dcpl = dataset_create_plist(chunk, effective, vlen, w);
  Handle ftype = file_type(type);
  Handle d = checked_handle(H5Dcreate2(h_.id(), name.c_str(), ftype.id(), space.id(), H5P_DEFAULT,
                                       dcpl.id(), H5P_DEFAULT),
                            "create dataset", w);
  if (elements > 0) {
    Handle mtype = mem_type(type);
    check(H5Dwrite(d.id(), mtype.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "write dataset", w);
  }
  return Dataset(std::move(d), file_, full);
}

Dataset Group::write_strings(const std::string& name, const std::vector<std::string>& values) {
  std::vector<const char*> ptrs(values.size());
  for (size_t i = 0; i < values.size(); ++i) ptrs[i] = values[i].c_str();
  return write_dataset(name, Type::kVarString, {values.size()}, ptrs.data());
}

Dataset Group::create_virtual(const std::string& name, Type type, const std::vector<hsize_t>& dims,
                              const std::vector<VirtualSource>& sources) {
  const std::string full = join(path_, name);
  const Where w{file_, full};
  const int rank = static_cast<int>(dims.size());
  Handle vspace = checked_handle(H5Screate_simple(rank, dims.data(), nullptr),
                                 "create the dataspace of virtual dataset", w);
  Handle dcpl = object_create_plist(H5P_DATASET_CREATE, w);
  for (const auto& src : sources) {
    if (src.blocks == 0 || src.block == 0) continue;
    std::vector<hsize_t> start(dims.size(), 0), stride(dims.size(), 1), count(dims.size(), 1),
        block(dims);
    start[0] = src.start;
    stride[0] = std::max(src.stride, src.block);
    count[0] = src.blocks;
    block[0] = src.block;
    check(H5Sselect_hyperslab(vspace.id(), H5S_SELECT_SET, start.data(), stride.data(),
                              count.data(), block.data()),
          "select the virtual rows of", w);
    std::vector<hsize_t> sdims(dims);
    sdims[0] = src.source_first + src.blocks * src.block;
    Handle sspace = checked_handle(H5Screate_simple(rank, sdims.data(), nullptr),
                                   "create a source dataspace of", w);
    std::vector<hsize_t> sstart(dims.size(), 0), scount(sdims);
    sstart[0] = src.source_first;
    scount[0] = src.blocks * src.block;
    check(H5Sselect_hyperslab(sspace.id(), H5S_SELECT_SET, sstart.data(), nullptr, scount.data(),
                              nullptr),
          "select the source rows of", w);
    check(H5Pset_virtual(dcpl.id(), vspace.id(), src.file.c_str(), src.dataset.c_str(),
                         sspace.id()),
          "map a source into", w);
  }
  check(H5Sselect_all(vspace.id()), "reset the dataspace of", w);
  Handle ftype = file_type(type);
  Handle d = checked_handle(H5Dcreate2(h_.id(), name.c_str(), ftype.id(), vspace.id(), H5P_DEFAULT,
                                       dcpl.id(), H5P_DEFAULT),
                            "create virtual dataset", w);
  return Dataset(std::move(d), file_, full);
}

Dataset Group::open_dataset(const std::string& name) const {
  const std::string full = join(path_, name);
  Handle d =
      checked_handle(H5Dopen2(h_.id(), name.c_str(), H5P_DEFAULT), "open dataset", {file_, full});
  return Dataset(std::move(d), file_, full);
}

std::vector<hsize_t> Dataset::chunk_dims() const {
  const Where w{file_, path_};
  Handle dcpl = checked_handle(H5Dget_create_plist(id()), "get the creation list of", w);
  if (H5Pget_layout(dcpl.id()) != H5D_CHUNKED) return {};
  const int rank = check(H5Pget_chunk(dcpl.id(), 0, nullptr), "get the chunk rank of", w);
  std::vector<hsize_t> chunk(static_cast<size_t>(rank));
  check(H5Pget_chunk(dcpl.id(), rank, chunk.data()), "get the chunk shape of", w);
  return chunk;
}

template <typename T>
Dataset Group::write_vector(const std::string& name, const std::vector<T>& values,
                            const DatasetOptions& options) {
  return write_dataset(name, type_of<T>(), {values.size()}, values.data(), options);
}

void Group::set_attr(const std::string& name, const std::string& value) {
  set_attr_string(id(), {file_, path_}, name, value);
}
void Group::set_attr(const std::string& name, int64_t value) {
  set_attr_scalar(id(), {file_, path_}, name, H5T_STD_I64LE, H5T_NATIVE_INT64, value);
}
void Group::set_attr(const std::string& name, double value) {
  set_attr_scalar(id(), {file_, path_}, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, value);
}
void Group::set_attr(const std::string& name, const std::vector<int64_t>& values) {
  set_attr_array(id(), {file_, path_}, name, H5T_STD_I64LE, H5T_NATIVE_INT64, values);
}
void Group::set_attr(const std::string& name, const std::vector<double>& values) {
  set_attr_array(id(), {file_, path_}, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, values);
}
bool Group::has_attr(const std::string& name) const {
  return h5::has_attr(id(), {file_, path_}, name);
}
std::string Group::attr_string(const std::string& name) const {
  return h5::attr_string(id(), {file_, path_}, name);
}
int64_t Group::attr_int(const std::string& name) const {
  return attr_values<int64_t>(id(), {file_, path_}, name, H5T_NATIVE_INT64, false,
                              "a scalar integer", true)[0];
}
double Group::attr_double(const std::string& name) const {
  return attr_values<double>(id(), {file_, path_}, name, H5T_NATIVE_DOUBLE, true, "a scalar number",
                             true)[0];
}
std::vector<int64_t> Group::attr_ints(const std::string& name) const {
  return attr_values<int64_t>(id(), {file_, path_}, name, H5T_NATIVE_INT64, false,
                              "an integer array", false);
}
std::vector<double> Group::attr_doubles(const std::string& name) const {
  return attr_values<double>(id(), {file_, path_}, name, H5T_NATIVE_DOUBLE, true, "a numeric array",
                             false);
}

// ---- File ----

File File::open(const std::string& path, Mode mode) {
  init();
  const std::string root = "/";
  const Where w{path, root};
  auto file_error = [&](std::string_view what) {
    const std::string detail = stack_detail();
    fail<IoError>("HDF5: cannot {} file '{}'{}{}", what, path, detail.empty() ? "" : ": ", detail);
  };
  if (mode == Mode::kCreateTruncate) {
    Handle fcpl = object_create_plist(H5P_FILE_CREATE, w);
    Handle fapl = checked_handle(H5Pcreate(H5P_FILE_ACCESS), "create a file access list for", w);
    check(H5Pset_libver_bounds(fapl.id(), H5F_LIBVER_V18, H5F_LIBVER_LATEST),
          "set format bounds of", w);
    const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.id(), fapl.id());
    if (id < 0) file_error("create");
    return File(Handle(id), path);
  }
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    fail<IoError>("HDF5: cannot open file '{}': it does not exist", path);
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    fail<IoError>("HDF5: cannot open file '{}': not an HDF5 file or not readable", path);
  }
  Handle fapl = checked_handle(H5Pcreate(H5P_FILE_ACCESS), "create a file access list for", w);
  if (mode == Mode::kReadWrite) {
    check(H5Pset_libver_bounds(fapl.id(), H5F_LIBVER_V18, H5F_LIBVER_LATEST),
          "set format bounds of", w);
  }
  const hid_t id =
      H5Fopen(path.c_str(), mode == Mode::kRead ? H5F_ACC_RDONLY : H5F_ACC_RDWR, fapl.id());
  if (id < 0) file_error("open");
  return File(Handle(id), path);
}

void File::close() {
  if (!h_.valid()) return;
  if (H5Fflush(h_.id(), H5F_SCOPE_LOCAL) < 0) {
    const std::string detail = stack_detail();
    h_ = Handle();
    fail<IoError>("HDF5: cannot flush file '{}': {}", file_, detail);
  }
  try {
    h_.close();
  } catch (const IoError& e) {
    fail<IoError>("HDF5: cannot close file '{}': {}", file_, e.what());
  }
}

// ---- explicit instantiations ----

template std::vector<uint8_t> Dataset::read_all<uint8_t>() const;
template std::vector<int32_t> Dataset::read_all<int32_t>() const;
template std::vector<int64_t> Dataset::read_all<int64_t>() const;
template std::vector<float> Dataset::read_all<float>() const;
template std::vector<double> Dataset::read_all<double>() const;
template std::vector<uint16_t> Dataset::read_all<uint16_t>() const;

template Dataset Group::write_vector<uint8_t>(const std::string&, const std::vector<uint8_t>&,
                                              const DatasetOptions&);
template Dataset Group::write_vector<int32_t>(const std::string&, const std::vector<int32_t>&,
                                              const DatasetOptions&);
template Dataset Group::write_vector<int64_t>(const std::string&, const std::vector<int64_t>&,
                                              const DatasetOptions&);
template Dataset Group::write_vector<float>(const std::string&, const std::vector<float>&,
                                            const DatasetOptions&);
template Dataset Group::write_vector<double>(const std::string&, const std::vector<double>&,
                                             const DatasetOptions&);
template Dataset Group::write_vector<uint16_t>(const std::string&, const std::vector<uint16_t>&,
                                               const DatasetOptions&);

}  // namespace tessera::h5
