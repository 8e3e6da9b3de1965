// synthslide's --format dicom: its options and what it runs (kept apart from main.cpp).
#pragma once

#include <string>

#include <boost/program_options.hpp>

#include "tests/synthslide/synthslide.h"

namespace tessera::synth {

struct DicomOptions {
  std::string format = "tiff";  // "tiff" or "dicom"
  std::string codec = "jpeg";
  std::string organization = "full";
  std::string tiff_out;         // keep the TIFF twin here; "" = a temporary file
  bool no_spacing = false;
  bool no_organization = false;
};

void add_dicom_options(boost::program_options::options_description& options, DicomOptions& dicom);

// Writes the TIFF twin (dicom.tiff_out or a temporary file) then the DICOM series into the folder
// spec.path. Returns the exit code; errors are printed.
int run_dicom(SlideSpec spec, const DicomOptions& dicom);

}  // namespace tessera::synth
