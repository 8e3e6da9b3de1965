// The HTTP layer of serve: cpp-httplib's server, a pool of threads, moving bytes between sockets
// and Api::handle (docs/architecture.md says why this library). Only rank 0 runs one.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "stages/serve/api.h"

namespace tessera::serve {

class HttpServer {
 public:
  // Binds `config.bind`:`config.port` (any free port for 0). Throws IoError naming the address when
  // it cannot be bound.
  HttpServer(Api& api, const Config& config);
  ~HttpServer();  // stops and joins
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Starts accepting on a thread of its own.
  void start();
  // Stops accepting and waits for the accepting thread. Safe to call twice.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace tessera::serve
