// CSV as tessera reads and writes it: one rule, RFC 4180 style, for every table a stage reads
// (the slide manifest) or writes (slides.csv, skipped.csv, query's --format csv, directory
// manifests, the benchmarks' manifests).
//   - Records end at LF; a CR outside quotes is dropped (CRLF files read as LF files).
//   - Fields are separated by commas. A field is quoted with '"' when it holds a comma, a quote,
//     a CR or LF, or blanks (space, tab) at either end; inside quotes a quote is written twice.
//   - The reader keeps a field's blanks as written (callers that want them gone trim); the writer
//     quotes fields with blanks at either end so that a reader that trims keeps them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// One record of a CSV text: its fields and the 1-based line it starts on.
struct CsvRecord {
  int line = 0;
  std::vector<std::string> fields;
};

// Splits `text` into records. A quoted field may span lines; a quote inside an unquoted field
// opens quoting there ('ab"c,d"' is one field, `abc,d`), and text after a closing quote joins the
// field. Lines holding only spaces and tabs outside quotes are skipped (they are blank, not a
// record of one empty field). When the text ends inside quotes, appends "line N: unterminated
// quoted field" to `problems` (N: the line of the record) and returns the field as read so far.
// Pure; no encoding check (the caller checks UTF-8).
std::vector<CsvRecord> read_csv(std::string_view text, std::vector<std::string>& problems);

// One field as the writer spells it (quoted only when needed, by the rule above).
std::string csv_field(std::string_view field);

// A whole record: the fields through csv_field, joined by commas, ending in "\n".
std::string csv_record(const std::vector<std::string>& fields);

}  // namespace tessera
