// What aggregate makes vectors of: the slides of every embed part (slide level) or the patients
// over them (patient level), in manifest order, each with its feature files and labels, or the
// reason it is skipped. Pure: every rank derives the same list from the same slide tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/store/index.h"
#include "stages/aggregate/config.h"

namespace tessera::aggregate {

// One embed part as aggregate reads it: its stage directory and the slide table of the patch run
// it was made from.
struct PartSlides {
  std::string embed_dir;
  const SlideTable* slides = nullptr;
};

struct SlideRef {
  std::string slide_id;
  std::string features_path;  // embed_dir/features/<slide_id>.h5
  int64_t patches = 0;
};

struct Item {
  std::string id;          // slide id, or patient id at patient level
  std::string patient_id;  // "" when the manifest has none
  std::vector<SlideRef> slides;  // with patches, in manifest order
  std::vector<std::string> slide_ids;  // every slide of the item, with patches or not
  std::vector<std::string> labels;     // one per label column
  int64_t patches = 0;
  std::string skip_reason;  // non-empty: no vector is made
};

struct ItemList {
  std::vector<std::string> label_columns;  // the manifest's metadata columns
  std::vector<Item> items;
};

// Slide level: one item per slide, skipped when it has no patches ("no patches: <patchgen's
// status and reason>"). Patient level: one item per distinct non-empty patient_id in order of
// first appearance, its slides with patches pooled together, skipped when none has patches or
// the id is not a safe file name; slides without patient_id are skipped as items of their own
// ("no patient_id"). Label values of a patient are its slides' distinct values, "|"-separated.
// Throws InvalidInput when the parts disagree on the metadata columns.
ItemList make_items(const std::vector<PartSlides>& parts, Level level);

}  // namespace tessera::aggregate
