#include "common/search/filter.h"

#include <utility>

#include "common/core/error.h"
#include "common/search/filter_eval.h"
#include "common/search/filter_parser.h"
#include "common/search/filter_program.h"

namespace tessera::search {

const char* column_type_name(ColumnType type) {
  switch (type) {
    case ColumnType::kInt:
      return "int";
    case ColumnType::kFloat:
      return "float";
    case ColumnType::kString:
      return "string";
  }
  return "?";
}

Filter Filter::parse(const std::string& text, const std::vector<ColumnSchema>& columns) {
  return Filter(parse_program(text, columns));
}

const std::string& Filter::text() const { return program_->text; }

std::vector<std::string> Filter::columns_used() const {
  std::vector<std::string> names;
  for (const ColumnSchema& c : program_->columns) names.push_back(c.name);
  return names;
}

std::vector<uint8_t> Filter::evaluate(const std::vector<ColumnView>& columns, int64_t rows) const {
  const Program& p = *program_;
  TESSERA_CHECK(rows >= 0, "filter \"{}\": negative row count {}", p.text, rows);
  std::vector<const ColumnView*> views;
  for (const ColumnSchema& used : p.columns) {
    const ColumnView* view = nullptr;
    for (const ColumnView& c : columns) {
      if (c.name == used.name) view = &c;
    }
    if (view == nullptr) {
      fail<InvalidInput>("filter \"{}\": column '{}' is not available", p.text, used.name);
    }
    if (view->type != used.type) {
      fail<InvalidInput>("filter \"{}\": column '{}' is {}, but the filter was parsed for {}",
                         p.text, used.name, column_type_name(view->type),
                         column_type_name(used.type));
    }
    const bool has_array = (view->type == ColumnType::kInt && view->ints) ||
                           (view->type == ColumnType::kFloat && view->floats) ||
                           (view->type == ColumnType::kString && view->strings);
    if (!has_array && (rows > 0 || view->values > 0)) {
      fail<InvalidInput>("filter \"{}\": column '{}' has no {} values", p.text, used.name,
                         column_type_name(used.type));
    }
    if (view->index == nullptr && view->values < rows) {
      fail<InvalidInput>("filter \"{}\": column '{}' has {} values for {} rows", p.text, used.name,
                         view->values, rows);
    }
    views.push_back(view);
  }
  std::vector<uint8_t> out(static_cast<size_t>(rows));
  evaluate_program(p, std::move(views), rows, out.data());
  return out;
}

}  // namespace tessera::search
