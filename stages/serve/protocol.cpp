#include "stages/serve/protocol.h"

#include <cstring>

#include "common/core/error.h"

namespace tessera::serve {

namespace {

class Writer {
 public:
  template <typename T>
  void put(const T& value) {
    bytes.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  void put_bytes(const void* data, uint64_t n) {
    put(n);
    bytes.append(static_cast<const char*>(data), n);
  }
  std::string bytes;
};

class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  template <typename T>
  T get() {
    T value;
    take(&value, sizeof value);
    return value;
  }
  template <typename T>
  std::vector<T> get_vector() {
    const uint64_t n = get<uint64_t>();
    TESSERA_CHECK(n % sizeof(T) == 0 && n <= bytes_.size() - at_, "serve: malformed command");
    std::vector<T> v(n / sizeof(T));
    take(v.data(), n);
    return v;
  }
  void take(void* out, size_t n) {
    TESSERA_CHECK(at_ + n <= bytes_.size(), "serve: truncated command");
    if (n) std::memcpy(out, bytes_.data() + at_, n);
    at_ += n;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  const std::string& bytes_;
  size_t at_ = 0;
};

}  // namespace

std::string encode_command(const Command& command) {
  Writer w;
  w.put(static_cast<uint8_t>(command.kind));
  w.put(static_cast<uint64_t>(command.jobs.size()));
  for (const SearchJob& j : command.jobs) {
    w.put_bytes(j.vector.data(), j.vector.size() * sizeof(float));
    w.put(static_cast<int32_t>(j.k));
    w.put(static_cast<int32_t>(j.nprobe));
    w.put_bytes(j.filter.data(), j.filter.size());
    w.put(j.exclude_slide);
    w.put(j.exclude_patient_of);
  }
  return std::move(w.bytes);
}

Command decode_command(const std::string& bytes) {
  Reader r(bytes);
  Command c;
  const uint8_t kind = r.get<uint8_t>();
  TESSERA_CHECK(kind >= 1 && kind <= 4, "serve: unknown command {}", kind);
  c.kind = static_cast<CommandKind>(kind);
  const uint64_t n = r.get<uint64_t>();
  TESSERA_CHECK(n <= bytes.size(), "serve: malformed command");
  c.jobs.resize(n);
  for (SearchJob& j : c.jobs) {
    j.vector = r.get_vector<float>();
    j.k = r.get<int32_t>();
    j.nprobe = r.get<int32_t>();
    const std::vector<char> filter = r.get_vector<char>();
    j.filter.assign(filter.begin(), filter.end());
    j.exclude_slide = r.get<int32_t>();
    j.exclude_patient_of = r.get<int32_t>();
  }
  TESSERA_CHECK(r.done(), "serve: trailing bytes after a command");
  return c;
}

}  // namespace tessera::serve
