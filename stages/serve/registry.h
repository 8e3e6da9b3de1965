// The registration of a running service, for tessera-status: RUN/serve/<name>.json with the host,
// port, process id and URL, written when the service listens and removed when it stops.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tessera::serve {

// RUN/serve for the index RUN/ingest/<name>.
std::string default_registry_dir(const std::string& index_dir);

class Registration {
 public:
  // Writes `dir`/<name>.json atomically (the directory is created). Throws IoError naming it.
  Registration(const std::string& dir, const std::string& name, const nlohmann::json& entry);
  ~Registration();  // removes the file
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tessera::serve
