// A FAISS vector index behind a small, FAISS-free interface: create from a factory string, train,
// add vectors under the caller's 64-bit ids, search (optionally restricted to allowed ids), write
// and read back. FAISS headers are confined to vector_index.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace tessera {

enum class Metric { kInnerProduct, kL2 };

// "ip" -> kInnerProduct, "l2" -> kL2. Throws InvalidInput listing the choices for anything else.
Metric parse_metric(const std::string& text);
// The inverse of parse_metric: "ip" or "l2".
std::string metric_name(Metric metric);

// Restricts a search to the ids for which allows(id) is true; ids are the caller's ids. Called
// concurrently from FAISS's search threads: implementations must be thread-safe.
class IdFilter {
 public:
  virtual ~IdFilter() = default;
  virtual bool allows(int64_t id) const = 0;
};

struct SearchOptions {
  int k = 10;                        // results per query, >= 1
  int nprobe = 0;                    // IVF: inverted lists probed; 0 = default_nprobe()
  int ef_search = 0;                 // HNSW: search breadth; 0 = the index's efSearch. FAISS
                                     // 1.7.3 ignores it in search parameters, so it is applied
                                     // by asking the graph for max(k + 1, ef_search) results.
  const IdFilter* filter = nullptr;  // null: every id is allowed
};

// Move-only owner of one FAISS index. Const methods may be called concurrently from several
// threads (searches never modify index state); non-const methods need exclusive access.
class VectorIndex {
 public:
  // An index for vectors of `dim` floats from a FAISS index_factory string ("Flat", "IVF64,Flat",
  // "IVF64,PQ8", "HNSW32", "PQ16", ...). Ids are always the caller's 64-bit ids given to add():
  // IVF indexes store them; every other kind (Flat, HNSW, PQ, SQ, ...) is wrapped in an
  // IndexIDMap. Throws InvalidInput naming the spec when dim < 1 or FAISS refuses the spec
  // (unknown kind, PQ m not dividing dim, a metric the kind does not support, ...).
  static VectorIndex create(const std::string& factory, int dim, Metric metric);

  // Reads an index written by write(). With mmap, the inverted lists of IVF indexes are mapped
  // read-only from the file instead of loaded (FAISS 1.7.3 IO_FLAG_MMAP); such an index cannot be
  // trained or added to (use empty_copy()), and the file must stay in place while it is used.
  // FAISS 1.7.3 maps nothing else: Flat, HNSW, PQ, SQ and the ids of IndexIDMap are always read
  // into memory, so mmap is ignored for them. Throws IoError naming the path when the file is
  // missing, unreadable or not a FAISS index.
  static VectorIndex read(const std::string& path, bool mmap);

  VectorIndex(VectorIndex&&) noexcept;
  VectorIndex& operator=(VectorIndex&&) noexcept;
  VectorIndex(const VectorIndex&) = delete;
  VectorIndex& operator=(const VectorIndex&) = delete;
  ~VectorIndex();

  // Writes the index to `path` (through a temporary file renamed into place). Throws IoError
  // naming the path.
  void write(const std::string& path) const;

  // A new index with the same kind, metric and training state (IVF quantizer, PQ/SQ codebooks)
  // and no vectors: shards trained once and filled separately share one quantizer. For an IVF
  // index read with mmap, the file it was read from must still exist.
  VectorIndex empty_copy() const;

  bool is_trained() const;
  // The fewest training vectors train() accepts (IVF: nlist; PQ: 2^nbits centroids per
  // sub-quantizer); 0 when the index is trained already. Lets a caller refuse a spec before it
  // writes anything.
  int64_t training_rows_needed() const;
  // Trains on n vectors (row-major n x dim). Throws InvalidInput when n is fewer than the index
  // needs (IVF: nlist; PQ: 2^nbits centroids per sub-quantizer), saying how many it needs.
  void train(const float* x, int64_t n);
  // Adds n vectors (row-major n x dim) under ids[0..n). Throws InvalidInput when the index is not
  // trained or was read with mmap (IVF).
  void add(const float* x, const int64_t* ids, int64_t n);

  int64_t size() const;
  int dim() const;
  Metric metric() const;
  bool higher_is_better() const;  // true for inner product (scores are similarities)
  // "flat", "ivf", "hnsw" or "other", of the index under any IndexIDMap wrapper.
  std::string kind() const;
  int nlist() const;  // IVF: number of inverted lists; 0 otherwise
  // Whether search() scores with the vectors as added (Flat, IVF-Flat, HNSW over Flat storage,
  // a Flat refinement), under any IndexIDMap; false for compressed storage (PQ, SQ, IVF-PQ,
  // HNSW-PQ, ...) and for transforms (PCA, OPQ), whose scores are approximate.
  bool exact_scores() const;
  // The nprobe used when SearchOptions::nprobe == 0: for IVF
  // min(nlist, max(16, 2 * ceil(sqrt(nlist)))) (all lists up to nlist 16; 64 of 1024; 128 of
  // 4096), enough for recall@10 >= 0.95 of IVF-Flat on clustered data; 0 for other kinds.
  int default_nprobe() const;

  // Searches nq queries (row-major nq x dim) and writes nq*k scores and ids, each query's results
  // best first (highest inner product / smallest squared L2), ties broken by ascending id. Slots
  // without a result get id -1 and score -inf (IP) / +inf (L2).
  // With options.filter only allowed ids are returned. The filter is applied inside the search,
  // so k results come back whenever k allowed vectors are reachable: Flat always (exact); IVF
  // within the probed lists; HNSW by widening the search (up to 16 x max(ef, k + 1)) and, for a
  // query still short of k, an exact search of the HNSW storage. Other kinds (PQ, SQ, ...) search
  // without the filter with a growing k and keep the allowed results, until k or the whole index.
  // A tie at rank k is likewise resolved by fetching more, so equal scores always come back in
  // ascending id order.
  // Throws InvalidInput when k < 1, nprobe < 0 or ef_search < 0. Thread-safe on a const index.
  void search(const float* queries, int64_t nq, const SearchOptions& options, float* scores,
              int64_t* ids) const;

 private:
  struct Impl;
  explicit VectorIndex(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Scales each of the n rows of `dim` floats to unit L2 norm; zero rows stay zero.
void l2_normalize(float* x, int64_t n, int dim);

// Sets the number of OpenMP threads FAISS uses (omp_set_num_threads); values < 1 mean 1.
void set_vector_threads(int threads);

}  // namespace tessera
