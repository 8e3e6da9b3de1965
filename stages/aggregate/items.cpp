#include "stages/aggregate/items.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/store/embeddings.h"

namespace tessera::aggregate {

namespace fs = std::filesystem;

namespace {

std::string no_patch_reason(const SlideTable& t, size_t s) {
  std::string why = "no patches";
  if (!t.status[s].empty()) why += ": " + t.status[s];
  if (!t.reason[s].empty()) why += " (" + t.reason[s] + ")";
  return why;
}

void add_distinct(std::string* joined, const std::string& value) {
  size_t start = 0;
  while (true) {
    const size_t bar = joined->find('|', start);
    if (joined->substr(start, bar == std::string::npos ? std::string::npos : bar - start) ==
        value) {
      return;
    }
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  *joined += "|" + value;
}

}  // namespace

ItemList make_items(const std::vector<PartSlides>& parts, Level level) {
  ItemList list;
  if (!parts.empty()) list.label_columns = parts.front().slides->metadata_columns;
  for (const auto& part : parts) {
    if (part.slides->metadata_columns != list.label_columns) {
      fail<InvalidInput>("the embed parts under '{}' come from manifests with different metadata "
                         "columns",
                         fs::path(part.embed_dir).parent_path().string());
    }
  }
  // Every part's slide table lists the whole cohort, the slides of other parts with status
  // "other_part": each slide is taken from the part that made it, in order of first listing.
  struct Row {
    const PartSlides* part = nullptr;
    size_t s = 0;
    bool own() const { return part->slides->status[s] != kOtherPartStatus; }
  };
  std::vector<std::string> order;
  std::map<std::string, Row> rows;
  for (const auto& part : parts) {
    for (size_t s = 0; s < part.slides->size(); ++s) {
      const Row row{&part, s};
      auto [it, added] = rows.emplace(part.slides->slide_id[s], row);
      if (added) {
        order.push_back(it->first);
      } else if (!it->second.own() && row.own()) {
        it->second = row;
      }
    }
  }
  std::map<std::string, size_t> patient_item;
  for (const std::string& slide_id : order) {
    const Row& row = rows.at(slide_id);
    const PartSlides& part = *row.part;
    const SlideTable& t = *part.slides;
    {
      const size_t s = row.s;
      std::vector<std::string> labels;
      for (const auto& column : t.metadata) labels.push_back(column[s]);
      SlideRef ref{t.slide_id[s],
                   slide_features_path(part.embed_dir, t.slide_id[s]),
                   t.patch_count[s]};
      if (level == Level::kSlide || t.patient_id[s].empty()) {
        Item item;
        item.id = t.slide_id[s];
        item.patient_id = t.patient_id[s];
        item.slide_ids = {t.slide_id[s]};
        item.labels = std::move(labels);
        if (level == Level::kPatient) {
          item.skip_reason = "no patient_id";
        } else if (ref.patches == 0) {
          item.skip_reason = no_patch_reason(t, s);
        } else {
          item.patches = ref.patches;
          item.slides.push_back(ref);
        }
        list.items.push_back(std::move(item));
        continue;
      }
      auto [it, added] = patient_item.emplace(t.patient_id[s], list.items.size());
      if (added) {
        Item item;
        item.id = t.patient_id[s];
        item.patient_id = t.patient_id[s];
        item.labels = std::move(labels);
        list.items.push_back(std::move(item));
      } else {
        Item& item = list.items[it->second];
        for (size_t c = 0; c < labels.size(); ++c) add_distinct(&item.labels[c], labels[c]);
      }
      Item& item = list.items[it->second];
      item.slide_ids.push_back(ref.slide_id);
      if (ref.patches > 0) {
        item.patches += ref.patches;
        item.slides.push_back(ref);
      }
    }
  }
  if (level == Level::kPatient) {
    for (auto& [patient, index] : patient_item) {
      Item& item = list.items[index];
      if (!is_safe_slide_id(patient)) {
        item.skip_reason = "patient_id is not a safe file name (A-Z a-z 0-9 . _ -)";
        item.slides.clear();
      } else if (item.slides.empty()) {
        item.skip_reason = "no patches in any of its " + std::to_string(item.slide_ids.size()) +
                           " slides";
      }
    }
  }
  return list;
}

}  // namespace tessera::aggregate
