// patchgen_bench's run (main.cpp): the slide and its DICOM twin, and one repetition of every mode
// (patchgen with each reader, the OpenSlide loop, the decode limit), each timed between barriers.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "benchmarks/patchgen/options.h"
#include "common/mpi/comm.h"
#include "stages/patchgen/config.h"

namespace tessera::patchgen::driver {

// Rank 0 only: generates the slide when missing.
nlohmann::json ensure_slide(const BenchOptions& o);
// Rank 0 only: writes the slide's DICOM twin when missing (from the TIFF's tiles, so the same
// pixels: tests/synthslide/dicom_writer.h).
nlohmann::json ensure_dicom(const BenchOptions& o);
// The slide's size, levels and vendor as OpenSlide reads them.
nlohmann::json slide_info(const std::string& path);

// Collective. One repetition: the plan (timed), then the four modes in an order rotated by the
// repetition's index.
// `grid` receives the plan's level, read size and patch count.
nlohmann::json repetition(int index, const std::vector<std::string>& modes, const Config& config,
                          const Config& openslide_config, const Config& dicom_config,
                          const std::string& qc_dir, const std::string& slide_path,
                          const std::string& cache, Comm& comm, nlohmann::json* grid);

}  // namespace tessera::patchgen::driver
