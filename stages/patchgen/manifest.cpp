#include "stages/patchgen/manifest.h"

#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>

#include "common/core/error.h"
#include "common/core/fs.h"

namespace tessera::patchgen {

namespace {

namespace fs = std::filesystem;

struct CsvRow {
  int line = 0;
  std::vector<std::string> fields;
};

// RFC 4180 records; a quoted field may span lines. Blank lines are skipped.
std::vector<CsvRow> parse_csv(const std::string& text, std::vector<std::string>& problems) {
  std::vector<CsvRow> rows;
  CsvRow row;
  std::string field;
  bool in_quotes = false;
  bool row_has_content = false;
  int line = 1;
  row.line = 1;
  auto end_field = [&] {
    row.fields.push_back(field);
    field.clear();
  };
  auto end_row = [&] {
    end_field();
    if (row_has_content || row.fields.size() > 1) rows.push_back(row);
    row = CsvRow{};
    row_has_content = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_quotes) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        in_quotes = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"') {
      in_quotes = true;
      row_has_content = true;
    } else if (c == ',') {
      end_field();
      row_has_content = true;
    } else if (c == '\r') {
      continue;
    } else if (c == '\n') {
      end_row();
      row.line = ++line;
    } else {
      field += c;
      row_has_content = true;
    }
  }
  if (in_quotes) problems.push_back(fmt::format("line {}: unterminated quoted field", row.line));
  end_row();
  return rows;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string resolve(const fs::path& base, const std::string& p) {
  if (p.empty()) return p;
  fs::path path(p);
  return path.is_absolute() ? path.string() : (base / path).lexically_normal().string();
}

[[noreturn]] void throw_problems(const std::string& manifest_path,
                                 const std::vector<std::string>& problems) {
  std::string message = fmt::format("manifest '{}' has {} problem{}:", manifest_path,
                                    problems.size(), problems.size() == 1 ? "" : "s");
  for (const auto& p : problems) message += "\n  " + p;
  throw InvalidInput(message);
}

}  // namespace

namespace {

// Parses what it can, appending every problem found to `problems`.
Manifest parse_collecting(const std::string& text, const std::string& manifest_path,
                          std::vector<std::string>& problems) {
  auto rows = parse_csv(text, problems);
  Manifest manifest;
  manifest.path = manifest_path;
  if (rows.empty()) {
    problems.push_back("no header row (expected at least `slide_id,path`)");
    return manifest;
  }
  std::map<std::string, size_t> column;
  const auto& header = rows[0].fields;
  for (size_t i = 0; i < header.size(); ++i) {
    std::string name = trim(header[i]);
    if (name.empty()) problems.push_back(fmt::format("line 1: column {} has no name", i + 1));
    if (!column.emplace(name, i).second) {
      problems.push_back(fmt::format("line 1: duplicate column '{}'", name));
    }
    if (name != "slide_id" && name != "path" && name != "patient_id" && name != "mask_path" &&
        !name.empty()) {
      // Metadata columns become HDF5 dataset names in the outputs.
      if (!is_safe_slide_id(name)) {
        problems.push_back(fmt::format(
            "line 1: column name '{}' is not allowed (only A-Z a-z 0-9 . _ -, no leading dot)", name));
      }
      manifest.metadata_columns.push_back(name);
    }
  }
  for (const char* required : {"slide_id", "path"}) {
    if (!column.count(required)) {
      problems.push_back(fmt::format("line 1: required column '{}' is missing", required));
    }
  }
  if (!problems.empty()) return manifest;

  const fs::path base = fs::path(manifest_path).parent_path();
  std::map<std::string, int> first_line_of;
  for (size_t r = 1; r < rows.size(); ++r) {
    const CsvRow& row = rows[r];
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
    entry.path = resolve(base, get("path"));
    entry.patient_id = get("patient_id");
    entry.mask_path = resolve(base, get("mask_path"));
    for (const auto& name : manifest.metadata_columns) entry.metadata.push_back(get(name));
    if (entry.slide_id.empty()) {
      problems.push_back(fmt::format("line {}: empty slide_id", row.line));
    } else if (!is_safe_slide_id(entry.slide_id)) {
      problems.push_back(fmt::format(
          "line {}: slide_id '{}' is not a safe file name (only A-Z a-z 0-9 . _ -, no leading dot)",
          row.line, entry.slide_id));
    } else if (auto [it, inserted] = first_line_of.emplace(entry.slide_id, row.line); !inserted) {
      problems.push_back(fmt::format("line {}: duplicate slide_id '{}' (first on line {})",
                                     row.line, entry.slide_id, it->second));
    }
    if (entry.path.empty()) problems.push_back(fmt::format("line {}: empty path", row.line));
    manifest.slides.push_back(std::move(entry));
  }
  if (manifest.slides.empty() && problems.empty()) problems.push_back("no slides listed");
  return manifest;
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
  auto check = [&](const SlideEntry& s, const std::string& what, const std::string& path) {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      problems.push_back(fmt::format("slide '{}': {} '{}' does not exist", s.slide_id, what, path));
    } else if (!fs::is_regular_file(path, ec)) {
      problems.push_back(fmt::format("slide '{}': {} '{}' is not a file", s.slide_id, what, path));
    } else if (::access(path.c_str(), R_OK) != 0) {
      problems.push_back(fmt::format("slide '{}': {} '{}' is not readable", s.slide_id, what, path));
    }
  };
  for (const auto& s : manifest.slides) {
    if (!s.path.empty()) check(s, "slide file", s.path);
    if (!s.mask_path.empty()) check(s, "mask file", s.mask_path);
  }
  return problems;
}

Manifest load_manifest(const std::string& path, bool check_files) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error& e) {
    fail<InvalidInput>("cannot read manifest: {}", e.what());
  }
  std::vector<std::string> problems;
  Manifest manifest = parse_collecting(text, path, problems);
  if (check_files) {
    for (auto& p : check_manifest_files(manifest)) problems.push_back(std::move(p));
  }
  if (!problems.empty()) throw_problems(path, problems);
  return manifest;
}

}  // namespace tessera::patchgen
