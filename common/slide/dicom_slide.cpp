#include "common/slide/dicom_slide.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/slide/dicom_instance.h"
#include "common/slide/dicom_scan.h"

namespace tessera {

namespace {

// The most tiles one DICOM level may have: 2^24, 16.7 million (a 250,000 x 150,000 pixel slide in
// 128-pixel tiles has 2.3 million); its tile table takes 16 bytes a tile.
constexpr int64_t kMaxDicomTiles = int64_t{1} << 24;

namespace fs = std::filesystem;

constexpr const char* kJpegBaseline = "1.2.840.10008.1.2.4.50";
constexpr const char* kJ2kLossless = "1.2.840.10008.1.2.4.90";
constexpr const char* kJ2k = "1.2.840.10008.1.2.4.91";
constexpr const char* kExplicitLittle = "1.2.840.10008.1.2.1";

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  fail<IoError>("cannot open slide '{}' (DICOM): {}", path, why);
}

// The level `in` makes, its frames' byte ranges found in the file (for a joined concatenation, in
// its parts' files, numbered from `file_index` on).
TileLevel make_level(const std::string& path, const DicomInstance& in, int file_index) {
  if (in.samples != 3 || in.bits != 8) {
    refuse(path, fmt::format("'{}' has {} sample(s) per pixel of {} bits: brightfield RGB only "
                             "(8 bits, 3 samples)",
                             in.file, in.samples, in.bits));
  }
  if (in.total_w <= 0 || in.total_h <= 0 || in.tile_w <= 0 || in.tile_h <= 0 || in.frames <= 0) {
    refuse(path, fmt::format("'{}' lacks Total Pixel Matrix, Rows/Columns or frames ({}x{}, "
                             "frames {}x{}, {} frames)",
                             in.file, in.total_w, in.total_h, in.tile_w, in.tile_h, in.frames));
  }
  TileLevel level;
  level.width = in.total_w;
  level.height = in.total_h;
  level.tile_w = static_cast<int>(in.tile_w);
  level.tile_h = static_cast<int>(in.tile_h);
  level.cols = (in.total_w - 1) / in.tile_w + 1;
  level.rows = (in.total_h - 1) / in.tile_h + 1;
  level.file = file_index;
  if (in.transfer == kJpegBaseline) {
    level.codec = TileCodec::kJpeg;
    if (in.photometric != "RGB" && in.photometric.rfind("YBR_FULL", 0) != 0) {
      refuse(path, fmt::format("'{}': JPEG frames with photometric interpretation '{}'", in.file,
                               in.photometric));
    }
    level.jpeg_rgb = in.photometric == "RGB";
  } else if (in.transfer == kJ2kLossless || in.transfer == kJ2k) {
    level.codec = TileCodec::kJpeg2000;
  } else if (in.transfer == kExplicitLittle) {
    level.codec = TileCodec::kRaw;
    if (in.photometric != "RGB" || in.planar != 0) {
      refuse(path, fmt::format("'{}': uncompressed frames in '{}', planar configuration {} (only "
                               "interleaved RGB is read)",
                               in.file, in.photometric, in.planar));
    }
  } else {
    refuse(path, fmt::format("'{}' uses transfer syntax {}, which the reader does not take "
                             "(supported: JPEG baseline, JPEG 2000, explicit VR little endian); "
                             "transcode it, e.g. with dcmdjpeg or dcmcjpeg",
                             in.file, dicom_uid_name(in.transfer)));
  }
  // The tile table is allocated by the grid the header claims (16 bytes a tile): a grid larger
  // than any slide's is refused before it is, as a TILED_FULL level without a frame per tile.
  // Compared before multiplying: 4294967295^2 1x1 tiles wrap an int64.
  if (level.cols > kMaxDicomTiles / level.rows) {
    refuse(path, fmt::format("'{}' claims a {}x{} pixel matrix in {}x{} tiles, {}x{} tiles: more "
                             "than the {} a level may have",
                             in.file, in.total_w, in.total_h, in.tile_w, in.tile_h, level.cols,
                             level.rows, kMaxDicomTiles));
  }
  const int64_t grid = level.cols * level.rows;
  const int64_t planes = in.focal_planes * in.optical_paths;  // at most 2^48 (check_claims)
  std::string organization = in.organization;
  if (organization.empty()) {
    const bool every_plane = in.frames % planes == 0 && in.frames / planes == grid;
    if (every_plane || (in.frames == grid && in.positions.empty())) {
      organization = "TILED_FULL";
    } else if (!in.positions.empty()) {
      organization = "TILED_SPARSE";
    } else {
      refuse(path, fmt::format("'{}' has no Dimension Organization Type, {} frames for a grid of "
                               "{}x{} tiles and no frame positions",
                               in.file, in.frames, level.cols, level.rows));
    }
  }
  const uint64_t frame_bytes = static_cast<uint64_t>(in.tile_w) * in.tile_h * 3;
  DicomFrames frames;
  std::vector<int> frame_file;  // per frame, for a concatenation
  try {
    if (in.part_files.empty()) {
      frames = locate_frames(in.file, in.frames, frame_bytes);
    } else {
      for (size_t k = 0; k < in.part_files.size(); ++k) {
        const DicomFrames part = locate_frames(in.part_files[k], in.part_frames[k], frame_bytes);
        frames.offsets.insert(frames.offsets.end(), part.offsets.begin(), part.offsets.end());
        frames.sizes.insert(frames.sizes.end(), part.sizes.begin(), part.sizes.end());
        frame_file.insert(frame_file.end(), part.offsets.size(), file_index + static_cast<int>(k));
      }
    }
  } catch (const IoError& e) {
    refuse(path, e.what());
  }
  if (organization == "TILED_FULL" && in.frames < grid) {
    refuse(path, fmt::format("'{}' is TILED_FULL with {} frames for a grid of {}x{} tiles",
                             in.file, in.frames, level.cols, level.rows));
  }
  level.offsets.assign(static_cast<size_t>(grid), 0);
  level.sizes.assign(static_cast<size_t>(grid), 0);
  if (!frame_file.empty()) level.tile_files.assign(static_cast<size_t>(grid), file_index);
  if (organization == "TILED_FULL") {
    if (planes > 1) {
      spdlog::info("DICOM slide '{}': '{}' holds {} focal plane(s) and {} optical path(s); "
                   "reading the first of each",
                   path, in.file, in.focal_planes, in.optical_paths);
    }
    std::copy(frames.offsets.begin(), frames.offsets.begin() + grid, level.offsets.begin());
    std::copy(frames.sizes.begin(), frames.sizes.begin() + grid, level.sizes.begin());
    if (!frame_file.empty()) {
      std::copy(frame_file.begin(), frame_file.begin() + grid, level.tile_files.begin());
    }
  } else if (organization == "TILED_SPARSE") {
    if (static_cast<int64_t>(in.positions.size()) != in.frames) {
      refuse(path, fmt::format("'{}' is TILED_SPARSE with {} frames but {} frame positions",
                               in.file, in.frames, in.positions.size()));
    }
    int64_t skipped = 0;
    for (int64_t f = 0; f < in.frames; ++f) {
      if (!in.first_plane[f]) {
        ++skipped;
        continue;
      }
      const auto [c1, r1] = in.positions[f];
      if (c1 < 1 || r1 < 1 || (c1 - 1) % in.tile_w != 0 || (r1 - 1) % in.tile_h != 0 ||
          c1 > in.total_w || r1 > in.total_h) {
        refuse(path, fmt::format("'{}': frame {} at column {}, row {} is not on the {}x{} tile grid",
                                 in.file, f + 1, c1, r1, in.tile_w, in.tile_h));
      }
      const int64_t t = ((r1 - 1) / in.tile_h) * level.cols + (c1 - 1) / in.tile_w;
      if (level.sizes[t] != 0) continue;  // a second frame at one position: the first is kept
      level.offsets[t] = frames.offsets[f];
      level.sizes[t] = frames.sizes[f];
      if (!frame_file.empty()) level.tile_files[t] = frame_file[f];
    }
    if (skipped > 0) {
      spdlog::info("DICOM slide '{}': '{}': {} frame(s) of other focal planes or optical paths "
                   "skipped; reading the first",
                   path, in.file, skipped);
    }
  } else {
    refuse(path, fmt::format("'{}' has Dimension Organization Type '{}' (TILED_FULL or "
                             "TILED_SPARSE are read)",
                             in.file, organization));
  }
  return level;
}

bool has_dicom_magic(const std::string& file) {
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (f == nullptr) return false;
  char head[132] = {};
  const size_t n = std::fread(head, 1, sizeof head, f);
  std::fclose(f);
  return n == sizeof head && std::memcmp(head + 128, "DICM", 4) == 0;
}

}  // namespace

bool is_dicom_path(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return true;
  return has_dicom_magic(path);
}

DicomSlide open_dicom_slide(const std::string& path, size_t cache_bytes) {
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || name[0] == '.' || !entry.is_regular_file()) continue;
      if (has_dicom_magic(entry.path().string())) files.push_back(entry.path().string());
    }
    if (ec) refuse(path, fmt::format("cannot list the folder: {}", ec.message()));
    std::sort(files.begin(), files.end());
    if (files.empty()) refuse(path, "the folder holds no DICOM file (none starts with 'DICM' at byte 128)");
  } else {
    files.push_back(path);
  }
  std::vector<DicomInstance> instances;
  for (const std::string& file : files) {
    try {
      instances.push_back(read_dicom_instance(file));
    } catch (const IoError& e) {
      refuse(path, e.what());
    }
  }
  std::set<std::string> series;
  for (const DicomInstance& in : instances) series.insert(in.series);
  if (series.size() > 1) {
    refuse(path, fmt::format("the folder holds {} series; a slide is one series (one folder per "
                             "slide)",
                             series.size()));
  }

  std::vector<const DicomInstance*> volumes;
  for (const DicomInstance& in : instances) {
    if (in.flavor == "LABEL" || in.flavor == "OVERVIEW" || in.flavor == "THUMBNAIL") {
      spdlog::debug("DICOM slide '{}': '{}' is a {} image, not a level", path, in.file, in.flavor);
      continue;
    }
    volumes.push_back(&in);
  }
  if (volumes.empty()) {
    refuse(path, fmt::format("no pyramid level: the {} instance(s) are label, overview or "
                             "thumbnail images only",
                             instances.size()));
  }
  // Concatenations: all parts present are joined into one instance, in frame order.
  std::vector<DicomInstance> joined;
  joined.reserve(volumes.size());
  std::set<std::string> done;
  std::vector<const DicomInstance*> levels_in;
  for (const DicomInstance* in : volumes) {
    if (in->concatenation.empty()) {
      levels_in.push_back(in);
      continue;
    }
    if (!done.insert(in->concatenation).second) continue;
    std::vector<const DicomInstance*> parts;
    for (const DicomInstance* o : volumes) {
      if (o->concatenation == in->concatenation) parts.push_back(o);
    }
    if (static_cast<int64_t>(parts.size()) < in->concatenation_total) {
      refuse(path, fmt::format("'{}' is one part of a concatenation split over {} files, of which "
                               "{} are here; put all parts in the slide's folder",
                               in->file, in->concatenation_total, parts.size()));
    }
    std::sort(parts.begin(), parts.end(), [](const DicomInstance* a, const DicomInstance* b) {
      return a->concatenation_frame_offset < b->concatenation_frame_offset;
    });
    DicomInstance whole = *parts.front();
    whole.frames = 0;
    whole.positions.clear();
    whole.first_plane.clear();
    for (const DicomInstance* part : parts) {
      if (part->concatenation_frame_offset != whole.frames || part->transfer != whole.transfer ||
          part->total_w != whole.total_w || part->total_h != whole.total_h ||
          part->positions.empty() != parts.front()->positions.empty()) {
        refuse(path, fmt::format("concatenation {}: part '{}' does not continue the others (frame "
                                 "offset {}, expected {}, or another pixel format)",
                                 in->concatenation, part->file, part->concatenation_frame_offset,
                                 whole.frames));
      }
      whole.part_files.push_back(part->file);
      whole.part_frames.push_back(part->frames);
      whole.frames += part->frames;
      whole.positions.insert(whole.positions.end(), part->positions.begin(), part->positions.end());
      whole.first_plane.insert(whole.first_plane.end(), part->first_plane.begin(),
                               part->first_plane.end());
    }
    spdlog::info("DICOM slide '{}': concatenation of {} files joined into one level ({} frames)",
                 path, parts.size(), whole.frames);
    joined.push_back(std::move(whole));
    levels_in.push_back(&joined.back());
  }
  volumes = std::move(levels_in);
  std::stable_sort(volumes.begin(), volumes.end(), [](const DicomInstance* a, const DicomInstance* b) {
    // At most (2^32 - 1)^2 each (check_claims): unsigned, the products do not wrap.
    return static_cast<uint64_t>(a->total_w) * static_cast<uint64_t>(a->total_h) >
           static_cast<uint64_t>(b->total_w) * static_cast<uint64_t>(b->total_h);
  });

  DicomSlide slide;
  std::vector<TileLevel> levels;
  std::vector<std::string> level_files;
  std::string level_list;
  for (const DicomInstance* in : volumes) {
    if (!slide.dims.empty() && slide.dims.back() == std::make_pair(in->total_w, in->total_h)) {
      spdlog::info("DICOM slide '{}': '{}' repeats level {} ({}x{}), another focal plane or "
                   "optical path; skipped",
                   path, in->file, slide.dims.size() - 1, in->total_w, in->total_h);
      continue;
    }
    levels.push_back(make_level(path, *in, static_cast<int>(level_files.size())));
    if (in->part_files.empty()) {
      level_files.push_back(in->file);
    } else {
      level_files.insert(level_files.end(), in->part_files.begin(), in->part_files.end());
    }
    slide.dims.emplace_back(in->total_w, in->total_h);
    level_list += (level_list.empty() ? "" : ";") + fs::path(in->file).filename().string();
  }
  const auto [w0, h0] = slide.dims.front();
  for (const auto& [w, h] : slide.dims) {
    slide.downsamples.push_back((static_cast<double>(w0) / w + static_cast<double>(h0) / h) / 2);
  }
  const DicomInstance& base = *volumes.front();
  slide.properties["openslide.vendor"] = "dicom";
  slide.properties["dicom.series-uid"] = base.series;
  slide.properties["dicom.transfer-syntax"] = dicom_uid_name(base.transfer);
  slide.properties["dicom.dimension-organization"] = base.organization;
  slide.properties["dicom.level-files"] = level_list;
  if (base.spacing_row_mm > 0 && base.spacing_col_mm > 0) {
    slide.properties["openslide.mpp-x"] = fmt::format("{}", base.spacing_col_mm * 1000.0);
    slide.properties["openslide.mpp-y"] = fmt::format("{}", base.spacing_row_mm * 1000.0);
  }
  std::string why;
  slide.reader = TileReader::from_levels(path, level_files, std::move(levels), cache_bytes, &why);
  if (!slide.reader) refuse(path, why);
  spdlog::debug("DICOM slide '{}': {} level(s) from {}", path, slide.dims.size(), level_list);
  return slide;
}

}  // namespace tessera
