#include "stages/query/image_embedder.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/stage/layout.h"

extern char** environ;

namespace tessera::query {

namespace fs = std::filesystem;

namespace {

bool is_executable(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

// A private folder for the exchange files, removed when it goes out of scope.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = (fs::path(base && *base ? base : "/tmp") / "tessera-image-XXXXXX");
    if (!::mkdtemp(pattern.data())) {
      fail<IoError>("cannot create a temporary folder '{}': {}", pattern, std::strerror(errno));
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const char* name) const { return (fs::path(path_) / name).string(); }

 private:
  std::string path_;
};

// The last non-empty line of `text`, for an error message.
std::string last_line(const std::string& text) {
  size_t end = text.find_last_not_of("\n ");
  if (end == std::string::npos) return "";
  const size_t begin = text.rfind('\n', end);
  return text.substr(begin == std::string::npos ? 0 : begin + 1, end - (begin == std::string::npos ? 0 : begin + 1) + 1);
}

}  // namespace

std::string find_embed_image_helper() {
  if (const char* env = std::getenv("TESSERA_EMBED_IMAGE"); env && *env) {
    return is_executable(env) ? std::string(env) : "";
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const fs::path& candidate :
       {self.parent_path() / "embed-image", self.parent_path() / ".." / "embed" / "embed-image"}) {
    if (is_executable(candidate)) return candidate.lexically_normal().string();
  }
  return "";
}

std::vector<float> embed_patches(const Catalog& catalog, const uint8_t* rgb, int count,
                                 const std::string& device, int threads) {
  const std::string helper = find_embed_image_helper();
  if (helper.empty()) {
    fail<InvalidInput>("an image query needs the embed-image helper, which is not beside this "
                       "program nor in the build tree (build with TESSERA_BUILD_EMBED=ON, or set "
                       "TESSERA_EMBED_IMAGE to its path)");
  }
  if (catalog.sources.empty()) {
    fail<InvalidInput>("the index '{}' records no embed run to take the model from", catalog.dir);
  }
  const int S = catalog.patch_size;
  TempDir tmp;
  const std::string patches = tmp.file("patches.u8"), model = tmp.file("model.json"),
                    out = tmp.file("vectors.f32"), log = tmp.file("stderr.txt");
  atomic_write_file(patches, std::string_view(reinterpret_cast<const char*>(rgb),
                                              static_cast<size_t>(count) * S * S * 3));
  atomic_write_file(model, catalog.model.dump());
  const std::vector<std::string> args = {
      helper,
      "--embed-config", catalog.path(stage_file(catalog.sources.at(0).embed_dir, kConfigFile)),
      "--model-json", model,
      "--patches", patches,
      "--count", std::to_string(count),
      "--size", std::to_string(S),
      "--out", out,
      "--device", device,
      "--threads", std::to_string(threads)};
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, helper.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    fail<IoError>("cannot start '{}': {}", helper, std::strerror(spawned));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail<IoError>("waiting for '{}': {}", helper, std::strerror(errno));
  }
  std::string messages;
  try {
    messages = read_file(log);
  } catch (const Error&) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string why = last_line(messages);
    if (WIFEXITED(status) && WEXITSTATUS(status) == kExitBadInput) {
      fail<InvalidInput>("embedding the query image: {}", why);
    }
    fail<IoError>("embedding the query image failed ({}): {}",
                  WIFEXITED(status) ? fmt::format("exit code {}", WEXITSTATUS(status))
                                    : fmt::format("signal {}", WTERMSIG(status)),
                  why);
  }
  const std::string bytes = read_file(out);
  if (bytes.size() != static_cast<size_t>(count) * catalog.dim * sizeof(float)) {
    fail<IoError>("'{}' returned {} bytes for {} vectors of dimension {}", helper, bytes.size(),
                  count, catalog.dim);
  }
  std::vector<float> vectors(static_cast<size_t>(count) * catalog.dim);
  std::memcpy(vectors.data(), bytes.data(), bytes.size());
  return vectors;
}

}  // namespace tessera::query
