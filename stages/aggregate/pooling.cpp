#include "stages/aggregate/pooling.h"

#include <algorithm>
#include <limits>

#include "common/core/error.h"

namespace tessera::aggregate {

int pooled_dim(const std::string& pooling, int dim) {
  if (pooling == "mean" || pooling == "max") return dim;
  if (pooling == "mean+max") return 2 * dim;
  fail<InvalidInput>("unknown pooling '{}' (mean, max, mean+max)", pooling);
}

Pooler::Pooler(std::string pooling, int dim)
    : pooling_(std::move(pooling)),
      dim_(dim),
      sum_(static_cast<size_t>(dim), 0.0),
      max_(static_cast<size_t>(dim), -std::numeric_limits<float>::infinity()) {
  pooled_dim(pooling_, dim);
}

void Pooler::add(const float* rows, int64_t n) {
  for (int64_t r = 0; r < n; ++r) {
    const float* row = rows + r * dim_;
    for (int d = 0; d < dim_; ++d) {
      sum_[d] += row[d];
      max_[d] = std::max(max_[d], row[d]);
    }
  }
  rows_ += n;
}

std::vector<float> Pooler::result() const {
  if (rows_ == 0) fail<Error>("pooling of no rows (a slide without patches is skipped earlier)");
  std::vector<float> out;
  out.reserve(static_cast<size_t>(pooled_dim(pooling_, dim_)));
  if (pooling_ != "max") {
    for (const double s : sum_) out.push_back(static_cast<float>(s / static_cast<double>(rows_)));
  }
  if (pooling_ != "mean") out.insert(out.end(), max_.begin(), max_.end());
  return out;
}

}  // namespace tessera::aggregate
