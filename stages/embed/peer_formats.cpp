#include "stages/embed/peer_formats.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "common/core/csv.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/store/embeddings.h"

namespace tessera::embed {

namespace fs = std::filesystem;

PeerLayouts PeerLayouts::parse(const std::string& text) {
  PeerLayouts p{false, false};
  if (text == "none") return p;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, comma - begin);
    begin = comma + 1;
    bool* flag = item == "clam" ? &p.clam : item == "trident" ? &p.trident : nullptr;
    if (flag == nullptr || *flag) {
      fail<InvalidInput>("invalid --peer-layouts '{}': expected clam,trident, clam, trident or "
                         "none",
                         text);
    }
    *flag = true;
  }
  return p;
}

std::string PeerLayouts::to_string() const {
  if (clam && trident) return "clam,trident";
  if (clam) return "clam";
  if (trident) return "trident";
  return "none";
}

std::string trident_encoder_alias(const std::string& preset_name) {
  static const std::map<std::string, std::string> kAliases = {
      {"uni", "uni_v1"},         {"uni2-h", "uni_v2"},         {"conch", "conch_v1"},
      {"prov-gigapath", "gigapath"}, {"virchow2", "virchow2"},  {"h-optimus-0", "hoptimus0"},
      {"h-optimus-1", "hoptimus1"},  {"phikon-v2", "phikon_v2"},
  };
  auto it = kAliases.find(preset_name);
  return it == kAliases.end() ? "" : it->second;
}

std::string trident_encoder_name(const nlohmann::json& model_fingerprint, const std::string& tag) {
  if (model_fingerprint.value("kind", "") != "torchscript") return tag;
  const auto preset = model_fingerprint.find("preset");
  if (preset == model_fingerprint.end() || !preset->is_object()) return tag;
  const std::string alias = trident_encoder_alias(preset->value("name", ""));
  return alias.empty() ? tag : alias;
}

namespace {

// patchgen's reasons for a slide it opened but found nothing to cut (stages/patchgen/plan.cpp).
bool is_without_patches(const std::string& reason) {
  return reason == "no tissue detected" ||
         reason.rfind("tissue found, but no patch reaches", 0) == 0;
}

}  // namespace

SlideOutcome slide_outcome(const SlideTable& slides, size_t s) {
  if (slides.status[s] == kOtherPartStatus) return SlideOutcome::kOtherPart;
  if (slides.patch_count[s] > 0) return SlideOutcome::kPatches;
  if (slides.width[s] > 0 && is_without_patches(slides.reason[s])) return SlideOutcome::kEmpty;
  return SlideOutcome::kFailed;
}

std::string outcome_name(SlideOutcome outcome) {
  switch (outcome) {
    case SlideOutcome::kPatches: return "ok";
    case SlideOutcome::kEmpty: return "empty";
    case SlideOutcome::kFailed: return "failed";
    case SlideOutcome::kOtherPart: return "other_part";
  }
  return "failed";
}

SlideGeometry slide_geometry(const IndexInfo& info, size_t s, int64_t overlap) {
  const SlideTable& t = info.slides;
  SlideGeometry g;
  g.name = t.slide_id[s];
  g.patch_size = info.patch_size;
  g.overlap = overlap;
  g.level0_width = t.width[s];
  g.level0_height = t.height[s];
  g.level0_magnification = t.mpp_x[s] > 0 ? 10.0 / t.mpp_x[s] : 0.0;
  g.target_magnification = info.mpp > 0 ? 10.0 / info.mpp : 0.0;
  if (t.level[s] >= 0 && t.downsample[s] > 0) {
    g.patch_level = t.level[s];
    g.read_size = t.read_size[s];
    g.downsample = t.downsample[s];
  } else {
    g.patch_level = 0;
    g.downsample = t.mpp_x[s] > 0 ? info.mpp / t.mpp_x[s] : 0.0;
    g.read_size = std::llround(static_cast<double>(info.patch_size) * g.downsample);
  }
  g.patch_size_level0 = std::llround(static_cast<double>(info.patch_size) * g.downsample);
  return g;
}

std::vector<std::string> trident_coords_attribute_names() {
  return {"patch_size",   "patch_size_level0", "level0_magnification", "target_magnification",
          "overlap",      "level0_width",      "level0_height",        "name"};
}

namespace {

h5::Dataset write_coords(h5::File& f, const std::vector<int64_t>& xy) {
  h5::DatasetOptions o;
  o.chunk = {256, 2};
  h5::Dataset coords = f.create_appendable(embedding_names::kCoords, h5::Type::kInt64, {2}, o);
  if (!xy.empty()) coords.append(xy.data(), static_cast<hsize_t>(xy.size() / 2));
  return coords;
}

}  // namespace

CoordsAttributes trident_coords(const SlideGeometry& g) {
  CoordsAttributes a;
  a.patch_size = g.patch_size;
  a.patch_size_level0 = g.patch_size_level0;
  a.level0_magnification = g.level0_magnification;
  a.target_magnification = g.target_magnification;
  a.overlap = g.overlap;
  a.level0_width = g.level0_width;
  a.level0_height = g.level0_height;
  a.name = g.name;
  return a;
}

void write_trident_patch_file(const std::string& path, const std::vector<int64_t>& xy,
                              const SlideGeometry& g) {
  {
    h5::File f = h5::File::open(path + ".tmp", h5::Mode::kCreateTruncate);
    h5::Dataset coords = write_coords(f, xy);
    set_coords_attributes(coords, trident_coords(g));
    coords.close();
    f.close();
  }
  commit_file(path + ".tmp", path);
}

void write_clam_patch_file(const std::string& path, const std::vector<int64_t>& xy,
                           const SlideGeometry& g) {
  {
    h5::File f = h5::File::open(path + ".tmp", h5::Mode::kCreateTruncate);
    h5::Dataset coords = write_coords(f, xy);
    coords.set_attr("patch_size", g.read_size);
    coords.set_attr("patch_level", g.patch_level);
    coords.set_attr("downsample", g.read_size > 0 ? static_cast<double>(g.patch_size_level0) /
                                                        static_cast<double>(g.read_size)
                                                  : 0.0);
    coords.set_attr("name", g.name);
    coords.close();
    f.close();
  }
  commit_file(path + ".tmp", path);
}

void link_or_copy(const std::string& target, const std::string& link) {
  const std::string tmp = link + ".tmp";
  std::error_code ec;
  fs::remove(tmp, ec);
  if (::link(target.c_str(), tmp.c_str()) != 0) {
    const int err = errno;
    if (err != EXDEV && err != EPERM && err != ENOTSUP && err != EOPNOTSUPP && err != EMLINK) {
      fail<IoError>("cannot link '{}' to '{}': {}", tmp, target, std::strerror(err));
    }
    fs::copy_file(target, tmp, fs::copy_options::overwrite_existing, ec);
    if (ec) fail<IoError>("cannot copy '{}' to '{}': {}", target, tmp, ec.message());
  }
  commit_file(tmp, link);
}

std::string status_table_csv(const SlideTable& slides) {
  std::string out = csv_record({"slide_id", "status", "patches", "reason"});
  for (size_t s = 0; s < slides.size(); ++s) {
    const SlideOutcome o = slide_outcome(slides, s);
    if (o == SlideOutcome::kOtherPart) continue;
    out += csv_record({slides.slide_id[s], outcome_name(o), std::to_string(slides.patch_count[s]),
                       slides.reason[s]});
  }
  return out;
}

}  // namespace tessera::embed
