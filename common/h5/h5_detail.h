// Internal to common/h5: the checked-call helpers, element types and property lists that the
// files of the library share (h5.cpp: handles, groups, files; h5_dataset.cpp: row I/O;
// h5_attr.cpp: attributes; h5_detail.cpp: what is declared here).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/h5/h5.h"

namespace tessera::h5::detail {

// The most specific message on HDF5's error stack, e.g. "object 'patches' doesn't exist".
std::string stack_detail();

// Names the file and object of an operation for error messages.
struct Where {
  const std::string& file;
  const std::string& path;
};

// Throws IoError "HDF5: cannot <what> '<path>' in '<file>': <stack detail>".
[[noreturn]] void raise(std::string_view what, const Where& w);

template <typename R>
R check(R result, std::string_view what, const Where& w) {
  if (result < 0) raise(what, w);
  return result;
}

Handle checked_handle(hid_t id, std::string_view what, const Where& w);

// `name` under group path `base` (`name` itself when absolute).
std::string join(const std::string& base, const std::string& name);
// The non-empty components of a '/'-separated path.
std::vector<std::string> split_path(const std::string& name);
// The product of v[from..].
hsize_t product(const std::vector<hsize_t>& v, size_t from = 0);

Handle half_type(hid_t base);
Handle string_type(H5T_cset_t cset);
Handle copy_type(hid_t predefined);
// The type an element of `type` has in a file.
Handle file_type(Type type);
// The type an element of `type` has in memory (uint16_t raw bits for kFloat16, const char* for
// kVarString, hvl_t for kVarBytes).
Handle mem_type(Type type);
bool is_var_length(hid_t type);
// The in-memory equivalent of a fixed-size dataset's element type.
Handle fixed_mem_type(hid_t dset, const Where& w);
// Checks that a dataset holds variable-length byte sequences; returns its in-memory type.
Handle blob_mem_type(hid_t dset, const Where& w);

// A fixed-length string of `size` bytes without its padding (NUL or spaces, as `pad` says).
std::string trim_fixed_string(const char* p, size_t size, H5T_str_t pad);

std::vector<hsize_t> space_dims(hid_t space, const Where& w);
std::vector<hsize_t> dataset_dims(hid_t dset, const Where& w);

// A creation property list of class `cls` with object time tracking off.
Handle object_create_plist(hid_t cls, const Where& w);
// A dataset creation list: chunk shape, filters (Fletcher32 unless `variable_length`), fill time.
Handle dataset_create_plist(const std::vector<hsize_t>& chunk, const DatasetOptions& options,
                            bool variable_length, const Where& w);

}  // namespace tessera::h5::detail
