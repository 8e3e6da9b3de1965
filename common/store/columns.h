// The column names query gives its rows besides the manifest's metadata columns: the fields of a
// hit in its table, CSV and JSON output, and the columns --filter reads (a shard's rows and its
// slide table). One list, so that patchgen refuses metadata columns that would shadow them (a
// filter on the wrong column, duplicate headers); query's tests check that every built-in column
// it uses is here.
#pragma once

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

namespace tessera {

inline constexpr std::array<std::string_view, 15> kBuiltinColumns = {
    "query",   "rank",  "score",     "patch_id",   "slide_id",  "patient_id", "x",    "y",
    "tissue",  "shard", "level",     "mpp",        "slide_mpp", "patch_size", "read_size"};

// Whether `name` is a built-in column, ignoring ASCII case (a CSV reader may fold case).
inline bool is_builtin_column(std::string_view name) {
  return std::any_of(kBuiltinColumns.begin(), kBuiltinColumns.end(), [&](std::string_view b) {
    return b.size() == name.size() &&
           std::equal(b.begin(), b.end(), name.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) ==
                    std::tolower(static_cast<unsigned char>(y));
           });
  });
}

}  // namespace tessera
