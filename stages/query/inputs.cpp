#include "stages/query/inputs.h"

#include <fmt/ranges.h>
#include <hdf5.h>
#include <turbojpeg.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <variant>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"

namespace tessera::query {

namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicSize = 6;
constexpr unsigned char kPngMagic[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
constexpr unsigned char kJpegMagic[] = {0xff, 0xd8, 0xff};
constexpr uint64_t kMaxImagePixels = uint64_t{1} << 28;

// The first `n` bytes of a file (fewer when it is shorter). InvalidInput when it does not exist
// or is not a regular file (a wrong name on the command line), IoError when it cannot be opened.
std::string file_head(const std::string& path, size_t n, const char* what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    fail<InvalidInput>("{} '{}' {}", what, path,
                       std::filesystem::exists(path, ec) ? "is not a regular file"
                                                         : "does not exist");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail<IoError>("cannot open {} '{}': {}", what, path, std::strerror(errno));
  std::string head(n, '\0');
  in.read(head.data(), static_cast<std::streamsize>(n));
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

bool starts_with(const std::string& bytes, const void* magic, size_t size) {
  return bytes.size() >= size && std::memcmp(bytes.data(), magic, size) == 0;
}

// Throws InvalidInput naming `where` and the row of the first non-finite value.
void require_finite(const Matrix& m, const std::string& where) {
  for (size_t i = 0; i < m.values.size(); ++i) {
    if (!std::isfinite(m.values[i])) {
      fail<InvalidInput>("{}: row {} holds a non-finite value ({})", where,
                         i / static_cast<size_t>(m.cols), m.values[i]);
    }
  }
}

// ---- .npy header: a Python dict literal such as
//      {'descr': '<f4', 'fortran_order': False, 'shape': (3, 768), }

using NpyValue = std::variant<std::string, bool, std::vector<int64_t>>;

class NpyHeaderParser {
 public:
  NpyHeaderParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  std::map<std::string, NpyValue> parse() {
    std::map<std::string, NpyValue> out;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      std::string key = parse_string();
      expect(':');
      out[key] = parse_value();
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') bad("expected ',' or '}'");
    }
    return out;
  }

 private:
  [[noreturn]] void bad(const char* problem) const {
    fail<InvalidInput>("'{}' is not a valid .npy file: header {} at offset {} in \"{}\"", path_,
                       problem, pos_, s_);
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n')) ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) bad(c == '{' ? "does not start with '{'" : "has a syntax error");
    ++pos_;
  }
  std::string parse_string() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') bad("expected a quoted string");
    const size_t end = s_.find(quote, pos_ + 1);
    if (end == std::string::npos) bad("has an unterminated string");
    std::string value = s_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return value;
  }
  int64_t parse_int() {
    skip_space();
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    if (pos_ == start || pos_ - start > 18) bad("has an invalid shape dimension");
    const int64_t value = std::stoll(s_.substr(start, pos_ - start));
    if (peek() == 'L') ++pos_;  // Python 2 long literal
    return value;
  }
  NpyValue parse_value() {
    skip_space();
    const char c = peek();
    if (c == '\'' || c == '"') return parse_string();
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    if (c == '(') {
      ++pos_;
      std::vector<int64_t> dims;
      while (true) {
        skip_space();
        if (peek() == ')') break;
        dims.push_back(parse_int());
        skip_space();
        if (peek() == ',') {
          ++pos_;
        } else if (peek() != ')') {
          bad("has a malformed shape tuple");
        }
      }
      ++pos_;
      return dims;
    }
    if (c == '[') bad("describes a structured dtype, which is not supported");
    bad("has a value of unknown kind");
  }

  const std::string& s_;
  const std::string& path_;
  size_t pos_ = 0;
};

std::string dtype_name(const std::string& descr) {
  static const std::map<std::string, std::string> kNames = {
      {"f2", "float16"}, {"f4", "float32"}, {"f8", "float64"}, {"i1", "int8"},
      {"i2", "int16"},   {"i4", "int32"},   {"i8", "int64"},   {"u1", "uint8"},
      {"u2", "uint16"},  {"u4", "uint32"},  {"u8", "uint64"},  {"b1", "bool"}};
  if (descr.size() < 2) return descr;
  const auto it = kNames.find(descr.substr(1));
  if (it == kNames.end()) return descr;
  return descr[0] == '>' ? it->second + ", big-endian" : it->second;
}

uint32_t read_le(const std::string& bytes, size_t offset, size_t width) {
  uint32_t value = 0;
  for (size_t i = 0; i < width; ++i) {
    value |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  }
  return value;
}

// The type class and rank of the object at `name`, or nullopt when it is not a dataset.
struct DatasetShape {
  H5T_class_t type_class;
  std::vector<hsize_t> dims;
};

std::optional<DatasetShape> dataset_shape(const h5::File& file, const std::string& name) {
  h5::Handle object(H5Oopen(file.id(), name.c_str(), H5P_DEFAULT));
  if (!object.valid()) {
    fail<IoError>("HDF5: cannot open object '{}' in '{}'", name, file.file_name());
  }
  if (H5Iget_type(object.id()) != H5I_DATASET) return std::nullopt;
  const h5::Dataset dataset = file.open_dataset(name);
  h5::Handle type(H5Dget_type(dataset.id()));
  if (!type.valid()) {
    fail<IoError>("HDF5: cannot get the type of dataset '{}' in '{}'", name, file.file_name());
  }
  return DatasetShape{H5Tget_class(type.id()), dataset.dims()};
}

// Adds every 2-D floating-point dataset below `group` to `out` (depth-limited: soft links may
// form cycles).
void find_float_matrices(const h5::File& file, const h5::Group& group, int depth,
                         std::vector<std::string>* out) {
  if (depth > 16) return;
  for (const std::string& name : group.list()) {
    const std::string full = group.path() == "/" ? "/" + name : group.path() + "/" + name;
    h5::Handle object(H5Oopen(file.id(), full.c_str(), H5P_DEFAULT));
    if (!object.valid()) continue;  // a dangling soft or external link
    const H5I_type_t type = H5Iget_type(object.id());
    if (type == H5I_GROUP) {
      find_float_matrices(file, group.open_group(name), depth + 1, out);
    } else if (type == H5I_DATASET) {
      const auto shape = dataset_shape(file, full);
      if (shape && shape->type_class == H5T_FLOAT && shape->dims.size() == 2) out->push_back(full);
    }
  }
}

struct TjDestroy {
  void operator()(void* handle) const { tjDestroy(handle); }
};

}  // namespace

Matrix read_npy(const std::string& path) {
  const std::string bytes = read_file(path);
  if (!starts_with(bytes, kNpyMagic, kNpyMagicSize)) {
    fail<InvalidInput>("'{}' is not a .npy file: bad magic (expected \\x93NUMPY)", path);
  }
  if (bytes.size() < 10)
    fail<InvalidInput>("'{}' is not a valid .npy file: truncated header", path);
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3) {
    fail<InvalidInput>("'{}': unsupported .npy format version {}.{} (expected 1.0, 2.0 or 3.0)",
                       path, major, static_cast<unsigned char>(bytes[7]));
  }
  const size_t len_width = major == 1 ? 2 : 4;
  const size_t header_start = 8 + len_width;
  if (bytes.size() < header_start) {
    fail<InvalidInput>("'{}' is not a valid .npy file: truncated header", path);
  }
  const uint64_t header_len = read_le(bytes, 8, len_width);
  if (bytes.size() < header_start + header_len) {
    fail<InvalidInput>("'{}' is not a valid .npy file: header of {} bytes is truncated at {}", path,
                       header_len, bytes.size() - header_start);
  }
  const std::string header = bytes.substr(header_start, header_len);
  const auto dict = NpyHeaderParser(header, path).parse();

  const auto field = [&](const char* key) -> const NpyValue& {
    const auto it = dict.find(key);
    if (it == dict.end()) fail<InvalidInput>("'{}': .npy header has no '{}'", path, key);
    return it->second;
  };
  const auto* descr = std::get_if<std::string>(&field("descr"));
  const auto* fortran = std::get_if<bool>(&field("fortran_order"));
  const auto* shape = std::get_if<std::vector<int64_t>>(&field("shape"));
  if (descr == nullptr || fortran == nullptr || shape == nullptr) {
    fail<InvalidInput>("'{}': .npy header fields have the wrong kinds: \"{}\"", path, header);
  }
  size_t item = 0;
  if (*descr == "<f4") {
    item = 4;
  } else if (*descr == "<f8") {
    item = 8;
  } else {
    fail<InvalidInput>(
        "'{}': unsupported dtype '{}' ({}); expected '<f4' (float32) or '<f8' (float64)", path,
        *descr, dtype_name(*descr));
  }
  if (shape->empty() || shape->size() > 2) {
    fail<InvalidInput>("'{}': array has {} dimensions; expected (rows, cols) or (cols,)", path,
                       shape->size());
  }
  const int64_t rows = shape->size() == 2 ? (*shape)[0] : 1;
  const int64_t cols = shape->back();
  if (cols <= 0 || cols > std::numeric_limits<int>::max()) {
    fail<InvalidInput>("'{}': array has {} columns; expected 1 to {}", path, cols,
                       std::numeric_limits<int>::max());
  }
  if (rows > static_cast<int64_t>((uint64_t{1} << 40) / static_cast<uint64_t>(cols))) {
    fail<InvalidInput>("'{}': shape ({}, {}) is too large", path, rows, cols);
  }
  const uint64_t count = static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols);
  const uint64_t data_start = header_start + header_len;
  const uint64_t have = bytes.size() - data_start;
  if (have != count * item) {
    fail<InvalidInput>("'{}': {} data: shape ({}, {}) of '{}' needs {} bytes, the file holds {}",
                       path, have < count * item ? "truncated" : "excess", rows, cols, *descr,
                       count * item, have);
  }

  Matrix m;
  m.rows = rows;
  m.cols = static_cast<int>(cols);
  m.values.resize(count);
  const char* data = bytes.data() + data_start;
  for (uint64_t i = 0; i < count; ++i) {
    // Element i of the file; in Fortran order it is (i % rows, i / rows).
    const uint64_t dst = *fortran ? (i % rows) * cols + i / rows : i;
    if (item == 4) {
      float v;
      std::memcpy(&v, data + i * 4, 4);
      m.values[dst] = v;
    } else {
      double v;
      std::memcpy(&v, data + i * 8, 8);
      m.values[dst] = static_cast<float>(v);
    }
  }
  require_finite(m, "'" + path + "'");
  return m;
}

Matrix read_vectors_h5(const std::string& path, const std::string& dataset) {
  const std::string where = fmt::format("dataset '{}' in '{}'", dataset, path);
  h5::File file = h5::File::open(path, h5::Mode::kRead);
  if (dataset.empty() || !file.exists(dataset)) {
    fail<InvalidInput>("'{}' has no dataset '{}'", path, dataset);
  }
  const auto shape = dataset_shape(file, dataset);
  if (!shape) fail<InvalidInput>("'{}' in '{}' is not a dataset", dataset, path);
  if (shape->type_class != H5T_FLOAT) {
    fail<InvalidInput>("{} does not hold floating-point values", where);
  }
  if (shape->dims.empty() || shape->dims.size() > 2) {
    fail<InvalidInput>("{} has {} dimensions; expected (rows, cols) or (cols,)", where,
                       shape->dims.size());
  }
  const uint64_t rows = shape->dims.size() == 2 ? shape->dims[0] : 1;
  const uint64_t cols = shape->dims.back();
  if (cols == 0 || cols > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    fail<InvalidInput>("{} has {} columns", where, cols);
  }
  Matrix m;
  m.rows = static_cast<int64_t>(rows);
  m.cols = static_cast<int>(cols);
  m.values = file.open_dataset(dataset).read_all<float>();
  require_finite(m, where);
  return m;
}

Matrix read_query_vectors(const std::string& spec) {
  std::string path = spec;
  std::optional<std::string> dataset;
  for (size_t pos = spec.rfind(':'); pos != std::string::npos && pos > 0;
       pos = spec.rfind(':', pos - 1)) {
    const std::string left = spec.substr(0, pos);
    if (path_exists(left) && !path_exists(spec)) {
      path = left;
      dataset = spec.substr(pos + 1);
      break;
    }
  }
  if (dataset && dataset->empty()) {
    fail<InvalidInput>("query vectors '{}': empty dataset name after ':'", spec);
  }

  const std::string head = file_head(path, kNpyMagicSize, "query vectors");
  Matrix m;
  if (starts_with(head, kNpyMagic, kNpyMagicSize)) {
    if (dataset) {
      fail<InvalidInput>("query vectors '{}': '{}' is a .npy file, which has no dataset '{}'", spec,
                         path, *dataset);
    }
    m = read_npy(path);
  } else {
    h5::init();
    if (H5Fis_hdf5(path.c_str()) <= 0) {
      fail<InvalidInput>("query vectors '{}' are neither a .npy nor an HDF5 file", path);
    }
    if (!dataset) {
      h5::File file = h5::File::open(path, h5::Mode::kRead);
      for (const char* name : {"/embeddings", "/features"}) {
        if (file.exists(name)) {
          dataset = name;
          break;
        }
      }
      if (!dataset) {
        std::vector<std::string> candidates;
        find_float_matrices(file, file, 0, &candidates);
        if (candidates.size() != 1) {
          fail<InvalidInput>(
              "query vectors '{}': no /embeddings or /features, and {} 2-D floating-point "
              "datasets{}; name one as '{}:/path/to/dataset'",
              path, candidates.size(),
              candidates.empty() ? std::string()
                                 : fmt::format(" ({})", fmt::join(candidates, ", ")),
              path);
        }
        dataset = candidates.front();
      }
    }
    m = read_vectors_h5(path, *dataset);
  }
  if (m.rows == 0) fail<InvalidInput>("query vectors '{}' hold no rows", spec);
  return m;
}

Image8 read_image(const std::string& path) {
  const std::string head = file_head(path, sizeof(kPngMagic), "image");
  if (starts_with(head, kPngMagic, sizeof(kPngMagic))) {
    // The file opened: a PNG that libpng cannot decode (truncated, damaged) is bad input.
    Image8 image;
    try {
      image = read_png(path, kMaxImagePixels);
    } catch (const IoError& e) {
      throw InvalidInput(fmt::format("image '{}' is not a valid PNG: {}", path, e.what()));
    }
    if (image.channels == 1) {
      Image8 rgb{image.width, image.height, 3, {}};
      rgb.pixels.resize(image.pixels.size() * 3);
      for (size_t i = 0; i < image.pixels.size(); ++i) {
        rgb.pixels[3 * i] = rgb.pixels[3 * i + 1] = rgb.pixels[3 * i + 2] = image.pixels[i];
      }
      return rgb;
    }
    return image;
  }
  if (!starts_with(head, kJpegMagic, sizeof(kJpegMagic))) {
    fail<InvalidInput>("image '{}' is neither PNG nor JPEG (unrecognised signature)", path);
  }
  const std::string bytes = read_file(path);
  std::unique_ptr<void, TjDestroy> tj(tjInitDecompress());
  if (!tj) fail<IoError>("libturbojpeg: cannot initialise: {}", tjGetErrorStr2(nullptr));
  auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(tj.get(), data, bytes.size(), &width, &height, &subsampling,
                          &colorspace) != 0) {
    fail<InvalidInput>("image '{}' is not a valid JPEG: {}", path, tjGetErrorStr2(tj.get()));
  }
  if (width <= 0 || height <= 0) {
    fail<InvalidInput>("image '{}' is not a valid JPEG: its header gives no image size", path);
  }
  if (static_cast<uint64_t>(width) * static_cast<uint64_t>(height) > kMaxImagePixels) {
    fail<InvalidInput>("image '{}' is {}x{} pixels, over the limit of {}", path, width, height,
                       kMaxImagePixels);
  }
  Image8 image{width, height, 3, {}};
  image.pixels.resize(static_cast<size_t>(width) * height * 3);
  if (tjDecompress2(tj.get(), data, bytes.size(), image.pixels.data(), width, 0, height, TJPF_RGB,
                    TJFLAG_ACCURATEDCT) != 0) {
    fail<InvalidInput>("image '{}': JPEG decoding failed: {}", path, tjGetErrorStr2(tj.get()));
  }
  return image;
}

}  // namespace tessera::query
