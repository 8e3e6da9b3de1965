#include "common/search/votes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <functional>
#include <map>

namespace tessera::search {

namespace {

double distance2(const float* a, const float* b, int dim) {
  double s = 0;
  for (int d = 0; d < dim; ++d) {
    const double t = static_cast<double>(a[d]) - b[d];
    s += t * t;
  }
  return s;
}

std::vector<Vote> tally(const std::vector<std::vector<Hit>>& hits,
                        const std::function<std::string(const Hit&)>& key_of,
                        const std::function<Vote(const Hit&)>& make, bool higher_is_better) {
  std::map<std::string, Vote> votes;
  for (const auto& list : hits) {
    std::map<std::string, float> best;  // this mosaic patch's distinct keys
    for (const Hit& h : list) {
      const std::string key = key_of(h);
      auto [it, added] = best.emplace(key, h.score);
      if (!added) {
        it->second = higher_is_better ? std::max(it->second, h.score)
                                      : std::min(it->second, h.score);
      }
      if (added && votes.count(key) == 0) votes.emplace(key, make(h));
    }
    for (const auto& [key, score] : best) {
      Vote& v = votes.at(key);
      v.best_score = v.votes == 0 ? score
                                  : (higher_is_better ? std::max(v.best_score, score)
                                                      : std::min(v.best_score, score));
      ++v.votes;
    }
  }
  std::vector<Vote> ranked;
  for (auto& [key, v] : votes) ranked.push_back(std::move(v));
  std::stable_sort(ranked.begin(), ranked.end(), [&](const Vote& a, const Vote& b) {
    if (a.votes != b.votes) return a.votes > b.votes;
    if (a.best_score != b.best_score) {
      return higher_is_better ? a.best_score > b.best_score : a.best_score < b.best_score;
    }
    return a.id < b.id;
  });
  return ranked;
}

std::string patient_of(const VectorSlideTable& slides, int32_t s) {
  return slides.patient_id[s].empty() ? slides.slide_id[s] : slides.patient_id[s];
}

}  // namespace

int64_t mosaic_size(int64_t n, const MosaicRule& rule) {
  const auto share = static_cast<int64_t>(std::ceil(rule.percent / 100.0 * static_cast<double>(n)));
  return std::min<int64_t>({n, std::max<int64_t>(rule.min_size, share), rule.max_size});
}

std::vector<int64_t> pick_mosaic(const std::vector<float>& features, int64_t rows, int dim,
                                 const MosaicRule& rule) {
  const int64_t m = mosaic_size(rows, rule);
  if (m <= 0) return {};
  const float* x = features.data();
  // Initial centres: nearest the mean, then farthest-first.
  std::vector<float> mean(static_cast<size_t>(dim), 0.0f);
  {
    std::vector<double> sum(static_cast<size_t>(dim), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int d = 0; d < dim; ++d) sum[d] += x[r * dim + d];
    }
    for (int d = 0; d < dim; ++d) mean[d] = static_cast<float>(sum[d] / rows);
  }
  std::vector<int64_t> chosen;
  std::vector<double> nearest(static_cast<size_t>(rows), std::numeric_limits<double>::max());
  int64_t first = 0;
  double best = std::numeric_limits<double>::max();
  for (int64_t r = 0; r < rows; ++r) {
    const double d = distance2(x + r * dim, mean.data(), dim);
    if (d < best) best = d, first = r;
  }
  chosen.push_back(first);
  while (static_cast<int64_t>(chosen.size()) < m) {
    const int64_t last = chosen.back();
    int64_t far = -1;
    double far_d = -1;
    for (int64_t r = 0; r < rows; ++r) {
      nearest[r] = std::min(nearest[r], distance2(x + r * dim, x + last * dim, dim));
      if (nearest[r] > far_d) far_d = nearest[r], far = r;
    }
    if (far_d <= 0) break;  // fewer distinct patches than clusters
    chosen.push_back(far);
  }
  const int64_t k = static_cast<int64_t>(chosen.size());
  std::vector<float> centres(static_cast<size_t>(k * dim));
  for (int64_t c = 0; c < k; ++c) {
    std::copy(x + chosen[c] * dim, x + (chosen[c] + 1) * dim, centres.begin() + c * dim);
  }
  std::vector<int64_t> assign(static_cast<size_t>(rows), 0);
  for (int it = 0; it < rule.iterations; ++it) {
    for (int64_t r = 0; r < rows; ++r) {
      double bd = std::numeric_limits<double>::max();
      for (int64_t c = 0; c < k; ++c) {
        const double d = distance2(x + r * dim, centres.data() + c * dim, dim);
        if (d < bd) bd = d, assign[r] = c;
      }
    }
    std::vector<double> sum(static_cast<size_t>(k * dim), 0.0);
    std::vector<int64_t> count(static_cast<size_t>(k), 0);
    for (int64_t r = 0; r < rows; ++r) {
      ++count[assign[r]];
      for (int d = 0; d < dim; ++d) sum[assign[r] * dim + d] += x[r * dim + d];
    }
    for (int64_t c = 0; c < k; ++c) {
      if (count[c] == 0) continue;
      for (int d = 0; d < dim; ++d) {
        centres[c * dim + d] = static_cast<float>(sum[c * dim + d] / count[c]);
      }
    }
  }
  std::vector<int64_t> mosaic;
  for (int64_t c = 0; c < k; ++c) {
    int64_t pick = -1;
    double bd = std::numeric_limits<double>::max();
    for (int64_t r = 0; r < rows; ++r) {
      const double d = distance2(x + r * dim, centres.data() + c * dim, dim);
      if (d < bd) bd = d, pick = r;
    }
    mosaic.push_back(pick);
  }
  std::sort(mosaic.begin(), mosaic.end());
  mosaic.erase(std::unique(mosaic.begin(), mosaic.end()), mosaic.end());
  return mosaic;
}

std::vector<Vote> vote_slides(const std::vector<std::vector<Hit>>& hits,
                              const VectorSlideTable& slides, bool higher_is_better) {
  return tally(
      hits, [&](const Hit& h) { return slides.slide_id.at(h.slide); },
      [&](const Hit& h) {
        Vote v;
        v.id = slides.slide_id.at(h.slide);
        v.patient_id = slides.patient_id.at(h.slide);
        v.slide = h.slide;
        return v;
      },
      higher_is_better);
}

std::vector<Vote> vote_patients(const std::vector<std::vector<Hit>>& hits,
                                const VectorSlideTable& slides, bool higher_is_better) {
  return tally(
      hits, [&](const Hit& h) { return patient_of(slides, h.slide); },
      [&](const Hit& h) {
        Vote v;
        v.id = patient_of(slides, h.slide);
        return v;
      },
      higher_is_better);
}

}  // namespace tessera::search
