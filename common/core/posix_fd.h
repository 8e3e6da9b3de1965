// Internal to common/core: a scoped POSIX file descriptor and the errno-to-IoError rule shared by
// fs.cpp and hash.cpp. Not for other libraries (their I/O goes through fs.h).
#pragma once

#include <unistd.h>

#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "common/core/error.h"

namespace tessera::detail {

// Throws IoError("cannot <what> '<path>': <strerror(err)>").
[[noreturn]] inline void fail_errno(std::string_view what, const std::string& path, int err) {
  fail<IoError>("cannot {} '{}': {}", what, path, std::strerror(err));
}

// Closes a POSIX file descriptor on scope exit unless released. Move-only.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&&) = delete;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace tessera::detail
