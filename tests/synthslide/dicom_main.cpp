#include "tests/synthslide/dicom_main.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>

#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "tests/synthslide/dicom_writer.h"

namespace po = boost::program_options;

namespace tessera::synth {

void add_dicom_options(po::options_description& options, DicomOptions& dicom) {
  // clang-format off
  options.add_options()
      ("format", po::value(&dicom.format)->default_value(dicom.format),
       "tiff, or dicom: a DICOM WSI series (one file per level) in the folder --out, the twin of "
       "the TIFF (same JPEG tiles, or the same pixels)")
      ("dicom-codec", po::value(&dicom.codec)->default_value(dicom.codec),
       "DICOM frames: jpeg (the TIFF's JPEG tiles), j2k (lossless JPEG 2000) or raw")
      ("dicom-organization", po::value(&dicom.organization)->default_value(dicom.organization),
       "full (TILED_FULL) or sparse (TILED_SPARSE, all-white tiles left out)")
      ("tiff-out", po::value(&dicom.tiff_out), "--format dicom: keep the TIFF twin here")
      ("dicom-no-spacing", po::bool_switch(&dicom.no_spacing),
       "--format dicom: no Pixel Measures (a converter's file)")
      ("dicom-no-organization", po::bool_switch(&dicom.no_organization),
       "--format dicom: no Dimension Organization Type (a converter's file)");
  // clang-format on
}

int run_dicom(SlideSpec spec, const DicomOptions& options) {
  namespace fs = std::filesystem;
  try {
    if (options.format != "dicom") {
      fail<InvalidInput>("invalid --format '{}' (expected tiff or dicom)", options.format);
    }
    if (options.organization != "full" && options.organization != "sparse") {
      fail<InvalidInput>("invalid --dicom-organization '{}' (expected full or sparse)",
                         options.organization);
    }
    DicomSpec dicom;
    dicom.dir = spec.path;
    dicom.codec = parse_dicom_codec(options.codec);
    dicom.sparse = options.organization == "sparse";
    dicom.write_spacing = !options.no_spacing;
    dicom.write_organization = !options.no_organization;
    const bool keep_tiff = !options.tiff_out.empty();
    spec.path = keep_tiff ? options.tiff_out
                          : fmt::format("{}.twin-{}.tiff", dicom.dir, ::getpid());
    const auto slide = write_slide(spec);
    DicomSummary summary;
    try {
      summary = write_dicom_series(spec, dicom);
    } catch (...) {
      std::error_code ignored;
      if (!keep_tiff) fs::remove(spec.path, ignored);
      throw;
    }
    std::error_code ignored;
    if (!keep_tiff) fs::remove(spec.path, ignored);
    spdlog::info("synthslide: wrote DICOM series '{}' {}x{} seed {}: {} levels, {} frames ({} "
                 "white tiles left out), codec {}, {}",
                 dicom.dir, spec.width, spec.height, spec.seed, summary.levels, summary.frames,
                 summary.omitted_tiles, options.codec, dicom.sparse ? "TILED_SPARSE" : "TILED_FULL");
    (void)slide;
    return kExitOk;
  } catch (const Error& e) {
    std::cerr << "synthslide: " << e.what() << "\n";
    return e.exit_code();
  }
}

}  // namespace tessera::synth
