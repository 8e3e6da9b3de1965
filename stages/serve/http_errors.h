// The failures of a request that map to an HTTP status other than 400 (InvalidInput) and 500:
// Api::handle turns each into its status with the JSON error body.
#pragma once

#include <string>

#include "common/core/error.h"

namespace tessera::serve {

// A request for something the service does not hold (404).
class NotFound : public Error {
 public:
  explicit NotFound(const std::string& what) : Error(what, kExitBadInput) {}
};

// An answer the service cannot give now (503).
class Unavailable : public Error {
 public:
  explicit Unavailable(const std::string& what) : Error(what, kExitError) {}
};

// An answer this build of the service cannot give (501).
class NotImplemented : public Error {
 public:
  explicit NotImplemented(const std::string& what) : Error(what, kExitError) {}
};

}  // namespace tessera::serve
