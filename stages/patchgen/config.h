// patchgen's configuration: the option table (command line and INI file share it) and the typed
// Config that run() takes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/core/options_fwd.h"
#include "common/slide/slide.h"
#include "common/stage/partition.h"
#include "common/stage/stage_options.h"
#include "common/store/store.h"
#include "stages/patchgen/tissue.h"

namespace tessera::patchgen {

struct Config {
  std::string manifest;           // "" with slides
  std::string slides;            // slide directory instead of a manifest ("" with manifest)
  std::string ext = ".svs";      // with slides: comma-separated file name endings
  std::string out;               // run directory; patchgen writes RUN/patchgen/
  int patch_size = 224;
  int stride = 0;                // 0: patch_size
  double mpp = 0.5;              // --mag M is normalised into mpp = 10 / M
  double mpp_tolerance = 0.1;
  double default_mpp = 0;        // 0: none; slides without resolution fail
  double min_tissue = 0.25;
  TissueParams tissue;
  Partition::Spec partition;     // of the global patch list over ranks; contiguous by default
  StoreLayout layout;
  bool qc = true;
  StageOptions stage;            // part/parts, verify, file locking, overwrite
  bool fail_fast = false;
  SlideReader reader = SlideReader::kAuto;  // how extraction reads patches (same pixels)
  int64_t tile_cache_mb = 0;     // the direct reader's decoded-tile cache per rank (0: default)
  int reader_threads = 0;        // threads reading patches per rank (0: the rank's cores)
  int read_batch = 16;           // patches per batch a reader thread hands to the writer
  int read_ahead = 8;            // batches read ahead of the writer (bounds memory)
  double progress_interval = 5;
  // Rendered from the validated fields above, so equivalent spellings (--stride 0 and
  // --stride 224, --compression deflate and deflate:4) give the same text.
  std::string config_ini;        // kResult and kRunControl options: feeding it back through
                                 // --config reproduces this Config
  std::string fingerprint_ini;   // kResult options only: what the outputs depend on
};

// Every patchgen option with its default, help and kind (result-affecting, run control or debug).
OptionTable option_table();

// Adds option_table()'s options to `desc` (for drivers that parse patchgen's options along with
// their own).
void add_options(po::options_description& desc);

// Builds a Config from parsed options. Throws InvalidInput naming the option for values out of
// range (patch size, stride, mpp, mag, tissue parameters, encoding, compression, progress
// interval), for neither or both of --manifest and --slides, and for --mag with a different --mpp.
// --mag M sets mpp = 10 / M and is rendered as 0 in config_ini and fingerprint_ini, so the two
// spellings of one resolution give identical configurations.
Config config_from(const po::variables_map& values);

// The lowercased, trimmed, non-empty items of a comma-separated --ext value.
std::vector<std::string> slide_extensions(const std::string& ext);

// The usage line for --help.
inline constexpr const char* kUsage = "mpirun -np R patchgen (--manifest FILE.csv | --slides DIR [--ext .svs]) --out RUN [options]";

}  // namespace tessera::patchgen
