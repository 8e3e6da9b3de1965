// Content hashes. XXH3-128 (libxxhash) is the integrity hash of bulk outputs: it runs near memory
// speed, so hashing a shard costs a small fraction of writing it. SHA-256 (OpenSSL) stays where a
// cryptographic digest is wanted (fingerprints of configurations, manifests and model files).
// Every function throws IoError naming the path when a file cannot be read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

// Lowercase hex XXH3-128 (32 hex digits) of a file's bytes (streamed, bounded memory) or of a
// buffer.
std::string xxh3_file(const std::string& path);
std::string xxh3_hex(std::string_view data);

// XXH3-128 of the first and last `span` bytes of a file (of the whole file when it is shorter
// than 2 * span), mixed with its size: a check that reads two small pieces whatever the size, and
// catches truncation, replacement and damage at either end.
std::string xxh3_ends(const std::string& path, uint64_t span = 64 * 1024);

// Lowercase hex SHA-256 of a file's bytes (streamed, bounded memory) or of a buffer.
std::string sha256_file(const std::string& path);
std::string sha256_hex(std::string_view data);

// Incremental SHA-256 (OpenSSL EVP). Move-only.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  // Finalises and returns the digest; the hasher is then reset to the empty state.
  std::string hex_digest();

 private:
  void* ctx_ = nullptr;  // EVP_MD_CTX*, kept opaque so OpenSSL headers stay out of this header
};

}  // namespace tessera
