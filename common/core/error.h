// A small typed exception hierarchy. Every message names what failed (file, object, option) and
// why; callers add context by catching and rethrowing with more detail, never by logging twice.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace tessera {

// Process exit codes shared by every tessera executable.
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,        // internal or I/O error
  kExitBadInput = 2,     // usage error, invalid configuration or manifest; nothing was written
  kExitSlidesFailed = 3  // the run completed but some slides failed (see the slide table)
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, int exit_code = kExitError)
      : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const noexcept { return exit_code_; }

 private:
  int exit_code_;
};

// Failure of a file system, HDF5, OpenSlide or MPI operation.
class IoError : public Error {
 public:
  explicit IoError(const std::string& what) : Error(what, kExitError) {}
};

// Bad input from the user: options, configuration files, manifests, presets. Exit code 2.
class InvalidInput : public Error {
 public:
  explicit InvalidInput(const std::string& what) : Error(what, kExitBadInput) {}
};

// Errors cross ranks (a decision of rank 0, a failure on one rank) as text that keeps their type
// and exit code: encode_error on the rank that caught it, rethrow_encoded on every rank.
inline std::string encode_error(const Error& e) {
  const char kind = dynamic_cast<const InvalidInput*>(&e) ? 'I'
                    : dynamic_cast<const IoError*>(&e)    ? 'O'
                                                          : 'E';
  return fmt::format("{}{}:{}", kind, e.exit_code(), e.what());
}

// Throws the error encode_error described: InvalidInput, IoError or Error with its exit code.
[[noreturn]] inline void rethrow_encoded(const std::string& encoded) {
  const size_t colon = encoded.find(':');
  const std::string what = colon == std::string::npos ? encoded : encoded.substr(colon + 1);
  int code = kExitError;
  if (colon != std::string::npos && colon > 1) code = std::atoi(encoded.substr(1, colon - 1).c_str());
  switch (encoded.empty() ? 'E' : encoded[0]) {
    case 'I': throw InvalidInput(what);
    case 'O': throw IoError(what);
    default: throw Error(what, code);
  }
}

template <typename E = Error, typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw E(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tessera

#define TESSERA_CHECK(cond, ...)                 \
  do {                                           \
    if (!(cond)) ::tessera::fail(__VA_ARGS__);   \
  } while (0)
