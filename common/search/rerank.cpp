#include "common/search/rerank.h"

#include <algorithm>
#include <mutex>
#include <numeric>
#include <unordered_map>

#include "common/core/error.h"
#include "common/stage/skeleton.h"
#include "common/store/embeddings.h"
#include "common/store/files.h"
#include "common/store/index.h"
#include "common/vector/vector_index.h"

namespace tessera::search {

namespace {

// Where a slide's rows are: the part holding it and its first row there.
struct SlideRows {
  int32_t source = -1;
  int64_t first = 0;
  int64_t count = 0;
};

}  // namespace

struct StoredVectors::Impl {
  std::vector<EmbeddingsReader> files;  // per catalog source
  std::vector<SlideRows> slides;        // per slide index
  int dim = 0;
  bool normalize = false;
  mutable std::mutex mutex;
  mutable RerankCounters counters;
};

StoredVectors::StoredVectors(const Catalog& catalog, VerifyLevel verify)
    : impl_(std::make_unique<Impl>()) {
  impl_->dim = catalog.dim;
  impl_->normalize = catalog.normalize;
  for (size_t s = 0; s < catalog.sources.size(); ++s) {
    const std::string embed_dir = catalog.path(catalog.sources[s].embed_dir);
    const std::string why = rank_outputs_problem(embed_dir, verify, kEmbeddingsFile);
    if (!why.empty()) {
      fail<IoError>("the stored embeddings of '{}', which re-ranking reads, are damaged: {}; rerun "
                    "embed with --verify full to redo what is damaged, or search with --rerank 0",
                    embed_dir, why);
    }
    const IndexInfo info = load_index_info(catalog.path(catalog.sources[s].patchgen_dir));
    EmbeddingsReader& file = impl_->files.emplace_back(embeddings_path(embed_dir));
    if (file.dim() != catalog.dim || file.rows() != info.rows) {
      fail<IoError>("'{}' holds {} rows of dimension {}, its patch index '{}' {} rows and the "
                    "index dimension {}: the embed output does not belong to the index",
                    file.path(), file.rows(), file.dim(), info.path, info.rows, catalog.dim);
    }
    if (impl_->slides.size() < info.slides.size()) impl_->slides.resize(info.slides.size());
    for (size_t t = 0; t < info.slides.size(); ++t) {
      if (info.slides.status[t] != "ok" || info.slides.patch_count[t] == 0) continue;
      impl_->slides[t] = {static_cast<int32_t>(s), info.slide_offset[t],
                          info.slides.patch_count[t]};
    }
  }
}

StoredVectors::~StoredVectors() = default;
StoredVectors::StoredVectors(StoredVectors&&) noexcept = default;
StoredVectors& StoredVectors::operator=(StoredVectors&&) noexcept = default;

RerankCounters StoredVectors::counters() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->counters;
}

void StoredVectors::read(const std::vector<int64_t>& ids, float* values) const {
  const Impl& m = *impl_;
  const int dim = m.dim;
  // (source, row) of each id, then each part's distinct rows ascending: one list read per part.
  std::vector<std::pair<int32_t, int64_t>> where(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    const int64_t slide = id >> 32, ordinal = id & 0xffffffffLL;
    const SlideRows* rows =
        id >= 0 && slide < static_cast<int64_t>(m.slides.size()) ? &m.slides[slide] : nullptr;
    if (!rows || rows->source < 0 || ordinal >= rows->count) {
      fail<IoError>("the index holds patch {}, which no embed output it was built from holds "
                    "(first file: '{}'): rebuild the index with ingest",
                    id, m.files.empty() ? std::string() : m.files.front().path());
    }
    where[i] = {rows->source, rows->first + ordinal};
  }
  std::lock_guard<std::mutex> lock(m.mutex);
  std::vector<float> block;
  std::vector<int64_t> read_ids;
  for (size_t s = 0; s < m.files.size(); ++s) {
    std::vector<int64_t> rows;
    for (const auto& [source, row] : where) {
      if (source == static_cast<int32_t>(s)) rows.push_back(row);
    }
    if (rows.empty()) continue;
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    block.resize(rows.size() * dim);
    read_ids.resize(rows.size());
    const EmbeddingsReader& file = m.files[s];
    file.read_row_list(rows, read_ids.data(), block.data());
    m.counters.rows += static_cast<int64_t>(rows.size());
    m.counters.bytes += static_cast<int64_t>(rows.size()) * file.row_bytes();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (where[i].first != static_cast<int32_t>(s)) continue;
      const size_t at = std::lower_bound(rows.begin(), rows.end(), where[i].second) - rows.begin();
      if (read_ids[at] != ids[i]) {
        fail<IoError>("'{}' row {} holds patch {}, the index says patch {}: the embed output does "
                      "not belong to the index (rebuild it with ingest)",
                      file.path(), rows[at], read_ids[at], ids[i]);
      }
      std::copy_n(block.data() + at * dim, dim, values + i * dim);
    }
  }
  if (m.normalize) l2_normalize(values, static_cast<int64_t>(ids.size()), dim);
}

float exact_score(const float* q, const float* v, int dim, bool inner_product) {
  double sum = 0;
  if (inner_product) {
    for (int d = 0; d < dim; ++d) sum += static_cast<double>(q[d]) * v[d];
  } else {
    for (int d = 0; d < dim; ++d) {
      const double e = static_cast<double>(q[d]) - v[d];
      sum += e * e;
    }
  }
  return static_cast<float>(sum);
}

void rerank_hits(const StoredVectors& stored, const float* queries, int dim, bool inner_product,
                 int k, std::vector<std::vector<Hit>>& candidates) {
  std::vector<int64_t> ids;
  std::vector<float> values;
  const size_t n = candidates.size();
  for (size_t q0 = 0; q0 < n;) {
    // The queries of this group: as many as keep their candidates within kRerankRows (one at
    // least, cut to kRerankRows when it alone has more).
    ids.clear();
    size_t q1 = q0;
    while (q1 < n && (q1 == q0 || ids.size() + candidates[q1].size() <=
                                      static_cast<size_t>(kRerankRows))) {
      for (const Hit& h : candidates[q1]) ids.push_back(h.patch_id);
      ++q1;
    }
    if (ids.size() > static_cast<size_t>(kRerankRows)) {
      candidates[q0].resize(kRerankRows);
      ids.resize(kRerankRows);
    }
    values.resize(ids.size() * dim);
    stored.read(ids, values.data());
    size_t at = 0;
    for (size_t q = q0; q < q1; ++q) {
      auto& list = candidates[q];
      for (Hit& h : list) {
        h.score = exact_score(queries + q * dim, values.data() + at * dim, dim, inner_product);
        ++at;
      }
      std::sort(list.begin(), list.end(), [&](const Hit& a, const Hit& b) {
        if (a.score != b.score) return inner_product ? a.score > b.score : a.score < b.score;
        return a.patch_id < b.patch_id;
      });
      if (list.size() > static_cast<size_t>(k)) list.resize(k);
    }
    q0 = q1;
  }
}

}  // namespace tessera::search
