#include "common/core/csv.h"

#include <fmt/format.h>

namespace tessera {

std::vector<CsvRecord> read_csv(std::string_view text, std::vector<std::string>& problems) {
  std::vector<CsvRecord> records;
  CsvRecord record;
  record.line = 1;
  std::string field;
  bool in_quotes = false;
  bool has_content = false;  // anything but blanks outside quotes
  int line = 1;
  auto end_field = [&] {
    record.fields.push_back(field);
    field.clear();
  };
  auto end_record = [&] {
    end_field();
    if (has_content || record.fields.size() > 1) records.push_back(std::move(record));
    record = CsvRecord{};
    has_content = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
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
      has_content = true;
    } else if (c == ',') {
      end_field();
      has_content = true;
    } else if (c == '\r') {
      continue;
    } else if (c == '\n') {
      end_record();
      record.line = ++line;
    } else {
      field += c;
      if (c != ' ' && c != '\t') has_content = true;
    }
  }
  if (in_quotes) problems.push_back(fmt::format("line {}: unterminated quoted field", record.line));
  end_record();
  return records;
}

std::string csv_field(std::string_view field) {
  constexpr std::string_view kBlanks = " \t";
  const bool plain = field.find_first_of(",\"\r\n") == std::string_view::npos &&
                     (field.empty() || (kBlanks.find(field.front()) == std::string_view::npos &&
                                        kBlanks.find(field.back()) == std::string_view::npos));
  if (plain) return std::string(field);
  std::string out = "\"";
  for (const char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string csv_record(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += ',';
    out += csv_field(fields[i]);
  }
  return out + "\n";
}

}  // namespace tessera
