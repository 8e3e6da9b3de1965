// The HTTP layer of serve: the edge (http_edge.h) reads each request whole within the limits, a
// pool of --http-threads workers hands it to cpp-httplib, which parses and routes it to Api::handle
// and writes the answer (docs/architecture.md says why this library). Only rank 0 runs one.
#pragma once

#include <memory>
#include <string>

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
  // Starts accepting on a thread of its own, and the workers.
  void start();
  // Stops accepting, finishes the requests being answered, closes every connection. Safe to call
  // twice.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace tessera::serve
