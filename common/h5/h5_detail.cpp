// The checked-call helpers, element types and property lists of common/h5 (h5_detail.h).
#include "common/h5/h5_detail.h"

#include <algorithm>
#include <cstring>

#include "common/core/error.h"

namespace tessera::h5::detail {

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

[[noreturn]] void raise(std::string_view what, const Where& w) {
  const std::string detail = stack_detail();
  throw IoError(fmt::format("HDF5: cannot {} '{}' in '{}'{}{}", what, w.path, w.file,
                            detail.empty() ? "" : ": ", detail));
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

hsize_t product(const std::vector<hsize_t>& v, size_t from) {
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

std::string trim_fixed_string(const char* p, size_t size, H5T_str_t pad) {
  size_t len = pad == H5T_STR_SPACEPAD ? size : strnlen(p, size);
  if (pad == H5T_STR_SPACEPAD) {
    while (len > 0 && p[len - 1] == ' ') --len;
  }
  return std::string(p, len);
}

}  // namespace tessera::h5::detail
