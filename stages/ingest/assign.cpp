#include "stages/ingest/assign.h"

#include "common/core/error.h"

namespace tessera::ingest {

Assign parse_assign(const std::string& text) {
  if (text == "by-slide") return Assign::kBySlide;
  if (text == "cyclic") return Assign::kCyclic;
  fail<InvalidInput>("invalid --assign '{}': expected by-slide or cyclic", text);
}

const char* to_string(Assign assign) {
  return assign == Assign::kBySlide ? "by-slide" : "cyclic";
}

std::vector<std::vector<int>> assign_by_slide(const std::vector<PartSlides>& parts,
                                              std::vector<int64_t>& fill) {
  TESSERA_CHECK(!fill.empty(), "assign_by_slide: no shards");
  std::vector<std::vector<int>> placed;
  for (const auto& part : parts) {
    std::vector<int>& shards = placed.emplace_back();
    for (int64_t rows : part.rows) {
      // K is small (shards, not rows): a linear scan keeps the tie rule obvious.
      size_t best = 0;
      for (size_t k = 1; k < fill.size(); ++k) {
        if (fill[k] < fill[best]) best = k;
      }
      fill[best] += rows;
      shards.push_back(static_cast<int>(best));
    }
  }
  return placed;
}

}  // namespace tessera::ingest
