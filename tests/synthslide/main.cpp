// synthslide: writes a synthetic pyramidal H&E slide (and optionally its tissue mask).
#include <boost/program_options.hpp>
#include <spdlog/spdlog.h>

#include <iostream>

#include "common/core/error.h"
#include "common/core/options.h"
#include "tests/synthslide/dicom_main.h"
#include "tests/synthslide/synthslide.h"
#include "tests/synthslide/tissue_classes.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  tessera::synth::SlideSpec spec;
  tessera::synth::DicomOptions dicom;
  po::options_description options("synthslide: write a synthetic pyramidal tiled JPEG TIFF slide");
  // clang-format off
  options.add_options()
      ("help", "print this help")
      ("version", "print the version and git revision")
      ("out", po::value(&spec.path)->required(), "output TIFF path")
      ("width", po::value(&spec.width)->required(), "level-0 width in pixels")
      ("height", po::value(&spec.height)->required(), "level-0 height in pixels")
      ("seed", po::value(&spec.seed)->required(), "random seed (same seed, same bytes)")
      ("mpp", po::value(&spec.mpp)->default_value(spec.mpp), "microns per level-0 pixel")
      ("mask-out", po::value(&spec.mask_path), "write the ground-truth tissue mask PNG here")
      ("mask-downsample", po::value(&spec.mask_downsample)->default_value(spec.mask_downsample),
       "level-0 pixels per mask pixel")
      ("tissue-fraction",
       po::value(&spec.tissue_fraction)->default_value(spec.tissue_fraction, "0.35"),
       "approximate share of the area covered by tissue (0: blank slide)")
      ("tile-size", po::value(&spec.tile_size)->default_value(spec.tile_size), "TIFF tile size")
      ("jpeg-quality", po::value(&spec.jpeg_quality)->default_value(spec.jpeg_quality),
       "JPEG quality 1..100")
      ("no-resolution", po::bool_switch(), "write no resolution tags (a slide without mpp)")
      ("tissue-classes", po::value<std::string>(),
       "labelled tissue: regions by class, e.g. tumour:4,stroma:1,fat:1 (tumour, stroma, fat, "
       "necrosis)")
      ("class-mask-out", po::value(&spec.class_mask_path),
       "write the class mask PNG here (class id 1..4 per mask pixel, 0 background)");
  tessera::synth::add_dicom_options(options, dicom);
  // clang-format on
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, options), vm);
    if (vm.count("help")) {
      std::cout << options << "\n";
      return tessera::kExitOk;
    }
    if (vm.count("version")) {
      std::cout << tessera::version_text("synthslide");
      return tessera::kExitOk;
    }
    po::notify(vm);
    spec.write_resolution = !vm["no-resolution"].as<bool>();
    if (vm.count("tissue-classes")) {
      spec.region_classes =
          tessera::synth::parse_region_classes(vm["tissue-classes"].as<std::string>());
    }
  } catch (const tessera::InvalidInput& e) {
    std::cerr << "synthslide: " << e.what() << "\n";
    return tessera::kExitBadInput;
  } catch (const po::error& e) {
    std::cerr << "synthslide: " << e.what() << "\n" << options << "\n";
    return tessera::kExitBadInput;
  }
  try {
    if (dicom.format != "tiff") return tessera::synth::run_dicom(spec, dicom);
    const auto summary = tessera::synth::write_slide(spec);
    spdlog::info("synthslide: wrote '{}' {}x{} seed {}: {} levels, tissue {:.3f}, {} bytes{}",
                 spec.path, spec.width, spec.height, spec.seed, summary.level_dims.size(),
                 summary.tissue_fraction_actual, summary.bytes,
                 summary.bigtiff ? " (BigTIFF)" : "");
    return tessera::kExitOk;
  } catch (const tessera::Error& e) {
    std::cerr << "synthslide: " << e.what() << "\n";
    return e.exit_code();
  }
}
