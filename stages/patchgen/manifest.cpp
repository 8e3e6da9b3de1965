#include "stages/patchgen/manifest.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "common/core/csv.h"
#include "common/core/error.h"
#include "common/core/strings.h"
#include "common/core/fs.h"
#include "common/core/utf8.h"
#include "common/core/value_type.h"
#include "common/store/columns.h"

namespace tessera::patchgen {

namespace {

namespace fs = std::filesystem;

constexpr char kUtf8Bom[] = "\xEF\xBB\xBF";

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

// `s` with control characters as \xNN and byte-order marks as \uFEFF, so that a message shows
// what the manifest holds and stays one line per problem (a NUL would end the message).
std::string printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else if (s.compare(i, 3, kUtf8Bom) == 0) {
      out += "\\uFEFF";
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The manifest's directory, absolute; lexical only (symlinks are kept).
fs::path absolute_directory_of(const std::string& manifest_path) {
  std::error_code ec;
  const fs::path given = manifest_path.empty() ? fs::path(".") : fs::path(manifest_path);
  const fs::path absolute = fs::absolute(given, ec);
  if (ec) {
    fail<IoError>("cannot make the manifest path '{}' absolute: {}", printable(manifest_path),
                  ec.message());
  }
  return absolute.lexically_normal().parent_path();
}

std::string resolve(const fs::path& base, const std::string& p) {
  if (p.empty()) return p;
  fs::path path(p);
  return (path.is_absolute() ? path : base / path).lexically_normal().string();
}

std::string ascii_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// A positive decimal number (common/core/value_type.h), the whole text; 0 otherwise.
double parse_mpp(const std::string& text) {
  const std::optional<double> value = parse_double(text);
  return value && *value > 0 ? *value : 0;
}

// One problem per line of `text` that is not valid UTF-8, naming its first bad byte by line and
// column (in characters, 1-based).
void check_utf8(const std::string& text, std::vector<std::string>& problems) {
  int line = 1, column = 1;
  bool reported = false;  // this line's first bad byte is reported, not the rest
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
      reported = false;
      ++i;
      continue;
    }
    const size_t n = utf8_sequence_length(text, i);
    if (n == 0 && !reported) {
      problems.push_back(fmt::format(
          "line {}, column {}: not valid UTF-8 (byte 0x{:02x}); save the manifest as UTF-8",
          line, column, static_cast<unsigned char>(text[i])));
      reported = true;
    }
    i += n == 0 ? 1 : n;
    ++column;
  }
}

std::string builtin_column_list() {
  std::string list;
  for (const auto& name : kBuiltinColumns) list += (list.empty() ? "" : ", ") + std::string(name);
  return list;
}

[[noreturn]] void throw_problems(const std::string& manifest_path,
                                 const std::vector<std::string>& problems) {
  std::string message = fmt::format("manifest '{}' has {} problem{}:", printable(manifest_path),
                                    problems.size(), problems.size() == 1 ? "" : "s");
  for (const auto& p : problems) message += "\n  " + p;
  throw InvalidInput(message);
}

}  // namespace

namespace {

// Parses what it can, appending every problem found to `problems`.
Manifest parse_collecting(const std::string& text, const std::string& manifest_path,
                          std::vector<std::string>& problems) {
  Manifest manifest;
  manifest.path = manifest_path;
  if (has_nul(manifest_path)) {
    problems.push_back("the manifest path contains a NUL byte");
    return manifest;
  }
  // Every name and value goes into HDF5 strings and JSON, which hold UTF-8 only.
  check_utf8(text, problems);
  if (!problems.empty()) return manifest;
  // Spreadsheet programs write a byte-order mark at the start of "CSV UTF-8".
  const bool bom = text.compare(0, 3, kUtf8Bom) == 0;
  auto rows = read_csv(bom ? std::string_view(text).substr(3) : std::string_view(text), problems);
  if (rows.empty()) {
    problems.push_back("no header row (expected at least `slide_id,path`)");
    return manifest;
  }
  std::map<std::string, size_t> column;
  const auto& header = rows[0].fields;
  const int line = rows[0].line;
  for (size_t i = 0; i < header.size(); ++i) {
    std::string name = trim(header[i]);
    if (name.empty()) {
      problems.push_back(fmt::format("line {}: column {} has no name", line, i + 1));
    }
    if (!column.emplace(name, i).second) {
      problems.push_back(fmt::format("line {}: duplicate column '{}'", line, printable(name)));
    }
    if (name != "slide_id" && name != "path" && name != "patient_id" && name != "mask_path" &&
        name != "mpp" && !name.empty()) {
      // Metadata columns become HDF5 dataset names in the outputs.
      if (!is_safe_slide_id(name)) {
        problems.push_back(fmt::format(
            "line {}: column name '{}' is not allowed (only A-Z a-z 0-9 . _ -, no leading dot)",
            line, printable(name)));
      } else if (is_builtin_column(name)) {
        problems.push_back(fmt::format(
            "line {}: column name '{}' is reserved: query reports and filters on a built-in "
            "column of that name (reserved, in any case: {}); rename the column",
            line, name, builtin_column_list()));
      }
      manifest.metadata_columns.push_back(name);
    }
  }
  for (const char* required : {"slide_id", "path"}) {
    if (!column.count(required)) {
      problems.push_back(fmt::format("line {}: required column '{}' is missing", line, required));
    }
  }
  if (!problems.empty()) return manifest;

  const fs::path base = absolute_directory_of(manifest_path);
  std::map<std::string, int> first_line_of;
  // Ids that differ only in case name the same files on case-insensitive file systems.
  std::map<std::string, std::pair<std::string, int>> first_of_folded;
  for (size_t r = 1; r < rows.size(); ++r) {
    const CsvRecord& row = rows[r];
    if (row.fields.size() != header.size()) {
      problems.push_back(fmt::format("line {}: {} fields, the header has {}", row.line,
                                     row.fields.size(), header.size()));
      continue;
    }
    auto get = [&](const std::string& name) {
      auto it = column.find(name);
      return it == column.end() ? std::string() : trim(row.fields[it->second]);
    };
    SlideEntry entry;
    entry.index = static_cast<int>(manifest.slides.size());
    entry.slide_id = get("slide_id");
    entry.path_as_written = get("path");
    entry.path = resolve(base, entry.path_as_written);
    entry.patient_id = get("patient_id");
    const std::string mask_as_written = get("mask_path");
    entry.mask_path = resolve(base, mask_as_written);
    for (const auto& name : manifest.metadata_columns) entry.metadata.push_back(get(name));
    const std::string mpp_text = get("mpp");
    if (!mpp_text.empty()) {
      entry.mpp = parse_mpp(mpp_text);
      if (entry.mpp == 0) {
        problems.push_back(fmt::format(
            "line {}: mpp '{}' is not a positive number of micrometres per pixel (leave it empty "
            "to use the slide's metadata)", row.line, printable(mpp_text)));
      }
    }
    if (entry.slide_id.empty()) {
      problems.push_back(fmt::format("line {}: empty slide_id", row.line));
    } else if (!is_safe_slide_id(entry.slide_id)) {
      problems.push_back(fmt::format(
          "line {}: slide_id '{}' is not a safe file name (only A-Z a-z 0-9 . _ -, no leading dot)",
          row.line, printable(entry.slide_id)));
    } else if (entry.slide_id.size() > kMaxSlideIdLength) {
      problems.push_back(fmt::format(
          "line {}: slide_id '{}' is too long: it is {} characters long; at most {} fit in the "
          "file names the stages write after it",
          row.line, entry.slide_id, entry.slide_id.size(), kMaxSlideIdLength));
    } else if (entry.slide_id[0] == '-') {
      problems.push_back(fmt::format(
          "line {}: slide_id '{}' starts with '-' (command-line tools would take it for an option)",
          row.line, entry.slide_id));
    } else if (auto [it, inserted] = first_line_of.emplace(entry.slide_id, row.line); !inserted) {
      problems.push_back(fmt::format("line {}: duplicate slide_id '{}' (first on line {})",
                                     row.line, entry.slide_id, it->second));
    } else if (auto [f, new_folded] = first_of_folded.emplace(ascii_lower(entry.slide_id),
                                                               std::pair(entry.slide_id, row.line));
               !new_folded) {
      problems.push_back(fmt::format(
          "line {}: slide_id '{}' differs only in case from '{}' on line {} (they would collide on "
          "case-insensitive file systems)",
          row.line, entry.slide_id, f->second.first, f->second.second));
    }
    if (entry.path_as_written.empty()) {
      problems.push_back(fmt::format("line {}: empty path", row.line));
    } else if (has_nul(entry.path_as_written)) {
      problems.push_back(fmt::format("line {}: path '{}' contains a NUL byte", row.line,
                                     printable(entry.path_as_written)));
    }
    if (has_nul(mask_as_written)) {
      problems.push_back(fmt::format("line {}: mask_path '{}' contains a NUL byte", row.line,
                                     printable(mask_as_written)));
    }
    manifest.slides.push_back(std::move(entry));
  }
  if (manifest.slides.empty() && problems.empty()) problems.push_back("no slides listed");
  return manifest;
}

// Appends the problems with the files the manifest names. Paths containing a NUL byte cannot be
// checked (the file system would see a shorter path); they are reported only with
// `report_nul`, since parsing reports them already, with their line.
void check_files_collecting(const Manifest& manifest, bool report_nul,
                            std::vector<std::string>& problems) {
  auto check = [&](const SlideEntry& s, const std::string& what, const std::string& path) {
    const std::string id = printable(s.slide_id);
    const std::string shown = printable(path);
    std::error_code ec;
    if (has_nul(path)) {
      if (report_nul) {
        problems.push_back(
            fmt::format("slide '{}': {} '{}' contains a NUL byte", id, what, shown));
      }
    } else if (!fs::exists(path, ec)) {
      problems.push_back(fmt::format("slide '{}': {} '{}' does not exist", id, what, shown));
    } else if (fs::is_directory(path, ec) && what == std::string("slide file")) {
      // A folder is a DICOM series (common/slide/dicom_slide.h), read when the slide is opened.
      if (::access(path.c_str(), R_OK | X_OK) != 0) {
        problems.push_back(fmt::format("slide '{}': slide folder '{}' is not readable", id, shown));
      }
    } else if (!fs::is_regular_file(path, ec)) {
      problems.push_back(fmt::format("slide '{}': {} '{}' is not a file", id, what, shown));
    } else if (::access(path.c_str(), R_OK) != 0) {
      problems.push_back(fmt::format("slide '{}': {} '{}' is not readable", id, what, shown));
    }
  };
  for (const auto& s : manifest.slides) {
    if (!s.path.empty()) check(s, "slide file", s.path);
    if (!s.mask_path.empty()) check(s, "mask file", s.mask_path);
  }
}

}  // namespace

Manifest parse_manifest(const std::string& text, const std::string& manifest_path) {
  std::vector<std::string> problems;
  Manifest manifest = parse_collecting(text, manifest_path, problems);
  if (!problems.empty()) throw_problems(manifest_path, problems);
  return manifest;
}

std::vector<std::string> check_manifest_files(const Manifest& manifest) {
  std::vector<std::string> problems;
  check_files_collecting(manifest, /*report_nul=*/true, problems);
  return problems;
}

std::string directory_manifest(const std::string& dir, const std::vector<std::string>& extensions) {
  std::error_code ec;
  const fs::path root = fs::absolute(fs::path(dir), ec).lexically_normal();
  if (ec || !fs::is_directory(root, ec)) {
    fail<InvalidInput>("--slides '{}' is not a directory", printable(dir));
  }
  std::vector<std::pair<std::string, std::string>> rows;  // file name, slide id
  fs::directory_iterator it(root, ec);
  if (ec) fail<InvalidInput>("cannot list --slides '{}': {}", printable(dir), ec.message());
  for (const auto& entry : it) {
    std::error_code file_ec;
    if (!entry.is_regular_file(file_ec)) continue;
    const std::string name = entry.path().filename().string();
    const std::string lower = ascii_lower(name);
    for (const auto& ext : extensions) {
      if (lower.size() > ext.size() && lower.compare(lower.size() - ext.size(), ext.size(), ext) == 0) {
        rows.emplace_back(name, name.substr(0, name.size() - ext.size()));
        break;
      }
    }
  }
  if (rows.empty()) {
    std::string list;
    for (const auto& ext : extensions) list += (list.empty() ? "" : ", ") + ext;
    fail<InvalidInput>("--slides '{}' holds no file ending in {}", printable(dir), list);
  }
  std::sort(rows.begin(), rows.end());
  std::string text = csv_record({"slide_id", "path"});
  for (const auto& [name, id] : rows) text += csv_record({id, (root / name).string()});
  return text;
}

Manifest load_manifest(const std::string& path, bool check_files) {
  if (has_nul(path)) {
    fail<InvalidInput>("manifest path '{}' contains a NUL byte", printable(path));
  }
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error& e) {
    fail<InvalidInput>("cannot read manifest: {}", e.what());
  }
  std::vector<std::string> problems;
  Manifest manifest = parse_collecting(text, path, problems);
  if (check_files) check_files_collecting(manifest, /*report_nul=*/false, problems);
  if (!problems.empty()) throw_problems(path, problems);
  return manifest;
}

}  // namespace tessera::patchgen
