// The built-in slide poolings: a slide's (or a patient's) patch features reduced to one vector.
// Pure and deterministic: sums run in double in the order rows are added, so the result does not
// depend on which rank computes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::aggregate {

// The dimension of `pooling` ("mean", "max": dim; "mean+max": 2 * dim). Throws InvalidInput for
// another name.
int pooled_dim(const std::string& pooling, int dim);

class Pooler {
 public:
  Pooler(std::string pooling, int dim);
  // Adds n rows of dim floats (row-major).
  void add(const float* rows, int64_t n);
  int64_t rows() const { return rows_; }
  // The pooled vector: mean (as float of the double sum / rows), max, or mean then max. Throws
  // Error when no row was added (an empty slide is skipped before it gets here).
  std::vector<float> result() const;

 private:
  std::string pooling_;
  int dim_;
  int64_t rows_ = 0;
  std::vector<double> sum_;
  std::vector<float> max_;
};

}  // namespace tessera::aggregate
