#include "common/core/hash.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "common/core/error.h"
#include "common/core/posix_fd.h"

namespace tessera {
namespace {

using detail::Fd;
using detail::fail_errno;

int open_for_hash(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_errno("hash", path, errno);
  return fd;
}

// Reads [offset, offset + size) or until end of file; returns the bytes read.
size_t read_at(int fd, char* buf, size_t size, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, buf + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("read", path, errno);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

void for_each_block(const std::string& path, const std::function<void(const char*, size_t)>& f) {
  constexpr size_t kBlock = 4 << 20;
  Fd fd(open_for_hash(path));
  std::vector<char> buf(kBlock);
  uint64_t offset = 0;
  for (;;) {
    const size_t n = read_at(fd.get(), buf.data(), buf.size(), offset, path);
    if (n == 0) break;
    f(buf.data(), n);
    offset += n;
  }
}

class Xxh3 {
 public:
  Xxh3() : state_(XXH3_createState()) {
    if (state_ == nullptr || XXH3_128bits_reset(state_) != XXH_OK) {
      XXH3_freeState(state_);
      throw Error("xxhash: cannot initialise an XXH3 state");
    }
  }
  ~Xxh3() { XXH3_freeState(state_); }
  Xxh3(const Xxh3&) = delete;
  Xxh3& operator=(const Xxh3&) = delete;
  void update(const void* data, size_t size) { XXH3_128bits_update(state_, data, size); }
  std::string hex_digest() const {
    XXH128_canonical_t canonical;
    XXH128_canonicalFromHash(&canonical, XXH3_128bits_digest(state_));
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex(2 * sizeof(canonical.digest), '0');
    for (size_t i = 0; i < sizeof(canonical.digest); ++i) {
      hex[2 * i] = kHex[canonical.digest[i] >> 4];
      hex[2 * i + 1] = kHex[canonical.digest[i] & 0xf];
    }
    return hex;
  }

 private:
  XXH3_state_t* state_;
};

}  // namespace

std::string xxh3_hex(std::string_view data) {
  Xxh3 h;
  h.update(data.data(), data.size());
  return h.hex_digest();
}

std::string xxh3_file(const std::string& path) {
  Xxh3 h;
  for_each_block(path, [&](const char* data, size_t n) { h.update(data, n); });
  return h.hex_digest();
}

std::string xxh3_ends(const std::string& path, uint64_t span) {
  Fd fd(open_for_hash(path));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail_errno("stat", path, errno);
  const auto size = static_cast<uint64_t>(st.st_size);
  Xxh3 h;
  h.update(&size, sizeof(size));
  std::vector<char> buf(static_cast<size_t>(std::min(size, 2 * span)));
  if (size <= 2 * span) {
    h.update(buf.data(), read_at(fd.get(), buf.data(), buf.size(), 0, path));
  } else {
    const size_t head = read_at(fd.get(), buf.data(), span, 0, path);
    const size_t tail = read_at(fd.get(), buf.data() + head, span, size - span, path);
    h.update(buf.data(), head + tail);
  }
  return h.hex_digest();
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr ||
      EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
    throw Error("OpenSSL: cannot initialise a SHA-256 context");
  }
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
}

Sha256::Sha256(Sha256&& o) noexcept : ctx_(std::exchange(o.ctx_, nullptr)) {}

Sha256& Sha256::operator=(Sha256&& o) noexcept {
  if (this != &o) {
    EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
    ctx_ = std::exchange(o.ctx_, nullptr);
  }
  return *this;
}

void Sha256::update(const void* data, size_t size) {
  if (ctx_ == nullptr) throw Error("SHA-256: update of a moved-from hasher");
  if (EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, size) != 1) {
    throw Error("OpenSSL: SHA-256 update failed");
  }
}

std::string Sha256::hex_digest() {
  if (ctx_ == nullptr) throw Error("SHA-256: digest of a moved-from hasher");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  auto* ctx = static_cast<EVP_MD_CTX*>(ctx_);
  if (EVP_DigestFinal_ex(ctx, digest, &len) != 1)
    throw Error("OpenSSL: SHA-256 finalisation failed");
  // Leave the context reusable (as a fresh hasher) rather than in an undefined state.
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(2 * len, '0');
  for (unsigned int i = 0; i < len; ++i) {
    hex[2 * i] = kHex[digest[i] >> 4];
    hex[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return hex;
}

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.hex_digest();
}

std::string sha256_file(const std::string& path) {
  Sha256 h;
  for_each_block(path, [&](const char* data, size_t n) { h.update(data, n); });
  return h.hex_digest();
}

}  // namespace tessera
