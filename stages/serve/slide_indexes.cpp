#include "stages/serve/slide_indexes.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/vector/slide_catalog.h"

namespace tessera::serve {

namespace fs = std::filesystem;

namespace {

std::string folder_name(const std::string& dir) {
  return fs::path(fs::weakly_canonical(fs::absolute(dir))).filename().string();
}

}  // namespace

SlideIndexes SlideIndexes::load(const std::string& spec, const Catalog& patch) {
  SlideIndexes out;
  if (spec == "none") return out;
  if (spec == "auto") {
    const fs::path parent = fs::path(fs::weakly_canonical(fs::absolute(patch.dir))).parent_path();
    for (const std::string& name : list_subdirectories(parent.string())) {
      const std::string dir = (parent / name).string();
      if (!has_slide_catalog(dir)) continue;
      try {
        auto index = std::make_shared<const search::SimilarIndex>(dir);
        if (index->entries().embed_tag != patch.tag) {
          spdlog::info("not serving '{}': its vectors come from embed tag '{}', the patch index's "
                       "from '{}' (name it in --slide-index to serve it)",
                       dir, index->entries().embed_tag, patch.tag);
          continue;
        }
        out.add(name, std::move(index));
      } catch (const std::exception& e) {
        spdlog::warn("not serving the slide/patient index '{}': {}", dir, e.what());
      }
    }
  } else {
    std::stringstream list(spec);
    std::string dir;
    while (std::getline(list, dir, ',')) {
      if (dir.empty()) continue;
      if (!has_slide_catalog(dir)) {
        fail<InvalidInput>("invalid --slide-index: '{}' holds no {} (make one with ingest --level "
                           "slide|patient)",
                           dir, kSlideCatalogFile);
      }
      auto index = std::make_shared<const search::SimilarIndex>(dir);
      if (index->entries().embed_tag != patch.tag) {
        spdlog::warn("'{}' holds vectors of embed tag '{}', the patch index '{}' those of '{}'",
                     dir, index->entries().embed_tag, patch.dir, patch.tag);
      }
      out.add(folder_name(dir), std::move(index));
    }
  }
  for (const auto& [name, index] : out.indexes_) {
    spdlog::info("serving {}-level search from '{}' ({} {}s, {})", index->level(), name,
                 index->entries().size(), index->level(), index->catalog().index_spec);
  }
  return out;
}

void SlideIndexes::add(std::string name, std::shared_ptr<const search::SimilarIndex> index) {
  for (const auto& entry : indexes_) {
    if (entry.first == name) fail<InvalidInput>("invalid --slide-index: '{}' named twice", name);
  }
  indexes_.emplace_back(std::move(name), std::move(index));
  std::stable_sort(indexes_.begin(), indexes_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
}

std::shared_ptr<const search::SimilarIndex> SlideIndexes::find(const std::string& level,
                                                              const std::string& name) const {
  for (const auto& [n, index] : indexes_) {
    if (index->level() == level && (name.empty() || n == name)) return index;
  }
  return nullptr;
}

nlohmann::json SlideIndexes::describe() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [name, index] : indexes_) {
    const auto& c = index->catalog();
    list.push_back({{"name", name},
                    {"level", c.level},
                    {"encoder", c.encoder},
                    {"rows", index->entries().size()},
                    {"dimension", c.dim},
                    {"index_spec", c.index_spec},
                    {"metric", c.metric},
                    {"embed_tag", index->entries().embed_tag},
                    {"label_columns", index->entries().label_columns}});
  }
  return list;
}

}  // namespace tessera::serve
