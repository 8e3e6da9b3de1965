#include "stages/patchgen/config.h"

#include <cmath>
#include <map>

#include "common/core/options.h"
#include "common/core/error.h"

namespace tessera::patchgen {

namespace {

constexpr OptionKind kResult = OptionKind::kResult;
constexpr OptionKind kRunControl = OptionKind::kRunControl;
constexpr OptionKind kDebug = OptionKind::kDebug;

}  // namespace

OptionTable option_table() {
  OptionTable t;
  t.group("Input and output")
      ("manifest", kRunControl, po::value<std::string>()->default_value(""),
       "slide manifest CSV: slide_id,path[,patient_id][,mask_path][,mpp][,metadata...] (its "
       "content, not its path, is fingerprinted); or use --slides")
      ("slides", kRunControl, po::value<std::string>()->default_value(""),
       "instead of --manifest: every file of this directory ending in --ext is a slide, its id "
       "the file name without the extension (the stage directory gets the manifest.csv it makes)")
      ("ext", kRunControl, po::value<std::string>()->default_value(".svs"),
       "with --slides: file name endings to take, comma-separated (case-insensitive)")
      ("out", kRunControl, po::value<std::string>()->required(),
       "run directory (patchgen writes RUN/patchgen)")
      ("fail-fast", kRunControl, po::bool_switch(), "stop at the first failed slide (exit code 3)")
      ("reader", kRunControl, po::value<std::string>()->default_value("auto"),
       "how patches are read: direct (tiled JPEG TIFF and Aperio SVS decoded tile by tile, each "
       "tile once; other slides fail), openslide, or auto (direct where it can, else OpenSlide); "
       "the pixels are the same")
      ("tile-cache-mb", kRunControl, po::value<int64_t>()->default_value(0),
       "decoded tiles the direct reader keeps per rank, MiB (0: three tile rows of the slide, at "
       "most 512 MiB)")
      ("reader-threads", kRunControl, po::value<int>()->default_value(0),
       "threads per rank reading and decoding patches, sharing each slide and its tile cache, "
       "beside the thread writing the shard (0: as many as the rank's cores)")
      ("read-batch", kRunControl, po::value<int>()->default_value(16),
       "patches a reader thread reads before handing them to the writer (1..4096)")
      ("read-ahead", kRunControl, po::value<int>()->default_value(8),
       "batches read ahead of the writer, at most (1..4096; at least one per reader thread); "
       "memory: read-ahead x read-batch patches")
      ("progress-interval", kRunControl, value_with_default<double>(5.0),
       "seconds between progress reports of rank 0 (>= 0)");
  t.group("Patch grid")
      ("patch-size", kResult, po::value<int>()->default_value(224),
       "patch side in pixels at the target resolution")
      ("stride", kResult, po::value<int>()->default_value(0), "grid step in target pixels (0: patch size)")
      ("mpp", kResult, value_with_default<double>(0.5),
       "target resolution in micrometres per pixel")
      ("mag", kRunControl, value_with_default<double>(0.0),
       "target magnification instead of --mpp: sets mpp to 10/mag (20 = 0.5 um/px); 0: use --mpp")
      ("mpp-tolerance", kResult, value_with_default<double>(0.1),
       "relative tolerance within which a pyramid level counts as the target resolution")
      ("default-mpp", kResult, value_with_default<double>(0.0),
       "level-0 mpp for slides without resolution metadata (0: such slides fail)")
      ("min-tissue", kResult, value_with_default<double>(0.25),
       "minimum tissue fraction under a patch for it to be kept");
  t.group("Tissue detection (CLAM-like; ignored for slides with mask_path)")
      ("seg-downsample", kResult, value_with_default<double>(32.0),
       "detect on the pyramid level nearest this downsample")
      ("median-blur", kResult, po::value<int>()->default_value(7),
       "median filter size on saturation (odd)")
      ("threshold", kResult, po::value<int>()->default_value(-1),
       "saturation threshold 0..255, -1: Otsu")
      ("min-saturation", kResult, po::value<int>()->default_value(15),
       "lower bound of the Otsu threshold")
      ("close-kernel", kResult, po::value<int>()->default_value(4),
       "morphological closing size, 0: off")
      ("fill-holes", kResult, value_with_default<bool>(true), "fill holes inside tissue")
      ("min-area-um2", kResult, value_with_default<double>(10000.0),
       "drop tissue components smaller than this (level-0 square micrometres)")
      ("min-hole-area-um2", kResult, value_with_default<double>(50000.0),
       "keep holes larger than this as holes (0: fill all)");
  t.group("Patch store")
      ("encoding", kResult, po::value<std::string>()->default_value("raw"),
       "raw (uint8 pixels) or jpeg")
      ("jpeg-quality", kResult, po::value<int>()->default_value(90),
       "JPEG quality 1..100 (encoding jpeg)")
      ("compression", kResult, po::value<std::string>()->default_value("none"),
       "none, deflate (level 4) or deflate:1..9 (encoding raw)")
      ("chunk-patches", kResult, po::value<int>()->default_value(64),
       "patches per HDF5 chunk and write")
      ("partition", kResult, po::value<std::string>()->default_value("contiguous"),
       "how patches are split over ranks: contiguous (one run of patches per rank: each tile "
       "decoded and each plan read by about one rank), block-cyclic:B or cyclic")
      ("qc", kResult, value_with_default<bool>(true),
       "write a QC PNG and GeoJSON per slide and a cohort overview PNG");
  add_part_options(t);
  add_rerun_options(t, "replace existing outputs made with another configuration");
  add_fault_options(t, "patches written");
  return t;
}

void add_options(po::options_description& desc) { desc.add(option_table().description()); }

std::vector<std::string> slide_extensions(const std::string& ext) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= ext.size()) {
    size_t end = ext.find(',', begin);
    if (end == std::string::npos) end = ext.size();
    std::string item = ext.substr(begin, end - begin);
    const size_t b = item.find_first_not_of(" \t");
    const size_t e = item.find_last_not_of(" \t");
    item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    for (char& ch : item) {
      if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    }
    if (!item.empty()) out.push_back(item);
    begin = end + 1;
  }
  return out;
}

namespace {

template <typename T>
T get(const po::variables_map& v, const char* name) {
  return v[name].as<T>();
}

void require(bool ok, const char* option, const std::string& why) {
  if (!ok) fail<InvalidInput>("invalid --{}: {}", option, why);
}

std::string compression_text(int deflate_level) {
  return deflate_level == 0 ? "none" : fmt::format("deflate:{}", deflate_level);
}

// Every option's canonical value, from the validated Config.
std::map<std::string, std::string> option_values(const Config& c) {
  std::map<std::string, std::string> values = {
      {"manifest", c.manifest},
      {"slides", c.slides},
      {"ext", c.ext},
      // Normalised into mpp, so --mag 20 and --mpp 0.5 give the same config.ini and fingerprint.
      {"mag", ini_value(0.0)},
      {"out", c.out},
      {"fail-fast", ini_value(c.fail_fast)},
      {"reader", to_string(c.reader)},
      {"tile-cache-mb", ini_value(c.tile_cache_mb)},
      {"reader-threads", ini_value(c.reader_threads)},
      {"read-batch", ini_value(c.read_batch)},
      {"read-ahead", ini_value(c.read_ahead)},
      {"progress-interval", ini_value(c.progress_interval)},
      {"patch-size", ini_value(c.patch_size)},
      {"stride", ini_value(c.stride)},
      {"mpp", ini_value(c.mpp)},
      {"mpp-tolerance", ini_value(c.mpp_tolerance)},
      {"default-mpp", ini_value(c.default_mpp)},
      {"min-tissue", ini_value(c.min_tissue)},
      {"seg-downsample", ini_value(c.tissue.seg_downsample)},
      {"median-blur", ini_value(c.tissue.median_blur)},
      {"threshold", ini_value(c.tissue.threshold)},
      {"min-saturation", ini_value(c.tissue.min_saturation)},
      {"close-kernel", ini_value(c.tissue.close_kernel)},
      {"fill-holes", ini_value(c.tissue.fill_holes)},
      {"min-area-um2", ini_value(c.tissue.min_area_um2)},
      {"min-hole-area-um2", ini_value(c.tissue.min_hole_area_um2)},
      {"encoding", c.layout.encoding},
      {"jpeg-quality", ini_value(c.layout.jpeg_quality)},
      {"compression", compression_text(c.layout.deflate_level)},
      {"chunk-patches", ini_value(c.layout.chunk_patches)},
      {"partition", c.partition.to_string()},
      {"qc", ini_value(c.qc)},
  };
  stage_option_values(c.stage, true, values);
  return values;
}

}  // namespace

Config config_from(const po::variables_map& v) {
  Config c;
  c.manifest = get<std::string>(v, "manifest");
  c.out = get<std::string>(v, "out");
  c.slides = get<std::string>(v, "slides");
  c.ext = get<std::string>(v, "ext");
  c.stage = stage_options_from(v, slurm_array_environment());
  c.fail_fast = get<bool>(v, "fail-fast");
  c.reader = parse_slide_reader(get<std::string>(v, "reader"), "reader");
  c.tile_cache_mb = get<int64_t>(v, "tile-cache-mb");
  require(c.tile_cache_mb >= 0 && c.tile_cache_mb <= (int64_t{1} << 20), "tile-cache-mb",
          "must be 0..1048576 MiB (0: default)");
  c.reader_threads = get<int>(v, "reader-threads");
  require(c.reader_threads >= 0 && c.reader_threads <= 1024, "reader-threads",
          "must be 0..1024 (0: the rank's cores)");
  c.read_batch = get<int>(v, "read-batch");
  require(c.read_batch >= 1 && c.read_batch <= 4096, "read-batch", "must be 1..4096");
  c.read_ahead = get<int>(v, "read-ahead");
  require(c.read_ahead >= 1 && c.read_ahead <= 4096, "read-ahead", "must be 1..4096");
  c.progress_interval = get<double>(v, "progress-interval");
  c.patch_size = get<int>(v, "patch-size");
  c.stride = get<int>(v, "stride");
  c.mpp = get<double>(v, "mpp");
  c.mpp_tolerance = get<double>(v, "mpp-tolerance");
  c.default_mpp = get<double>(v, "default-mpp");
  c.min_tissue = get<double>(v, "min-tissue");
  c.tissue.seg_downsample = get<double>(v, "seg-downsample");
  c.tissue.median_blur = get<int>(v, "median-blur");
  c.tissue.threshold = get<int>(v, "threshold");
  c.tissue.min_saturation = get<int>(v, "min-saturation");
  c.tissue.close_kernel = get<int>(v, "close-kernel");
  c.tissue.fill_holes = get<bool>(v, "fill-holes");
  c.tissue.min_area_um2 = get<double>(v, "min-area-um2");
  c.tissue.min_hole_area_um2 = get<double>(v, "min-hole-area-um2");
  c.layout.patch_size = c.patch_size;
  c.layout.mpp = c.mpp;
  c.layout.encoding = get<std::string>(v, "encoding");
  c.layout.jpeg_quality = get<int>(v, "jpeg-quality");
  c.layout.deflate_level = parse_compression(get<std::string>(v, "compression"));
  c.layout.chunk_patches = get<int>(v, "chunk-patches");
  c.partition = Partition::Spec::parse(get<std::string>(v, "partition"), "partition");
  c.qc = get<bool>(v, "qc");
  c.stage.faults = faults_from(v);

  require(c.patch_size >= 8 && c.patch_size <= 4096, "patch-size", "must be in 8..4096");
  require(c.stride >= 0 && c.stride <= 65536, "stride", "must be in 0..65536 (0: patch size)");
  if (c.stride == 0) c.stride = c.patch_size;
  require(std::isfinite(c.progress_interval) && c.progress_interval >= 0, "progress-interval",
          "must be >= 0 seconds");
  require(c.manifest.empty() != c.slides.empty(), "manifest",
          "give exactly one of --manifest FILE.csv and --slides DIR");
  require(c.slides.empty() || !slide_extensions(c.ext).empty(), "ext",
          "needs at least one file name ending, e.g. .svs");
  const double mag = get<double>(v, "mag");
  require(std::isfinite(mag) && mag >= 0 && mag <= 1000, "mag", "must be in 0..1000 (0: use --mpp)");
  if (mag > 0) {
    require(v["mpp"].defaulted() || get<double>(v, "mpp") == 10.0 / mag, "mag",
            "conflicts with --mpp; give one of them");
    c.mpp = 10.0 / mag;
    c.layout.mpp = c.mpp;
  }
  require(std::isfinite(c.mpp) && c.mpp > 0, "mpp", "must be positive");
  require(c.mpp_tolerance >= 0 && c.mpp_tolerance < 1, "mpp-tolerance", "must be in [0, 1)");
  require(std::isfinite(c.default_mpp) && c.default_mpp >= 0, "default-mpp", "must be >= 0");
  require(c.min_tissue >= 0 && c.min_tissue <= 1, "min-tissue", "must be in [0, 1]");
  require(c.tissue.seg_downsample >= 1, "seg-downsample", "must be >= 1");
  require(c.tissue.median_blur >= 1 && c.tissue.median_blur % 2 == 1, "median-blur",
          "must be odd and >= 1");
  require(c.tissue.threshold >= -1 && c.tissue.threshold <= 255, "threshold", "must be -1..255");
  require(c.tissue.min_saturation >= 0 && c.tissue.min_saturation <= 255, "min-saturation",
          "must be 0..255");
  require(c.tissue.close_kernel >= 0, "close-kernel", "must be >= 0");
  require(std::isfinite(c.tissue.seg_downsample), "seg-downsample", "must be finite");
  require(std::isfinite(c.tissue.min_area_um2) && c.tissue.min_area_um2 >= 0, "min-area-um2",
          "must be >= 0");
  require(std::isfinite(c.tissue.min_hole_area_um2) && c.tissue.min_hole_area_um2 >= 0,
          "min-hole-area-um2", "must be >= 0");
  require(c.layout.encoding == "raw" || c.layout.encoding == "jpeg", "encoding",
          "expected raw or jpeg");
  require(c.layout.jpeg_quality >= 1 && c.layout.jpeg_quality <= 100, "jpeg-quality",
          "must be 1..100");
  require(c.layout.encoding == "raw" || c.layout.deflate_level == 0, "compression",
          "applies to raw encoding only");
  require(c.layout.chunk_patches >= 1 && c.layout.chunk_patches <= 4096, "chunk-patches",
          "must be 1..4096");

  const OptionTable table = option_table();
  const auto values = option_values(c);
  c.config_ini = table.config_ini(values);
  c.fingerprint_ini = table.fingerprint_ini(values);
  return c;
}

}  // namespace tessera::patchgen
