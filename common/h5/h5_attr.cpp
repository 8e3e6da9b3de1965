// Attributes of groups and datasets (h5.h): scalar strings and numbers, 1-D number arrays.
#include <string_view>

#include "common/core/error.h"
#include "common/h5/h5.h"
#include "common/h5/h5_detail.h"

namespace tessera::h5 {

using namespace detail;

namespace {

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

}  // namespace tessera::h5
