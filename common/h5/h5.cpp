#include "common/h5/h5.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string_view>
#include <utility>

#include "common/core/error.h"
#include "common/h5/h5_detail.h"

namespace tessera::h5 {

using namespace detail;

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

template <typename T>
Dataset Group::write_vector(const std::string& name, const std::vector<T>& values,
                            const DatasetOptions& options) {
  return write_dataset(name, type_of<T>(), {values.size()}, values.data(), options);
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
