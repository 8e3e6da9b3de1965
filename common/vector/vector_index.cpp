#include "common/vector/vector_index.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <system_error>
#include <utility>
#include <vector>

#include <faiss/Index.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/IndexPQ.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/IndexRefine.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/impl/io.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>
#include <faiss/invlists/InvertedLists.h>

#include "common/core/error.h"

namespace tessera {

using idx_t = faiss::Index::idx_t;

Metric parse_metric(const std::string& text) {
  if (text == "ip") return Metric::kInnerProduct;
  if (text == "l2") return Metric::kL2;
  fail<InvalidInput>("unknown vector metric '{}': choose 'ip' (inner product) or 'l2'", text);
}

std::string metric_name(Metric metric) { return metric == Metric::kInnerProduct ? "ip" : "l2"; }

namespace {

enum class Kind { kFlat, kIvf, kHnsw, kOther };

Kind kind_of(const faiss::Index* index) {
  if (dynamic_cast<const faiss::IndexFlat*>(index)) return Kind::kFlat;
  if (dynamic_cast<const faiss::IndexIVF*>(index)) return Kind::kIvf;
  if (dynamic_cast<const faiss::IndexHNSW*>(index)) return Kind::kHnsw;
  return Kind::kOther;
}

// Smallest training set FAISS's k-means accepts for the index (one point per centroid).
int64_t training_need(const faiss::Index* index) {
  if (auto* pre = dynamic_cast<const faiss::IndexPreTransform*>(index)) {
    return training_need(pre->index);
  }
  if (auto* hnsw = dynamic_cast<const faiss::IndexHNSW*>(index)) {
    return hnsw->storage ? training_need(hnsw->storage) : 1;
  }
  int64_t need = 1;
  if (auto* ivf = dynamic_cast<const faiss::IndexIVF*>(index)) {
    need = std::max<int64_t>(need, static_cast<int64_t>(ivf->nlist));
  }
  if (auto* ivfpq = dynamic_cast<const faiss::IndexIVFPQ*>(index)) {
    need = std::max<int64_t>(need, static_cast<int64_t>(ivfpq->pq.ksub));
  }
  if (auto* pq = dynamic_cast<const faiss::IndexPQ*>(index)) {
    need = std::max<int64_t>(need, static_cast<int64_t>(pq->pq.ksub));
  }
  return need;
}

// Applies the caller's filter to the caller's ids.
class FilterSelector : public faiss::IDSelector {
 public:
  explicit FilterSelector(const IdFilter& filter) : filter_(filter) {}
  bool is_member(idx_t id) const override { return filter_.allows(id); }

 private:
  const IdFilter& filter_;
};

// Applies the caller's filter to the sequential ids of the index inside an IndexIDMap.
class MappedFilterSelector : public faiss::IDSelector {
 public:
  MappedFilterSelector(const IdFilter& filter, const idx_t* id_map)
      : filter_(filter), id_map_(id_map) {}
  bool is_member(idx_t id) const override { return filter_.allows(id_map_[id]); }

 private:
  const IdFilter& filter_;
  const idx_t* id_map_;
};

}  // namespace

struct VectorIndex::Impl {
  std::unique_ptr<faiss::Index> index;
  faiss::IndexIDMap* id_map = nullptr;  // index itself when it is an IndexIDMap, else null
  std::string source;                   // factory spec or file path, for messages
  std::string mapped_path;              // non-empty: IVF lists are mapped from this file

  faiss::Index* target() const { return id_map ? id_map->index : index.get(); }
  Kind kind() const { return kind_of(target()); }

  static std::unique_ptr<Impl> make(faiss::Index* raw, std::string source) {
    auto impl = std::make_unique<Impl>();
    impl->index.reset(raw);
    impl->id_map = dynamic_cast<faiss::IndexIDMap*>(raw);
    impl->source = std::move(source);
    return impl;
  }

  // One FAISS search of nq queries for kf results each, with labels in the caller's ids. With
  // `exhaustive`, an HNSW index is searched through its vector storage instead of its graph.
  // The filter goes into FAISS as an IDSelector for Flat, IVF and HNSW; returns false when it
  // did not (other kinds) and the caller must drop disallowed results itself.
  bool raw_search(const float* queries, int64_t nq, int64_t kf, int nprobe, int ef,
                  bool exhaustive, const IdFilter* filter, float* distances,
                  idx_t* labels) const;
};

namespace {

bool better(float a, float b, bool higher) { return higher ? a > b : a < b; }

struct Hit {
  float score;
  idx_t id;
};

}  // namespace

VectorIndex::VectorIndex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VectorIndex::VectorIndex(VectorIndex&&) noexcept = default;
VectorIndex& VectorIndex::operator=(VectorIndex&&) noexcept = default;
VectorIndex::~VectorIndex() = default;

VectorIndex VectorIndex::create(const std::string& factory, int dim, Metric metric) {
  if (dim < 1) {
    fail<InvalidInput>("vector index '{}': dimension must be at least 1, got {}", factory, dim);
  }
  const auto faiss_metric =
      metric == Metric::kInnerProduct ? faiss::METRIC_INNER_PRODUCT : faiss::METRIC_L2;
  std::unique_ptr<faiss::Index> raw;
  try {
    raw.reset(faiss::index_factory(dim, factory.c_str(), faiss_metric));
  } catch (const faiss::FaissException& e) {
    fail<InvalidInput>("FAISS refuses vector index spec '{}' (dim {}, metric {}): {}", factory,
                       dim, metric_name(metric), e.what());
  }
  if (!dynamic_cast<faiss::IndexIDMap*>(raw.get()) &&
      !dynamic_cast<faiss::IndexIVF*>(raw.get())) {
    auto wrapper = std::make_unique<faiss::IndexIDMap>(raw.get());
    wrapper->own_fields = true;
    raw.release();
    raw = std::move(wrapper);
  }
  return VectorIndex(Impl::make(raw.release(), factory));
}

VectorIndex VectorIndex::read(const std::string& path, bool mmap) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    fail<IoError>("vector index file '{}' does not exist or is not a regular file", path);
  }
  std::unique_ptr<faiss::Index> raw;
  try {
    raw.reset(faiss::read_index(path.c_str(), mmap ? faiss::IO_FLAG_MMAP : 0));
  } catch (const std::exception& e) {
    fail<IoError>("cannot read vector index '{}': {}", path, e.what());
  }
  auto impl = Impl::make(raw.release(), path);
  if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(impl->target())) {
    if (mmap && !dynamic_cast<faiss::ArrayInvertedLists*>(ivf->invlists)) {
      impl->mapped_path = path;
    }
  }
  return VectorIndex(std::move(impl));
}

void VectorIndex::write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  try {
    if (!impl_->mapped_path.empty()) {
      // A mapped index is unchanged since it was read (add and train are refused): its file is
      // its serialization. Writing through FAISS would produce a file that refers to this one.
      std::filesystem::copy_file(impl_->mapped_path, tmp,
                                 std::filesystem::copy_options::overwrite_existing);
    } else {
      faiss::write_index(impl_->index.get(), tmp.c_str());
    }
    std::filesystem::rename(tmp, path);
  } catch (const std::exception& e) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    fail<IoError>("cannot write vector index '{}': {}", path, e.what());
  }
}

VectorIndex VectorIndex::empty_copy() const {
  std::unique_ptr<faiss::Index> copy;
  try {
    if (!impl_->mapped_path.empty()) {
      // FAISS cannot clone mapped inverted lists: map the file again and give the copy fresh
      // in-memory lists.
      copy.reset(faiss::read_index(impl_->mapped_path.c_str(), faiss::IO_FLAG_MMAP));
      auto* id_map = dynamic_cast<faiss::IndexIDMap*>(copy.get());
      auto* ivf = dynamic_cast<faiss::IndexIVF*>(id_map ? id_map->index : copy.get());
      TESSERA_CHECK(ivf != nullptr, "vector index '{}' changed kind on disk", impl_->mapped_path);
      ivf->replace_invlists(new faiss::ArrayInvertedLists(ivf->nlist, ivf->code_size), true);
    } else {
      // Through FAISS's own serialization, not clone_index: FAISS 1.7.3 clones an IndexHNSWFlat
      // as a bare IndexHNSW, which write_index then refuses ('h != 0').
      faiss::VectorIOWriter writer;
      faiss::write_index(impl_->index.get(), &writer);
      faiss::VectorIOReader reader;
      reader.data = std::move(writer.data);
      copy.reset(faiss::read_index(&reader));
    }
    copy->reset();
  } catch (const faiss::FaissException& e) {
    fail("cannot copy vector index '{}': {}", impl_->source, e.what());
  }
  return VectorIndex(Impl::make(copy.release(), impl_->source));
}

bool VectorIndex::is_trained() const { return impl_->index->is_trained; }

int64_t VectorIndex::training_rows_needed() const {
  return is_trained() ? 0 : training_need(impl_->target());
}

void VectorIndex::train(const float* x, int64_t n) {
  if (!impl_->mapped_path.empty()) {
    fail<InvalidInput>("vector index '{}' was read with mmap and cannot be trained",
                       impl_->source);
  }
  const int64_t need = training_need(impl_->target());
  if (n < need) {
    fail<InvalidInput>("vector index '{}': {} training vectors are too few, it needs at least {}",
                       impl_->source, n, need);
  }
  try {
    impl_->index->train(n, x);
  } catch (const faiss::FaissException& e) {
    fail<InvalidInput>("vector index '{}': training on {} vectors failed: {}", impl_->source, n,
                       e.what());
  }
}

void VectorIndex::add(const float* x, const int64_t* ids, int64_t n) {
  if (!impl_->mapped_path.empty()) {
    fail<InvalidInput>(
        "vector index '{}' was read with mmap and is read-only: add to an empty_copy()",
        impl_->source);
  }
  if (!is_trained()) fail<InvalidInput>("vector index '{}' must be trained before add", impl_->source);
  if (n <= 0) return;
  static_assert(sizeof(int64_t) == sizeof(idx_t), "FAISS ids are 64-bit");
  try {
    impl_->index->add_with_ids(n, x, reinterpret_cast<const idx_t*>(ids));
  } catch (const faiss::FaissException& e) {
    fail("vector index '{}': adding {} vectors failed: {}", impl_->source, n, e.what());
  }
}

int64_t VectorIndex::size() const { return impl_->index->ntotal; }
int VectorIndex::dim() const { return impl_->index->d; }

Metric VectorIndex::metric() const {
  return impl_->index->metric_type == faiss::METRIC_INNER_PRODUCT ? Metric::kInnerProduct
                                                                  : Metric::kL2;
}

bool VectorIndex::higher_is_better() const { return metric() == Metric::kInnerProduct; }

std::string VectorIndex::kind() const {
  switch (impl_->kind()) {
    case Kind::kFlat: return "flat";
    case Kind::kIvf: return "ivf";
    case Kind::kHnsw: return "hnsw";
    case Kind::kOther: break;
  }
  return "other";
}

int VectorIndex::nlist() const {
  auto* ivf = dynamic_cast<const faiss::IndexIVF*>(impl_->target());
  return ivf ? static_cast<int>(ivf->nlist) : 0;
}

bool VectorIndex::exact_scores() const {
  const faiss::Index* index = impl_->target();
  if (auto* hnsw = dynamic_cast<const faiss::IndexHNSW*>(index)) index = hnsw->storage;
  if (auto* refine = dynamic_cast<const faiss::IndexRefine*>(index)) index = refine->refine_index;
  return dynamic_cast<const faiss::IndexFlat*>(index) ||
         dynamic_cast<const faiss::IndexIVFFlat*>(index);
}

int VectorIndex::default_nprobe() const {
  const int lists = nlist();
  if (lists == 0) return 0;
  const int wide = 2 * static_cast<int>(std::ceil(std::sqrt(static_cast<double>(lists))));
  return std::min(lists, std::max(16, wide));
}

bool VectorIndex::Impl::raw_search(const float* queries, int64_t nq, int64_t kf, int nprobe,
                                   int ef, bool exhaustive, const IdFilter* filter,
                                   float* distances, idx_t* labels) const {
  const faiss::Index* target = this->target();
  if (exhaustive) {
    // HNSW's storage holds the same vectors under the same sequential ids as its graph.
    if (auto* hnsw = dynamic_cast<const faiss::IndexHNSW*>(target)) target = hnsw->storage;
  }
  const Kind kind = kind_of(target);
  std::unique_ptr<faiss::IDSelector> selector;
  if (filter && kind != Kind::kOther) {
    if (id_map) {
      selector = std::make_unique<MappedFilterSelector>(*filter, id_map->id_map.data());
    } else {
      selector = std::make_unique<FilterSelector>(*filter);
    }
  }
  faiss::SearchParameters flat_params;
  faiss::SearchParametersIVF ivf_params;
  faiss::SearchParametersHNSW hnsw_params;
  const faiss::SearchParameters* params = nullptr;
  switch (kind) {
    case Kind::kFlat:
      flat_params.sel = selector.get();
      if (selector) params = &flat_params;
      break;
    case Kind::kIvf: {
      auto* ivf = static_cast<const faiss::IndexIVF*>(target);
      ivf_params.nprobe = static_cast<size_t>(nprobe);
      ivf_params.max_codes = ivf->max_codes;
      ivf_params.sel = selector.get();
      params = &ivf_params;
      break;
    }
    case Kind::kHnsw: {
      auto* hnsw = static_cast<const faiss::IndexHNSW*>(target);
      hnsw_params.efSearch = std::max(ef, hnsw->hnsw.efSearch);
      hnsw_params.check_relative_distance = hnsw->hnsw.check_relative_distance;
      hnsw_params.sel = selector.get();
      params = &hnsw_params;
      break;
    }
    case Kind::kOther: break;
  }
  target->search(nq, queries, kf, distances, labels, params);
  if (id_map) {
    const idx_t* map = id_map->id_map.data();
    for (int64_t i = 0; i < nq * kf; ++i) {
      if (labels[i] >= 0) labels[i] = map[labels[i]];
    }
  }
  return kind != Kind::kOther;
}

void VectorIndex::search(const float* queries, int64_t nq, const SearchOptions& options,
                         float* scores, int64_t* ids) const {
  if (options.k < 1 || options.nprobe < 0 || options.ef_search < 0) {
    fail<InvalidInput>(
        "vector search on '{}': k must be >= 1 and nprobe, ef_search >= 0 (got k={}, nprobe={}, "
        "ef_search={})",
        impl_->source, options.k, options.nprobe, options.ef_search);
  }
  const int64_t k = options.k;
  const bool higher = higher_is_better();
  const float empty_score = higher ? -std::numeric_limits<float>::infinity()
                                   : std::numeric_limits<float>::infinity();
  std::fill(scores, scores + nq * k, empty_score);
  std::fill(ids, ids + nq * k, int64_t{-1});
  const int64_t ntotal = size();
  if (nq <= 0 || ntotal == 0) return;

  const Kind kind = impl_->kind();
  const int lists = nlist();
  const int nprobe = options.nprobe > 0 ? std::min(options.nprobe, lists) : default_nprobe();
  // FAISS 1.7.3 ignores SearchParametersHNSW::efSearch but searches the graph with breadth
  // max(efSearch, k): an HNSW query asks for at least ef results, which sets the breadth without
  // touching the shared index.
  int ef = options.ef_search;
  if (kind == Kind::kHnsw && ef == 0) {
    ef = static_cast<const faiss::IndexHNSW*>(impl_->target())->hnsw.efSearch;
  }
  const int dims = dim();
  // The HNSW graph is searched with a growing breadth up to graph_cap; a query still short of k
  // allowed results (or with a tie at rank k) is then answered exactly from the storage.
  const int64_t graph_cap = std::min<int64_t>(ntotal, 16 * std::max<int64_t>(ef, k + 1));

  // Collects one query's valid results, best first, ties by ascending id; reports whether more
  // must be fetched (fewer than k, or a tie at rank k that may continue past what was fetched).
  std::vector<Hit> hits;
  auto collect = [&](const float* d, const idx_t* l, int64_t kf, bool graph,
                     bool filtered_inside) {
    hits.clear();
    int64_t returned = 0;
    const bool post_filter = options.filter && !filtered_inside;
    for (int64_t j = 0; j < kf; ++j) {
      if (l[j] < 0) continue;
      ++returned;
      if (post_filter && !options.filter->allows(l[j])) continue;
      hits.push_back({d[j], l[j]});
    }
    std::sort(hits.begin(), hits.end(), [higher](const Hit& a, const Hit& b) {
      if (a.score != b.score) return better(a.score, b.score, higher);
      return a.id < b.id;
    });
    // The graph may return fewer than asked for before it has seen every vector.
    const bool exhausted = kf >= ntotal || (!graph && returned < kf);
    if (exhausted) return false;
    const int64_t got = static_cast<int64_t>(hits.size());
    return got < k || hits[got - 1].score == hits[k - 1].score;
  };

  const bool hnsw = kind == Kind::kHnsw;
  const int64_t kf0 = std::min(std::max<int64_t>(k + 1, hnsw ? ef : 0), ntotal);
  std::vector<float> distances(static_cast<size_t>(nq * kf0));
  std::vector<idx_t> labels(static_cast<size_t>(nq * kf0));
  const bool inside = impl_->raw_search(queries, nq, kf0, nprobe, ef, false, options.filter,
                                        distances.data(), labels.data());
  std::vector<float> d;
  std::vector<idx_t> l;
  for (int64_t q = 0; q < nq; ++q) {
    int64_t kf = kf0;
    bool graph = hnsw;
    bool more = collect(distances.data() + q * kf0, labels.data() + q * kf0, kf, graph, inside);
    while (more) {
      if (graph && kf >= graph_cap) {
        graph = false;
      } else {
        kf = std::min(graph ? graph_cap : ntotal, kf * 2);
      }
      d.resize(static_cast<size_t>(kf));
      l.resize(static_cast<size_t>(kf));
      const bool inside_now = impl_->raw_search(queries + q * dims, 1, kf, nprobe, ef,
                                                hnsw && !graph, options.filter, d.data(),
                                                l.data());
      more = collect(d.data(), l.data(), kf, graph, inside_now);
    }
    const int64_t got = std::min<int64_t>(k, static_cast<int64_t>(hits.size()));
    for (int64_t j = 0; j < got; ++j) {
      scores[q * k + j] = hits[j].score;
      ids[q * k + j] = hits[j].id;
    }
  }
}

void l2_normalize(float* x, int64_t n, int dim) {
  for (int64_t i = 0; i < n; ++i) {
    float* row = x + i * dim;
    double sum = 0;
    for (int j = 0; j < dim; ++j) sum += static_cast<double>(row[j]) * row[j];
    if (sum <= 0) continue;
    const float inv = static_cast<float>(1.0 / std::sqrt(sum));
    for (int j = 0; j < dim; ++j) row[j] *= inv;
  }
}

void set_vector_threads(int threads) { omp_set_num_threads(std::max(1, threads)); }

}  // namespace tessera
