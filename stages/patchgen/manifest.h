// The slide manifest: a CSV file with a header row. Required columns `slide_id,path`; optional
// `patient_id`, `mask_path` and `mpp` (level-0 micrometres per pixel overriding the slide's
// metadata; empty = use the metadata); every other column is kept as string metadata and carried to the
// outputs in manifest order. Quoting follows RFC 4180 (double quotes, "" inside quotes).
// Relative paths resolve against the manifest's folder, made absolute, so what is recorded
// downstream does not depend on the working directory.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/core/fs.h"

namespace tessera::patchgen {

// The longest slide id accepted. The stages name files after the slide id, and the longest name
// they write is an atomic write's temporary of the QC outline, `<id>.geojson.tmp.<host>.<pid>`:
// 8 + 5 + a host name (at most 64 bytes) + 1 + a pid (at most 10 digits) = 88 bytes beside the
// id, within NAME_MAX (255). 160 leaves a margin for suffixes still to come.
inline constexpr size_t kMaxSlideIdLength = kMaxNameLength;

struct SlideEntry {
  int index = 0;             // position in the manifest (0-based), the slide's stable number
  std::string slide_id;
  std::string path;             // absolute, lexically normalised (symlinks not resolved)
  std::string path_as_written;  // the `path` field as in the CSV (trimmed)
  std::string patient_id;       // "" when absent
  std::string mask_path;        // absolute, lexically normalised; "" when absent
  double mpp = 0;               // the `mpp` column: level-0 um/px overriding the slide's; 0 = none
  std::vector<std::string> metadata;  // values of Manifest::metadata_columns, same order
};

struct Manifest {
  std::string path;  // as given to parse_manifest / load_manifest
  std::vector<std::string> metadata_columns;
  std::vector<SlideEntry> slides;
};


// Parses manifest text (no file access besides the working directory, when `manifest_path` is
// relative). `manifest_path` names the file in messages; its directory, made absolute, anchors
// relative slide and mask paths. A leading UTF-8 byte-order mark is ignored, and so are lines
// holding only spaces, tabs and \r. Throws InvalidInput listing every problem at once (text
// that is not valid UTF-8, by line and column, and then nothing else; missing columns, metadata
// columns named like a built-in column of query's output (common/store/columns.h), rows with the
// wrong number of fields; empty, unsafe or duplicate ids, ids that differ only in case, ids
// starting with '-', ids longer than kMaxSlideIdLength; empty paths, paths containing a NUL byte; `mpp` values that
// are not positive finite numbers), one per line
// with the CSV line number. Control characters in messages are shown escaped (\x00).
// Throws IoError when the working directory cannot be determined.
Manifest parse_manifest(const std::string& text, const std::string& manifest_path);

// Lists problems with the files a parsed manifest names (missing or unreadable slide and mask
// files, paths containing a NUL byte), one message per problem, empty when all are readable.
std::vector<std::string> check_manifest_files(const Manifest& manifest);

// Reads, parses and (with check_files) checks a manifest; throws InvalidInput listing every
// problem. The error's first line names the manifest file.
Manifest load_manifest(const std::string& path, bool check_files);

// The manifest text of a slide directory (--slides): one row per regular file (or symlink to one)
// directly in `dir` whose name ends, ignoring case, in one of `extensions` (lowercase), sorted by
// file name; slide_id is the name without that ending, path the absolute, lexically normalised
// file path. Returns the CSV text (header `slide_id,path`, fields quoted when needed), which
// parse_manifest then validates (unsafe or colliding ids are reported there). Throws InvalidInput
// when `dir` is not a readable directory or holds no matching file.
std::string directory_manifest(const std::string& dir, const std::vector<std::string>& extensions);

}  // namespace tessera::patchgen
