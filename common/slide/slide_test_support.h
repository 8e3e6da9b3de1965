// What the slide library's unit tests share: the real slide files of tests/fixtures, and one
// scratch folder per test program for the slides they generate.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace tessera::slide_test {

// The openslide-python fixtures (tests/fixtures/openslide-python/), ending in '/'.
inline const std::string kFixtures = std::string(TESSERA_FIXTURES_DIR) + "/openslide-python/";

// This process's scratch folder (created on first use, removed when the program ends).
inline std::filesystem::path scratch_dir() {
  static const struct Dir {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("tessera_slide_unit_test_" + std::to_string(::getpid()));
    Dir() { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } dir;
  return dir.path;
}

}  // namespace tessera::slide_test
