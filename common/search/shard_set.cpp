#include "common/search/shard_set.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>
#include <unordered_map>

#include "common/core/error.h"
#include "common/search/rerank.h"
#include "common/vector/topk.h"
#include "common/vector/vector_index.h"

namespace tessera::search {

namespace {

// Restricts a search to the rows a filter allows, less the query's excluded slides. Patch ids
// carry their slide in the upper 32 bits, so exclusions need no lookup.
class RowFilter final : public IdFilter {
 public:
  RowFilter(const std::vector<int64_t>* allowed, const QueryScope* scope)
      : allowed_(allowed), scope_(scope) {}
  bool allows(int64_t id) const override {
    if (scope_) {
      const int64_t slide = id >> 32;
      if (slide == scope_->exclude_slide) return false;
      if (!scope_->excluded_slides.empty() && scope_->excluded_slides[slide]) return false;
    }
    return !allowed_ || std::binary_search(allowed_->begin(), allowed_->end(), id);
  }

 private:
  const std::vector<int64_t>* allowed_;
  const QueryScope* scope_;
};

struct Segment {
  int shard = 0;
  VectorIndex index;
  VectorMeta meta;
  std::vector<int64_t> sorted_ids;   // patch ids ascending
  std::vector<int64_t> sorted_rows;  // their rows in meta
  std::optional<std::vector<int64_t>> allowed;  // ids the filter allows, ascending
};

}  // namespace

std::vector<ColumnSchema> filter_columns(const VectorSlideTable& slides) {
  std::vector<ColumnSchema> c = {
      {"patch_id", ColumnType::kInt},    {"x", ColumnType::kInt},
      {"y", ColumnType::kInt},           {"tissue", ColumnType::kFloat},
      {"slide_id", ColumnType::kString}, {"patient_id", ColumnType::kString},
      {"level", ColumnType::kInt},       {"mpp", ColumnType::kFloat},
      {"slide_mpp", ColumnType::kFloat}, {"patch_size", ColumnType::kInt},
      {"read_size", ColumnType::kInt}};
  for (const auto& m : slides.metadata) {
    const bool taken = std::any_of(c.begin(), c.end(), [&](const auto& s) { return s.name == m.name; });
    if (!taken) c.push_back({m.name, m.type});  // MetaType is ColumnType
  }
  return c;
}

namespace {

// The rows of `meta` that `filter` allows, as ascending patch ids; `t` is the slide table.
std::vector<int64_t> allowed_ids(const VectorMeta& meta, const VectorSlideTable& t,
                                 const Filter& filter) {
  const VectorRows& r = meta.rows;
  const int64_t n = static_cast<int64_t>(r.size());
  const size_t slides = t.size();
  std::vector<int64_t> level(slides), patch_size(slides, meta.patch_size), read_size(slides);
  std::vector<double> mpp(slides, meta.mpp);
  // Row-level columns stored in another shape (interleaved coords, float tissue) are copied only
  // when the filter reads them: a filter on slide metadata costs no per-row copy.
  const std::vector<std::string> used = filter.columns_used();
  auto uses = [&](const char* column) {
    return std::find(used.begin(), used.end(), column) != used.end();
  };
  std::vector<int64_t> x, y;
  std::vector<double> tissue;
  if (uses("x") || uses("y")) {
    x.resize(n);
    y.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = r.coords[2 * i];
      y[i] = r.coords[2 * i + 1];
    }
  }
  if (uses("tissue")) tissue.assign(r.tissue.begin(), r.tissue.end());
  for (size_t s = 0; s < slides; ++s) {
    level[s] = t.level[s];
    read_size[s] = t.read_size[s];
  }
  const int32_t* by_slide = r.slide.data();
  const int64_t m = static_cast<int64_t>(slides);
  std::vector<ColumnView> views = {
      {"patch_id", ColumnType::kInt, r.patch_id.data(), nullptr, nullptr, nullptr, n},
      {"x", ColumnType::kInt, x.data(), nullptr, nullptr, nullptr, n},
      {"y", ColumnType::kInt, y.data(), nullptr, nullptr, nullptr, n},
      {"tissue", ColumnType::kFloat, nullptr, tissue.data(), nullptr, nullptr, n},
      {"slide_id", ColumnType::kString, nullptr, nullptr, t.slide_id.data(), by_slide, m},
      {"patient_id", ColumnType::kString, nullptr, nullptr, t.patient_id.data(), by_slide, m},
      {"level", ColumnType::kInt, level.data(), nullptr, nullptr, by_slide, m},
      {"mpp", ColumnType::kFloat, nullptr, mpp.data(), nullptr, by_slide, m},
      {"slide_mpp", ColumnType::kFloat, nullptr, t.slide_mpp.data(), nullptr, by_slide, m},
      {"patch_size", ColumnType::kInt, patch_size.data(), nullptr, nullptr, by_slide, m},
      {"read_size", ColumnType::kInt, read_size.data(), nullptr, nullptr, by_slide, m}};
  for (const auto& c : t.metadata) {
    ColumnView v{c.name, c.type, nullptr, nullptr, nullptr, by_slide, m};
    if (c.type == MetaType::kInt) v.ints = c.ints.data();
    if (c.type == MetaType::kFloat) v.floats = c.floats.data();
    if (c.type == MetaType::kString) v.strings = c.strings.data();
    views.push_back(v);
  }
  const std::vector<uint8_t> keep = filter.evaluate(views, n);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) {
    if (keep[i]) ids.push_back(r.patch_id[i]);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace

QueryScope exclusion_scope(int32_t slide, bool exclude_same_slide, bool exclude_same_patient,
                           const VectorSlideTable& slides) {
  QueryScope scope;
  if (exclude_same_slide) scope.exclude_slide = slide;
  if (exclude_same_patient) {
    scope.excluded_slides.assign(slides.size(), 0);
    const std::string& patient = slides.patient_id.at(slide);
    for (size_t t = 0; t < slides.size(); ++t) {
      const bool same = patient.empty() ? static_cast<int32_t>(t) == slide
                                        : slides.patient_id[t] == patient;
      if (same) scope.excluded_slides[t] = 1;
    }
  }
  return scope;
}

struct ShardSet::Impl {
  std::vector<Segment> segments;
  VectorSlideTable slides;  // the same in every segment; kept once for select()
  bool higher_is_better = true;
  int dim = 0;
  int64_t rows = 0, matching = 0;
  int rerank = 0;                        // candidates per hit re-ranked; 0: none
  std::optional<StoredVectors> stored;   // with rerank > 0
};

ShardSet::ShardSet(const Catalog& catalog, const std::vector<int>& shards, bool mmap,
                   VerifyLevel verify, const std::optional<Filter>& filter, int rerank)
    : impl_(std::make_unique<Impl>()) {
  if (rerank < 0) fail<InvalidInput>("--rerank must be 0 (off) or more, not {}", rerank);
  const std::vector<std::string> problems = check_catalog_files(catalog, verify, shards);
  if (!problems.empty()) {
    std::string list;
    for (const auto& p : problems) list += "\n  " + p;
    fail<IoError>("the index '{}' is damaged (rerun ingest with --verify full to rebuild what is "
                  "damaged, or with --overwrite):{}",
                  catalog.dir, list);
  }
  impl_->dim = catalog.dim;
  impl_->higher_is_better = catalog.metric == "ip";
  for (int k : shards) {
    for (const CatalogSegment& s : catalog.shards.at(k).segments) {
      const std::string index_path = catalog.path(s.index.file);
      const std::string meta_path = catalog.path(s.meta.file);
      Segment seg{k, VectorIndex::read(index_path, mmap), read_vector_meta(meta_path), {}, {}, {}};
      if (seg.index.dim() != catalog.dim) {
        fail<IoError>("'{}' holds vectors of dimension {}, the catalog says {}", index_path,
                      seg.index.dim(), catalog.dim);
      }
      if (seg.index.size() != s.rows || static_cast<int64_t>(seg.meta.rows.size()) != s.rows) {
        fail<IoError>("'{}' and '{}' hold {} and {} rows, the catalog says {}", index_path,
                      meta_path, seg.index.size(), seg.meta.rows.size(), s.rows);
      }
      const int64_t n = s.rows;
      std::vector<int64_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      const auto& ids = seg.meta.rows.patch_id;
      std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
      seg.sorted_rows = order;
      seg.sorted_ids.resize(n);
      for (int64_t i = 0; i < n; ++i) seg.sorted_ids[i] = ids[order[i]];
      if (filter) seg.allowed = allowed_ids(seg.meta, seg.meta.slides, *filter);
      impl_->rows += n;
      impl_->matching += seg.allowed ? static_cast<int64_t>(seg.allowed->size()) : n;
      // Only the columns needed to report hits stay, and one slide table.
      if (impl_->segments.empty()) impl_->slides = std::move(seg.meta.slides);
      seg.meta.slides = {};
      impl_->segments.push_back(std::move(seg));
    }
  }
  const bool approximate =
      std::any_of(impl_->segments.begin(), impl_->segments.end(),
                  [](const Segment& s) { return !s.index.exact_scores(); });
  if (rerank > 0 && approximate) {
    impl_->rerank = rerank;
    impl_->stored.emplace(catalog, verify);
  }
}

int ShardSet::rerank() const { return impl_->rerank; }

RerankCounters ShardSet::rerank_counters() const {
  return impl_->stored ? impl_->stored->counters() : RerankCounters{};
}

ShardSet::~ShardSet() = default;
ShardSet::ShardSet(ShardSet&&) noexcept = default;
ShardSet& ShardSet::operator=(ShardSet&&) noexcept = default;

int64_t ShardSet::rows() const { return impl_->rows; }
int64_t ShardSet::matching_rows() const { return impl_->matching; }

RowSelection ShardSet::select(const Filter& filter) const {
  RowSelection selection;
  for (const Segment& seg : impl_->segments) {
    selection.allowed.push_back(allowed_ids(seg.meta, impl_->slides, filter));
    selection.matching += static_cast<int64_t>(selection.allowed.back().size());
  }
  return selection;
}

std::vector<std::vector<Hit>> ShardSet::search(const float* queries, int64_t n,
                                               const std::vector<QueryScope>& scopes,
                                               const SearchParams& params) const {
  const auto& segments = impl_->segments;
  const int k = params.k;
  const int dim = impl_->dim;
  const int candidates = impl_->rerank > 0 ? k * impl_->rerank : k;
  const int workers = static_cast<int>(
      std::max<size_t>(1, std::min<size_t>(params.threads, segments.size())));
  // results[worker][query]: the best k of the segments that worker searched so far.
  std::vector<std::vector<std::vector<Hit>>> results(workers, std::vector<std::vector<Hit>>(n));
  const int64_t batch = scopes.empty() && params.batch_size == 0 ? std::max<int64_t>(n, 1)
                        : scopes.empty()                         ? params.batch_size
                                                                 : 1;
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(segments.size());
  auto work = [&](int worker) {
    set_vector_threads(std::max(1, params.threads / workers));
    std::vector<float> scores;
    std::vector<int64_t> ids;
    std::vector<std::vector<Hit>> found;
    auto& best = results[worker];
    for (size_t s; (s = next.fetch_add(1)) < segments.size();) {
      try {
        const Segment& seg = segments[s];
        for (int64_t q0 = 0; q0 < n; q0 += batch) {
          const int64_t m = std::min(batch, n - q0);
          const QueryScope* scope = scopes.empty() ? nullptr : &scopes[q0];
          const std::vector<int64_t>* allowed =
              scope && scope->selection ? &scope->selection->allowed[s]
              : seg.allowed             ? &*seg.allowed
                                        : nullptr;
          RowFilter filter(allowed, scope);
          SearchOptions options;
          options.k = candidates;
          options.nprobe = params.nprobe;
          options.ef_search = params.ef_search;
          const bool filtered = allowed || scope;
          options.filter = filtered ? &filter : nullptr;
          scores.assign(static_cast<size_t>(m) * candidates, 0);
          ids.assign(static_cast<size_t>(m) * candidates, -1);
          seg.index.search(queries + q0 * dim, m, options, scores.data(), ids.data());
          found.resize(m);
          for (int64_t q = 0; q < m; ++q) {
            auto& out = found[q];
            out.clear();
            for (int j = 0; j < candidates; ++j) {
              const int64_t id = ids[q * candidates + j];
              if (id < 0) continue;
              const auto it = std::lower_bound(seg.sorted_ids.begin(), seg.sorted_ids.end(), id);
              if (it == seg.sorted_ids.end() || *it != id) {
                fail<IoError>("shard {} returned patch {}, which its metadata does not list",
                              seg.shard, id);
              }
              const int64_t row = seg.sorted_rows[it - seg.sorted_ids.begin()];
              const VectorRows& r = seg.meta.rows;
              out.push_back({scores[q * candidates + j], id, r.slide[row], r.coords[2 * row],
                             r.coords[2 * row + 1], r.tissue[row], seg.shard});
            }
          }
          if (impl_->stored) {
            rerank_hits(*impl_->stored, queries + q0 * dim, dim, impl_->higher_is_better, k,
                        found);
          }
          for (int64_t q = 0; q < m; ++q) {
            auto& kept = best[q0 + q];
            kept = kept.empty() ? found[q]
                                : merge_hits({kept, found[q]}, k, impl_->higher_is_better);
          }
        }
      } catch (...) {
        errors[s] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < workers; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& t : pool) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  std::vector<std::vector<Hit>> merged(n);
  for (int64_t q = 0; q < n; ++q) {
    std::vector<std::vector<Hit>> lists;
    for (auto& r : results) lists.push_back(std::move(r[q]));
    merged[q] = merge_hits(lists, k, impl_->higher_is_better);
  }
  return merged;
}

int64_t query_batch_size(int64_t requested, int64_t queries, int k) {
  if (requested > 0) return requested;
  return std::max<int64_t>(1, std::min<int64_t>(queries, kBatchHits / std::max(1, k)));
}

std::vector<Hit> merge_hits(const std::vector<std::vector<Hit>>& lists, int k,
                            bool higher_is_better) {
  std::vector<std::vector<Neighbor>> neighbours;
  std::unordered_map<int64_t, const Hit*> by_id;
  for (const auto& list : lists) {
    auto& n = neighbours.emplace_back();
    for (const Hit& h : list) {
      n.push_back({h.score, h.patch_id});
      by_id.emplace(h.patch_id, &h);
    }
  }
  std::vector<Hit> out;
  for (const Neighbor& n : merge_topk(neighbours, k, higher_is_better)) out.push_back(*by_id.at(n.id));
  return out;
}

std::string encode_hits(const std::vector<std::vector<Hit>>& hits) {
  std::string bytes;
  auto put = [&](const void* p, size_t n) { bytes.append(static_cast<const char*>(p), n); };
  const uint64_t queries = hits.size();
  put(&queries, sizeof queries);
  for (const auto& list : hits) {
    const uint64_t m = list.size();
    put(&m, sizeof m);
    if (m) put(list.data(), m * sizeof(Hit));
  }
  return bytes;
}

std::vector<std::vector<Hit>> decode_hits(const std::string& bytes) {
  size_t at = 0;
  auto get = [&](void* p, size_t n) {
    TESSERA_CHECK(at + n <= bytes.size(), "decode_hits: truncated message");
    std::memcpy(p, bytes.data() + at, n);
    at += n;
  };
  uint64_t queries = 0;
  get(&queries, sizeof queries);
  std::vector<std::vector<Hit>> hits(queries);
  for (auto& list : hits) {
    uint64_t m = 0;
    get(&m, sizeof m);
    list.resize(m);
    if (m) get(list.data(), m * sizeof(Hit));
  }
  return hits;
}

}  // namespace tessera::search
