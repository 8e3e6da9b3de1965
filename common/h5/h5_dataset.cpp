// Dataset's row I/O (h5.h): appends, row blocks and row lists, blobs, strings, whole reads.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "common/core/error.h"
#include "common/h5/h5.h"
#include "common/h5/h5_detail.h"

namespace tessera::h5 {

using namespace detail;

namespace {

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

}  // namespace

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

void Dataset::read_row_list_as_floats(float* data, const std::vector<hsize_t>& rows) const {
  read_row_union(id(), H5T_NATIVE_FLOAT, rows, data, Where{file_, path_});
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

std::vector<hsize_t> Dataset::chunk_dims() const {
  const Where w{file_, path_};
  Handle dcpl = checked_handle(H5Dget_create_plist(id()), "get the creation list of", w);
  if (H5Pget_layout(dcpl.id()) != H5D_CHUNKED) return {};
  const int rank = check(H5Pget_chunk(dcpl.id(), 0, nullptr), "get the chunk rank of", w);
  std::vector<hsize_t> chunk(static_cast<size_t>(rank));
  check(H5Pget_chunk(dcpl.id(), rank, chunk.data()), "get the chunk shape of", w);
  return chunk;
}

// ---- explicit instantiations ----

template std::vector<uint8_t> Dataset::read_all<uint8_t>() const;
template std::vector<int32_t> Dataset::read_all<int32_t>() const;
template std::vector<int64_t> Dataset::read_all<int64_t>() const;
template std::vector<float> Dataset::read_all<float>() const;
template std::vector<double> Dataset::read_all<double>() const;
template std::vector<uint16_t> Dataset::read_all<uint16_t>() const;

}  // namespace tessera::h5
