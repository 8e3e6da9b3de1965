// PatchLookup over a real (tiny) ingest output: patches found by id and by point, their stored
// embeddings, and their pixels from the store or else from the slide.
#include "common/search/lookup.h"

#include <gtest/gtest.h>

#include <limits>

#include "common/core/error.h"
#include "common/h5/h5.h"
#include "common/store/embeddings.h"
#include "common/store/index.h"
#include "tests/inprocess/pipeline.h"
#include "tests/inprocess/support.h"

namespace tessera::search {
namespace {

namespace fs = std::filesystem;
using inprocess::ScratchDir;

class Lookup : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("query_lookup");
    inprocess::make_upstream(dir_->path().string(), *dir_ / "run", true);
    info_ = new IndexInfo(load_index_info(*dir_ / "run/patchgen"));
    rows_ = new IndexRows(IndexReader(info_->path).read_range(0, info_->rows));
  }
  static void TearDownTestSuite() {
    delete rows_;
    delete info_;
    delete dir_;
  }
  static Catalog catalog(const std::string& run) { return load_catalog(run + "/ingest/flat"); }

  static ScratchDir* dir_;
  static IndexInfo* info_;
  static IndexRows* rows_;
};

ScratchDir* Lookup::dir_ = nullptr;
IndexInfo* Lookup::info_ = nullptr;
IndexRows* Lookup::rows_ = nullptr;

TEST_F(Lookup, FindsEveryPatchOfTheIndexAndNoOther) {
  const Catalog c = catalog(*dir_ / "run");
  const PatchLookup lookup(c);
  ASSERT_GT(rows_->size(), 20u);
  for (size_t i = 0; i < rows_->size(); ++i) {
    const auto p = lookup.find(rows_->patch_id[i]);
    ASSERT_TRUE(p.has_value()) << rows_->patch_id[i];
    EXPECT_EQ(p->patch_id, rows_->patch_id[i]);
    EXPECT_EQ(p->slide, rows_->slide[i]);
    EXPECT_EQ(p->x, rows_->coords[2 * i]);
    EXPECT_EQ(p->y, rows_->coords[2 * i + 1]);
    EXPECT_EQ(p->source, 0u);
    EXPECT_EQ(p->row, static_cast<int64_t>(i));
  }
  EXPECT_FALSE(lookup.find(-1).has_value());
  EXPECT_FALSE(lookup.find(rows_->patch_id.back() + 1).has_value()) << "past a slide's last patch";
  EXPECT_FALSE(lookup.find(int64_t{77} << 32).has_value()) << "a slide the manifest lacks";
}

// The patch whose centre is nearest the point, the lowest id on ties, by brute force.
TEST_F(Lookup, NearestIsThePatchWhoseCentreIsClosest) {
  const Catalog c = catalog(*dir_ / "run");
  const PatchLookup lookup(c);
  const double half = 0.5 * info_->patch_size;  // level 0 at 0.5 um/px: no downsampling
  for (int32_t slide = 0; slide < 3; ++slide) {
    for (const auto& [x, y] : std::vector<std::pair<int64_t, int64_t>>{
             {0, 0}, {300, 250}, {-50, 400}, {96, 96}}) {
      size_t best = 0;
      double best_d = std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < rows_->size(); ++i) {
        if (rows_->slide[i] != slide) continue;
        const double dx = rows_->coords[2 * i] + half - x, dy = rows_->coords[2 * i + 1] + half - y;
        if (dx * dx + dy * dy < best_d) {
          best_d = dx * dx + dy * dy;
          best = i;
        }
      }
      const StoredPatch p = lookup.nearest(slide, x, y);
      EXPECT_EQ(p.patch_id, rows_->patch_id[best]) << "slide " << slide << " at " << x << "," << y;
      EXPECT_EQ(p.row, static_cast<int64_t>(best));
    }
  }
  // Issue 21, case 7: a point more than one patch outside the slide is refused, not answered
  // with the nearest patch.
  EXPECT_THROW(lookup.nearest(0, 10000, 10000), InvalidInput);
  EXPECT_THROW(lookup.nearest(0, -65, 0), InvalidInput);
  // A patch's own centre finds it.
  const size_t i = rows_->size() / 2;
  const auto centre = [&](size_t k) { return static_cast<int64_t>(rows_->coords[k] + half); };
  EXPECT_EQ(lookup.nearest(rows_->slide[i], centre(2 * i), centre(2 * i + 1)).patch_id,
            rows_->patch_id[i]);
}

TEST_F(Lookup, TheEmbeddingIsTheStoredRowAndAWrongRowIsRefused) {
  const Catalog c = catalog(*dir_ / "run");
  const PatchLookup lookup(c);
  const h5::File f =
      h5::File::open(*dir_ / "run/embed/vit-tiny/embeddings.h5", h5::Mode::kRead);
  const auto all = f.open_dataset(embedding_names::kEmbeddings).read_all<float>();
  const size_t dim = all.size() / rows_->size();
  for (size_t i : {size_t{0}, rows_->size() / 2, rows_->size() - 1}) {
    const auto p = lookup.find(rows_->patch_id[i]);
    ASSERT_TRUE(p.has_value());
    const std::vector<float> v = lookup.embedding(*p);
    ASSERT_EQ(v.size(), dim);
    EXPECT_TRUE(std::equal(v.begin(), v.end(), all.begin() + i * dim)) << "row " << i;
  }
  StoredPatch wrong = *lookup.find(rows_->patch_id[0]);
  wrong.row = 1;
  EXPECT_THROW(lookup.embedding(wrong), IoError);
}

// The store's pixels; without the store, the same pixels read from the slide (raw store, no
// resampling at 0.5 um/px); without either, an empty image and the reasons.
TEST_F(Lookup, PixelsComeFromTheStoreElseFromTheSlide) {
  const Catalog c = catalog(*dir_ / "run");
  const auto p = PatchLookup(c).find(rows_->patch_id[3]);
  ASSERT_TRUE(p.has_value());
  const Image8 stored = PatchLookup(c).pixels(*p);
  EXPECT_EQ(stored.width, info_->patch_size);
  EXPECT_EQ(stored.height, info_->patch_size);
  ASSERT_EQ(stored.pixels.size(), static_cast<size_t>(64 * 64 * 3));

  const std::string copy = *dir_ / "no-store";
  fs::copy(*dir_ / "run", copy, fs::copy_options::recursive);
  fs::remove_all(copy + "/patchgen/shards");
  const Catalog without_store = catalog(copy);
  const PatchLookup lookup(without_store);
  std::string why;
  const Image8 from_slide = lookup.pixels(*p, &why);
  EXPECT_EQ(from_slide.pixels, stored.pixels) << why;

  const std::string slide = info_->slides.path.at(p->slide);
  fs::rename(slide, slide + ".away");
  const Image8 none = lookup.pixels(*p, &why);
  fs::rename(slide + ".away", slide);
  EXPECT_TRUE(none.pixels.empty());
  EXPECT_NE(why.find("rank-00000.h5"), std::string::npos) << why;
  EXPECT_NE(why.find(fs::path(slide).filename().string()), std::string::npos) << why;
}

}  // namespace
}  // namespace tessera::search
