#include "common/stage/partition.h"

#include <algorithm>

#include "common/core/error.h"

namespace tessera {

Partition::Spec Partition::Spec::parse(const std::string& text, const std::string& option) {
  Spec spec;
  if (text == "cyclic") return spec;
  if (text == "contiguous") {
    spec.kind = PartitionKind::kContiguous;
    return spec;
  }
  const std::string prefix = "block-cyclic:";
  if (text.rfind(prefix, 0) == 0) {
    const std::string number = text.substr(prefix.size());
    size_t used = 0;
    long long block = 0;
    try {
      block = std::stoll(number, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == number.size() && !number.empty() && block >= 1) {
      spec.block = block;
      return spec;
    }
  }
  fail<InvalidInput>("--{}: '{}' is not a partition (cyclic, block-cyclic:B with B >= 1, "
                     "contiguous)",
                     option, text);
}

std::string Partition::Spec::to_string() const {
  if (kind == PartitionKind::kContiguous) return "contiguous";
  return block == 1 ? "cyclic" : "block-cyclic:" + std::to_string(block);
}

Partition::Partition(Spec spec, int64_t total, int size) : spec_(spec), total_(total), size_(size) {
  TESSERA_CHECK(total >= 0 && size >= 1 && spec.block >= 1,
                "partition: invalid total {}, size {} or block {}", total, size, spec.block);
}

int64_t Partition::contiguous_start(int rank) const {
  const int64_t q = total_ / size_;
  const int64_t rem = total_ % size_;
  return rank * q + std::min<int64_t>(rank, rem);
}

int Partition::owner(int64_t i) const {
  if (spec_.kind == PartitionKind::kBlockCyclic) {
    return static_cast<int>((i / spec_.block) % size_);
  }
  const int64_t q = total_ / size_;
  const int64_t rem = total_ % size_;
  const int64_t big = rem * (q + 1);  // items held by the ranks that hold one more
  if (i < big) return static_cast<int>(i / (q + 1));
  return static_cast<int>(rem + (i - big) / q);
}

int64_t Partition::count_below(int rank, int64_t n) const {
  if (spec_.kind == PartitionKind::kBlockCyclic) {
    const int64_t b = spec_.block;
    const int64_t round = b * size_;
    return (n / round) * b + std::clamp<int64_t>(n % round - rank * b, 0, b);
  }
  const int64_t start = contiguous_start(rank);
  const int64_t stop = contiguous_start(rank + 1);
  return std::clamp<int64_t>(n, start, stop) - start;
}

int64_t Partition::local_index(int64_t i) const {
  if (spec_.kind == PartitionKind::kBlockCyclic) {
    const int64_t b = spec_.block;
    return (i / (b * size_)) * b + i % b;
  }
  return i - contiguous_start(owner(i));
}

int64_t Partition::global_index(int rank, int64_t k) const {
  if (spec_.kind == PartitionKind::kBlockCyclic) {
    const int64_t b = spec_.block;
    return (k / b) * b * size_ + rank * b + k % b;
  }
  return contiguous_start(rank) + k;
}

std::vector<ItemRun> Partition::runs(int rank, int64_t begin, int64_t end) const {
  std::vector<ItemRun> out;
  begin = std::clamp<int64_t>(begin, 0, total_);
  end = std::clamp<int64_t>(end, begin, total_);
  int64_t k = count_below(rank, begin);
  const int64_t k_end = count_below(rank, end);
  while (k < k_end) {
    const int64_t first = global_index(rank, k);
    int64_t len = k_end - k;
    if (spec_.kind == PartitionKind::kBlockCyclic) {
      len = std::min(len, spec_.block - k % spec_.block);
    }
    out.push_back({first, len, k});
    k += len;
  }
  return out;
}

}  // namespace tessera
