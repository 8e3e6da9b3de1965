// The slide manifest: a CSV file with a header row. Required columns `slide_id,path`; optional
// `patient_id` and `mask_path`; every other column is kept as string metadata and carried to the
// outputs in manifest order. Quoting follows RFC 4180 (double quotes, "" inside quotes).
// Relative paths resolve against the manifest's folder.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/core/fs.h"

namespace tessera::patchgen {

struct SlideEntry {
  int index = 0;             // position in the manifest (0-based), the slide's stable number
  std::string slide_id;
  std::string path;          // resolved
  std::string patient_id;    // "" when absent
  std::string mask_path;     // resolved, "" when absent
  std::vector<std::string> metadata;  // values of Manifest::metadata_columns, same order
};

struct Manifest {
  std::string path;
  std::vector<std::string> metadata_columns;
  std::vector<SlideEntry> slides;
};


// Parses manifest text (no file access). `manifest_path` names the file in messages and anchors
// relative paths. Throws InvalidInput listing every problem at once (missing columns, rows with
// the wrong number of fields, empty, duplicate or unsafe ids, empty paths), one per line with the
// CSV line number.
Manifest parse_manifest(const std::string& text, const std::string& manifest_path);

// Lists problems with the files a parsed manifest names (missing or unreadable slide and mask
// files), one message per problem, empty when all are readable.
std::vector<std::string> check_manifest_files(const Manifest& manifest);

// Reads, parses and (with check_files) checks a manifest; throws InvalidInput listing every
// problem. The error's first line names the manifest file.
Manifest load_manifest(const std::string& path, bool check_files);

}  // namespace tessera::patchgen
