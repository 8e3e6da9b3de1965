// ingest_bench's synthetic vectors: unit-length rows of a seeded mixture of Gaussians, each row a
// pure function of (seed, patch id), so that a run can be regenerated and IVF recall means
// something.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::ingest_bench {

// Standard normal draws from a splitmix64 stream (Box-Muller, both values used).
class Normals {
 public:
  explicit Normals(uint64_t state) : state_(state) {}
  float next();

 private:
  uint64_t state_;
  float spare_ = 0;
  bool have_ = false;
};

// `clusters` unit-length centres in `dim` dimensions; a row is its cluster's centre plus noise of
// norm ~`spread`, normalised.
class Mixture {
 public:
  Mixture(uint64_t seed, int clusters, int dim, double spread);
  int cluster_of(int64_t patch_id) const;
  // Writes the unit-length row of `patch_id` to out[0, dim), perturbed by `extra` more noise
  // (queries) drawn from stream `stream`.
  void row(int64_t patch_id, float* out, double extra = 0, uint64_t stream = 0) const;
  int dim() const { return dim_; }

 private:
  uint64_t seed_;
  int clusters_;
  int dim_;
  float spread_;
  std::vector<float> centres_;
};

}  // namespace tessera::ingest_bench
