// How a stage splits a global list of items 0..total-1 over the ranks of a job: the one place
// where "which items are mine" is computed. Pure value type; every function is O(1) unless noted,
// so a rank derives its own share from a count, never from the list itself.
//
// Kinds:
//   cyclic            item i belongs to rank i mod R (block-cyclic with block 1)
//   block-cyclic:B    item i belongs to rank (i / B) mod R
//   contiguous        rank r holds one run of consecutive items; the first total mod R ranks
//                     hold one item more than the others
// Within a rank, items keep their global order: local index k of rank r is its k-th item.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

enum class PartitionKind { kBlockCyclic, kContiguous };

// A run of consecutive global items [first, first + count) owned by one rank, which holds them
// at local indices [local, local + count).
struct ItemRun {
  int64_t first = 0;
  int64_t count = 0;
  int64_t local = 0;
};

class Partition {
 public:
  // A partition spec as given on the command line: "cyclic", "block-cyclic:B" (B >= 1) or
  // "contiguous". Throws InvalidInput naming `option` otherwise.
  struct Spec {
    PartitionKind kind = PartitionKind::kBlockCyclic;
    int64_t block = 1;
    static Spec parse(const std::string& text, const std::string& option);
    // The canonical spelling: "cyclic", "block-cyclic:B" (B > 1) or "contiguous".
    std::string to_string() const;
    bool operator==(const Spec& o) const { return kind == o.kind && block == o.block; }
  };

  // Requires total >= 0 and size >= 1; throws InvalidInput otherwise.
  Partition(Spec spec, int64_t total, int size);
  static Partition cyclic(int64_t total, int size) { return {{}, total, size}; }

  const Spec& spec() const { return spec_; }
  int64_t total() const { return total_; }
  int size() const { return size_; }

  // The rank owning item i (0 <= i < total).
  int owner(int64_t i) const;
  // Number of items owned by `rank`.
  int64_t count(int rank) const { return count_below(rank, total_); }
  // Number of items < n owned by `rank` (0 <= n <= total): the local index of the rank's first
  // item at or after n.
  int64_t count_below(int rank, int64_t n) const;
  // Position of item i among its owner's items.
  int64_t local_index(int64_t i) const;
  // The global index of local item k of `rank` (0 <= k < count(rank)).
  int64_t global_index(int rank, int64_t k) const;
  // The runs of consecutive items `rank` owns within [begin, end), ascending. O(number of runs).
  std::vector<ItemRun> runs(int rank, int64_t begin, int64_t end) const;
  std::vector<ItemRun> runs(int rank) const { return runs(rank, 0, total_); }

 private:
  int64_t contiguous_start(int rank) const;
  Spec spec_;
  int64_t total_ = 0;
  int size_ = 1;
};

}  // namespace tessera
