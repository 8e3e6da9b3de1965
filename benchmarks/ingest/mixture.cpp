#include "benchmarks/ingest/mixture.h"

#include <cmath>

#include "benchmarks/synthetic_run.h"
#include "common/vector/vector_index.h"

namespace tessera::ingest_bench {

namespace {

constexpr double kPi = 3.14159265358979323846;

using bench::splitmix64;

}  // namespace

float Normals::next() {
  if (have_) {
    have_ = false;
    return spare_;
  }
  const double u1 = (static_cast<double>(splitmix64(state_++) >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = (static_cast<double>(splitmix64(state_++) >> 11) + 0.5) * 0x1.0p-53;
  const double r = std::sqrt(-2 * std::log(u1));
  spare_ = static_cast<float>(r * std::sin(2 * kPi * u2));
  have_ = true;
  return static_cast<float>(r * std::cos(2 * kPi * u2));
}

Mixture::Mixture(uint64_t seed, int clusters, int dim, double spread)
    : seed_(seed), clusters_(clusters), dim_(dim), spread_(static_cast<float>(spread)),
      centres_(static_cast<size_t>(clusters) * dim) {
  for (int c = 0; c < clusters; ++c) {
    Normals n(splitmix64(seed ^ 0xc0ffee) + static_cast<uint64_t>(c) * 0x100000000ULL);
    for (int j = 0; j < dim; ++j) centres_[static_cast<size_t>(c) * dim + j] = n.next();
  }
  l2_normalize(centres_.data(), clusters, dim);
}

int Mixture::cluster_of(int64_t patch_id) const {
  return static_cast<int>(splitmix64(seed_ ^ splitmix64(static_cast<uint64_t>(patch_id))) %
                          clusters_);
}

void Mixture::row(int64_t patch_id, float* out, double extra, uint64_t stream) const {
  const float* c = centres_.data() + static_cast<size_t>(cluster_of(patch_id)) * dim_;
  Normals n(splitmix64(seed_ + 7 * static_cast<uint64_t>(patch_id)));
  const float scale = spread_ / std::sqrt(static_cast<float>(dim_));
  for (int j = 0; j < dim_; ++j) out[j] = c[j] + scale * n.next();
  l2_normalize(out, 1, dim_);
  if (extra > 0) {
    Normals q(splitmix64(seed_ ^ 0xfeed ^ splitmix64(stream)));
    const float s = static_cast<float>(extra) / std::sqrt(static_cast<float>(dim_));
    for (int j = 0; j < dim_; ++j) out[j] += s * q.next();
    l2_normalize(out, 1, dim_);
  }
}

}  // namespace tessera::ingest_bench
