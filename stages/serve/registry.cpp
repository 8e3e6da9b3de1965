#include "stages/serve/registry.h"

#include <filesystem>
#include <system_error>

#include "common/core/fs.h"
#include "common/stage/layout.h"

namespace tessera::serve {

namespace fs = std::filesystem;

std::string default_registry_dir(const std::string& index_dir) {
  // RUN/ingest/<name> -> RUN (RunLayout::stage_root's inverse), then RUN/serve.
  const fs::path index = fs::weakly_canonical(fs::absolute(index_dir));
  return (index.parent_path().parent_path() / kServicesDir).string();
}

Registration::Registration(const std::string& dir, const std::string& name,
                           const nlohmann::json& entry)
    : path_((fs::path(dir) / (name + ".json")).string()) {
  fs::create_directories(dir);
  atomic_write_file(path_, entry.dump(2) + "\n");
}

Registration::~Registration() {
  std::error_code ignored;
  fs::remove(path_, ignored);
}

}  // namespace tessera::serve
