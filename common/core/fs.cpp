#include "common/core/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "common/core/error.h"
#include "common/core/posix_fd.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

using detail::Fd;
using detail::fail_errno;

void write_all(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("write", path, errno);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

void create_parent_directories(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) fail<IoError>("cannot create directory '{}': {}", parent.string(), ec.message());
}

// Makes a rename into `path`'s directory durable.
void fsync_parent_directory(const std::string& path) {
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) fail_errno("open directory", dir, errno);
  // Some file systems cannot sync directories; the rename itself has already happened.
  if (::fsync(fd.get()) != 0 && errno != EINVAL && errno != ENOTSUP)
    fail_errno("fsync directory", dir, errno);
}

// Process-local registry of held locks: fcntl locks do not conflict within a process, and closing
// any descriptor of the file would drop the lock, so a second acquire must not even open the file.
struct LockRegistry {
  std::mutex mutex;
  std::map<std::pair<dev_t, ino_t>, pid_t> held;
};

LockRegistry& lock_registry() {
  static LockRegistry* registry = new LockRegistry();  // never destroyed: used by late destructors
  return *registry;
}

std::string describe_holder(const std::string& content) {
  try {
    const auto j = nlohmann::json::parse(content);
    return fmt::format("host {} pid {} since {}", j.at("host").get<std::string>(),
                       j.at("pid").get<int64_t>(), j.at("time").get<std::string>());
  } catch (const std::exception&) {
    return content;
  }
}

// Who holds the lock on `fd` now, as fcntl(F_GETLK) reports it: the file's record when it is of that
// process (its writer), else the live holder's pid, for a reader, whose shared lock writes no
// record, or a writer whose record is not readable. The record alone may name a writer long gone.
std::string describe_live_holder(int fd, const std::string& content) {
  struct flock lk {};
  lk.l_type = F_WRLCK;
  lk.l_whence = SEEK_SET;
  if (::fcntl(fd, F_GETLK, &lk) != 0 || lk.l_type == F_UNLCK) return describe_holder(content);
  const char* how = lk.l_type == F_RDLCK ? "reading it (shared lock)" : "writing it";
  int64_t recorded_pid = -1;
  try {
    recorded_pid = nlohmann::json::parse(content).at("pid").get<int64_t>();
  } catch (const std::exception&) {
  }
  if (lk.l_pid <= 0) {
    // A lock held from another host (NFS, Lustre): no pid to show.
    return fmt::format("a process {}, on another host", how);
  }
  if (lk.l_type == F_WRLCK && recorded_pid == lk.l_pid) return describe_holder(content);
  return fmt::format("pid {} {}", static_cast<int64_t>(lk.l_pid), how);
}

std::string read_fd(int fd) {
  std::string content;
  char buf[4096];
  off_t offset = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    content.append(buf, static_cast<size_t>(n));
    offset += n;
  }
  return content;
}

}  // namespace

void atomic_write_file(const std::string& path, std::string_view content) {
  create_parent_directories(path);
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, host_name(), ::getpid());
  try {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) fail_errno("create", tmp, errno);
    write_all(fd.get(), content.data(), content.size(), tmp);
    if (::fsync(fd.get()) != 0) fail_errno("fsync", tmp, errno);
    if (::close(fd.release()) != 0) fail_errno("close", tmp, errno);
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      fail_errno(fmt::format("rename '{}' to", tmp), path, errno);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  fsync_parent_directory(path);
}

void sync_file(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail_errno("open", path, errno);
  if (::fsync(fd.get()) != 0) fail_errno("fsync", path, errno);
  fsync_parent_directory(path);
}

void commit_file(const std::string& tmp_path, const std::string& path) {
  Fd fd(::open(tmp_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail_errno("open", tmp_path, errno);
  if (::fsync(fd.get()) != 0) fail_errno("fsync", tmp_path, errno);
  if (::rename(tmp_path.c_str(), path.c_str()) != 0)
    fail_errno(fmt::format("rename '{}' to", tmp_path), path, errno);
  fsync_parent_directory(path);
}

std::string read_file(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail_errno("read", path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail_errno("stat", path, errno);
  if (S_ISDIR(st.st_mode)) fail<IoError>("cannot read '{}': it is a directory", path);
  std::string content;
  content.reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("read", path, errno);
    }
    if (n == 0) break;
    content.append(buf, static_cast<size_t>(n));
  }
  return content;
}

bool is_safe_slide_id(const std::string& id) {
  if (id.empty() || id[0] == '.') return false;
  for (unsigned char c : id) {
    if (!(std::isalnum(c) || c == '.' || c == '_' || c == '-')) return false;
  }
  return true;
}

std::string rank_file_name(int rank, const std::string& ext) {
  return fmt::format("rank-{:05d}{}", rank, ext);
}

std::optional<nlohmann::json> read_json_file(const std::string& path) {
  if (!path_exists(path)) return std::nullopt;
  std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail<InvalidInput>("'{}' is not valid JSON: {}", path, e.what());
  }
}

std::optional<uint64_t> file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    fail_errno("stat", path, errno);
  }
  if (!S_ISREG(st.st_mode)) fail<IoError>("cannot take the size of '{}': not a regular file", path);
  return static_cast<uint64_t>(st.st_size);
}

std::vector<std::string> list_subdirectories(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (it->is_directory(ec2)) names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool path_exists(const std::string& path) {
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  if (ec) fail<IoError>("cannot tell whether '{}' exists: {}", path, ec.message());
  return exists;
}

void make_directories(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) fail<IoError>("cannot create directory '{}': {}", path, ec.message());
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) fail<IoError>("cannot remove '{}': {}", path, ec.message());
}

void throw_lock_failure(const std::string& path, int err) {
  if (err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS) {
    fail<InvalidInput>(
        "cannot lock '{}': the file system refuses locks ({}). If it is mounted without lock "
        "support (e.g. NFS with nolock), rerun with --file-locking false and make sure that no "
        "two jobs use this run directory at once",
        path, std::strerror(err));
  }
  fail_errno("lock", path, err);
}

std::optional<FileLock> FileLock::try_acquire(const std::string& path, std::string* holder,
                                              Mode mode, const nlohmann::json& extra) {
  LockRegistry& registry = lock_registry();
  std::lock_guard<std::mutex> guard(registry.mutex);
  const pid_t self = ::getpid();
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      fail<InvalidInput>("the lock file '{}' is a directory: remove or rename that directory "
                         "(tessera creates the lock file itself)", path);
    }
    const auto it = registry.held.find({st.st_dev, st.st_ino});
    if (it != registry.held.end()) {
      if (it->second == self) {
        if (holder != nullptr)
          *holder = fmt::format("this process (host {} pid {})", host_name(), self);
        return std::nullopt;
      }
      registry.held.erase(it);  // inherited across fork: the lock belongs to the parent
    }
  }
  create_parent_directories(path);
  Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    if (errno == EISDIR) fail<InvalidInput>("the lock file '{}' is a directory", path);
    fail_errno("open lock file", path, errno);
  }
  struct flock lk {};
  lk.l_type = mode == Mode::kShared ? F_RDLCK : F_WRLCK;
  lk.l_whence = SEEK_SET;
  lk.l_start = 0;
  lk.l_len = 0;
  if (::fcntl(fd.get(), F_SETLK, &lk) != 0) {
    const int err = errno;
    if (err == EAGAIN || err == EACCES) {
      if (holder != nullptr) *holder = describe_live_holder(fd.get(), read_fd(fd.get()));
      return std::nullopt;
    }
    throw_lock_failure(path, err);
  }
  if (::fstat(fd.get(), &st) != 0) fail_errno("stat lock file", path, errno);
  if (mode == Mode::kShared) {
    registry.held[{st.st_dev, st.st_ino}] = self;
    return FileLock(fd.release(), path);
  }
  nlohmann::json info{
      {"host", host_name()}, {"pid", static_cast<int64_t>(self)}, {"time", utc_timestamp()}};
  if (extra.is_object()) info.update(extra);
  const std::string content = info.dump() + "\n";
  if (::ftruncate(fd.get(), 0) != 0) fail_errno("truncate lock file", path, errno);
  for (size_t done = 0; done < content.size();) {
    const ssize_t n =
        ::pwrite(fd.get(), content.data() + done, content.size() - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("write lock file", path, errno);
    }
    done += static_cast<size_t>(n);
  }
  registry.held[{st.st_dev, st.st_ino}] = self;
  return FileLock(fd.release(), path);
}

void FileLock::downgrade() {
  struct flock lk {};
  lk.l_type = F_RDLCK;
  lk.l_whence = SEEK_SET;
  if (fd_ < 0 || ::fcntl(fd_, F_SETLK, &lk) != 0) fail_errno("downgrade the lock", path_, errno);
}

bool FileLock::held_elsewhere(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return false;
    fail_errno("open lock file", path, errno);
  }
  struct flock lk {};
  lk.l_type = F_WRLCK;  // conflicts with any lock another process holds
  lk.l_whence = SEEK_SET;
  if (::fcntl(fd.get(), F_GETLK, &lk) != 0) fail_errno("query the lock of", path, errno);
  // Closing `fd` would drop this process's own locks on the file: keep it open for the life of
  // the process instead (one descriptor per query of a file this process also locks).
  LockRegistry& registry = lock_registry();
  {
    std::lock_guard<std::mutex> guard(registry.mutex);
    struct stat st {};
    if (::fstat(fd.get(), &st) == 0 && registry.held.count({st.st_dev, st.st_ino})) fd.release();
  }
  return lk.l_type != F_UNLCK;
}

FileLock::FileLock(FileLock&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
  }
  return *this;
}

FileLock::~FileLock() {
  release();
}

void FileLock::release() noexcept {
  if (fd_ < 0) return;
  LockRegistry& registry = lock_registry();
  std::lock_guard<std::mutex> guard(registry.mutex);
  struct stat st {};
  if (::fstat(fd_, &st) == 0) registry.held.erase({st.st_dev, st.st_ino});
  ::close(fd_);
  fd_ = -1;
}

std::string utc_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  ::gmtime_r(&seconds, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>(millis));
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace tessera
