#include "stages/query/output.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/stage/layout.h"
#include "common/vector/catalog.h"

namespace tessera::query {

namespace fs = std::filesystem;

namespace {

// Files whose folder is a stage directory or an index.
constexpr std::array<const char*, 3> kStageFiles = {kRunFile, kCatalogFile, kSuccessFile};

}  // namespace

void check_output_path(const std::string& option, const std::string& path,
                       const std::string& index_dir) {
  std::error_code ec;
  const fs::path given(path);
  fs::path parent = given.parent_path();
  if (parent.empty()) parent = ".";
  if (!fs::is_directory(parent, ec)) {
    fail<InvalidInput>("invalid {}: the directory '{}' of '{}' does not exist (query creates no "
                       "directories)",
                       option, parent.string(), path);
  }
  if (fs::is_directory(given, ec)) {
    fail<InvalidInput>("invalid {}: '{}' is a directory; give a file name", option, path);
  }
  // The file is replaced by a rename: a link, a device or a pipe under the name would be replaced
  // (as root, /dev/full or /dev/stdout by a regular file), not written.
  const fs::file_status link = fs::symlink_status(given, ec);
  if (!ec && fs::is_symlink(link)) {
    fail<InvalidInput>("invalid {}: '{}' is a symbolic link, which query would replace; give the "
                       "file it points to",
                       option, path);
  }
  if (!ec && fs::exists(link) && !fs::is_regular_file(link)) {
    fail<InvalidInput>("invalid {}: '{}' is not a regular file (a device, pipe or socket), which "
                       "query would replace; write to a file (without --output, results go to "
                       "standard output)",
                       option, path);
  }
  const fs::path dir = fs::canonical(parent, ec);
  if (ec) fail<InvalidInput>("invalid {}: cannot resolve '{}': {}", option, parent.string(), ec.message());
  // The run of the index: RUN/ingest/<name> -> RUN.
  const fs::path index = fs::weakly_canonical(index_dir, ec);
  const fs::path run = ec ? fs::path() : index.parent_path().parent_path();
  for (fs::path at = dir;; at = at.parent_path()) {
    for (const char* name : kStageFiles) {
      if (fs::exists(at / name, ec)) {
        fail<InvalidInput>("invalid {}: '{}' lies inside the stage folder '{}' (it holds {}): "
                           "query does not write among a run's own files; write elsewhere",
                           option, path, at.string(), name);
      }
    }
    if (!run.empty() && at.parent_path() == run) {
      for (const StageDecl& stage : stage_graph()) {
        if (at.filename() == stage.folder) {
          fail<InvalidInput>("invalid {}: '{}' lies inside the stage folder '{}' of the run of "
                             "the index; write elsewhere (beside it in '{}' is fine)",
                             option, path, at.string(), run.string());
        }
      }
    }
    if (at == at.parent_path()) break;
  }
}

ResultSink::ResultSink(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  tmp_ = fmt::format("{}.tmp.{}.{}", path_, host_name(), ::getpid());
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (file_ == nullptr) fail<IoError>("cannot create '{}': {}", tmp_, std::strerror(errno));
}

ResultSink::~ResultSink() {
  if (file_ == nullptr) return;
  std::fclose(file_);
  std::error_code ignored;
  fs::remove(tmp_, ignored);
}

void ResultSink::write(std::string_view text) {
  std::FILE* out = file_ ? file_ : stdout;
  if (std::fwrite(text.data(), 1, text.size(), out) != text.size()) {
    fail<IoError>("cannot write '{}': {}", file_ ? tmp_ : "standard output", std::strerror(errno));
  }
}

void ResultSink::commit() {
  if (file_ == nullptr) {
    std::fflush(stdout);
    return;
  }
  const bool ok = std::fflush(file_) == 0;
  const int err = errno;
  std::fclose(file_);
  file_ = nullptr;
  if (!ok) {
    std::error_code ignored;
    fs::remove(tmp_, ignored);
    fail<IoError>("cannot write '{}': {}", tmp_, std::strerror(err));
  }
  commit_file(tmp_, path_);
}

}  // namespace tessera::query
