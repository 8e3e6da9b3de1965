#include "tests/inprocess/support.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/core/error.h"
#include "common/core/log.h"
#include "common/h5/h5.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::inprocess {

ScratchDir::ScratchDir(const std::string& name)
    : path_(fs::temp_directory_path() / fmt::format("tessera_{}_{}", name, ::getpid())) {
  fs::remove_all(path_);
  fs::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  const char* keep = std::getenv("TESSERA_KEEP_TEST_DIRS");
  if (keep != nullptr && *keep != '\0') return;
  if (!::testing::UnitTest::GetInstance()->Failed()) {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
}

void log_with_rank_tags(const std::string& level) { init_logging(0, 1, level); }

std::string write_cohort(const std::string& dir) {
  for (int i = 0; i < 3; ++i) {
    synth::SlideSpec spec;
    spec.path = (fs::path(dir) / fmt::format("s{}.tif", i)).string();
    spec.width = 700 + 100 * i;
    spec.height = 600;
    spec.seed = 90 + i;
    spec.mpp = 0.5;
    synth::write_slide(spec);
  }
  const std::string manifest = (fs::path(dir) / "m.csv").string();
  std::ofstream(manifest) << "slide_id,path,patient_id,site\n"
                             "a,s0.tif,P1,lung\n"
                             "b,s1.tif,P1,colon\n"
                             "c,s2.tif,P2,lung\n";
  return manifest;
}

std::vector<int> exit_codes(const std::vector<RankOutcome>& outcomes) {
  std::vector<int> codes;
  for (const auto& o : outcomes) codes.push_back(o.exit_code);
  return codes;
}

std::string what_of(const RankOutcome& outcome) {
  if (!outcome.error) return "";
  try {
    std::rethrow_exception(outcome.error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

std::string describe(const std::vector<RankOutcome>& outcomes) {
  std::string text;
  for (size_t r = 0; r < outcomes.size(); ++r) {
    if (outcomes[r].error) {
      text += fmt::format("rank {} (exit {}): {}\n", r, outcomes[r].exit_code,
                          what_of(outcomes[r]));
    }
  }
  return text;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

namespace {

void complement(const std::string& path, std::streamoff at, size_t n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  if (!f) fail<IoError>("cannot open '{}' to damage it", path);
  std::string bytes(n, '\0');
  f.seekg(at);
  f.read(bytes.data(), static_cast<std::streamsize>(n));
  for (char& c : bytes) c = static_cast<char>(~c);
  f.seekp(at);
  f.write(bytes.data(), static_cast<std::streamsize>(n));
  if (!f) fail<IoError>("cannot damage '{}'", path);
}

}  // namespace

void damage_last_chunk(const std::string& path, const std::string& dataset) {
  haddr_t address = HADDR_UNDEF;
  {
    const h5::File file = h5::File::open(path, h5::Mode::kRead);
    const h5::Dataset d = file.open_dataset(dataset);
    const hid_t space = H5Dget_space(d.id());
    hsize_t chunks = 0;
    const herr_t rc = H5Dget_num_chunks(d.id(), space, &chunks);
    if (rc >= 0 && chunks > 0) {
      hsize_t size = 0;
      unsigned mask = 0;
      std::vector<hsize_t> offset(d.dims().size());
      H5Dget_chunk_info(d.id(), space, chunks - 1, offset.data(), &mask, &address, &size);
    }
    H5Sclose(space);
  }
  if (address == HADDR_UNDEF) fail<IoError>("'{}' has no stored chunk of '{}'", path, dataset);
  complement(path, static_cast<std::streamoff>(address), 16);
}

void damage_middle(const std::string& path, size_t n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  if (!f) fail<IoError>("cannot open '{}' to damage it", path);
  f.seekg(0, std::ios::end);
  const auto size = static_cast<size_t>(f.tellg());
  if (size < 2 * n) fail<IoError>("'{}' is too small ({} bytes) to damage {} bytes", path, size, n);
  std::string bytes(n, '\0');
  const auto at = static_cast<std::streamoff>(size / 2 - n / 2);
  f.seekg(at);
  f.read(bytes.data(), static_cast<std::streamsize>(n));
  for (char& c : bytes) c = static_cast<char>(~c);
  f.seekp(at);
  f.write(bytes.data(), static_cast<std::streamsize>(n));
  if (!f) fail<IoError>("cannot damage '{}'", path);
}

}  // namespace tessera::inprocess
