// File-system helpers: atomic writes for markers and indexes, durability (fsync), and the run
// directory lock. All functions throw IoError naming the path on failure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tessera {

// Writes `content` to `path` atomically: a temporary file in the same directory is written,
// fsync'ed, renamed over `path`, and the directory is fsync'ed. Readers see either the old file or
// the complete new one, never a partial one. Creates missing parent directories.
void atomic_write_file(const std::string& path, std::string_view content);

// Makes a finished file durable and visible under its final name: fsyncs `tmp_path`, renames it
// to `path` and fsyncs the directory. For files written by libraries (HDF5) that cannot go through
// atomic_write_file.
void commit_file(const std::string& tmp_path, const std::string& path);

// Makes a closed file and its directory entry durable (fsync of the file and its directory).
void sync_file(const std::string& path);

// Reads a whole file. Throws IoError naming the path when it is missing or unreadable.
std::string read_file(const std::string& path);

// Whether `id` is safe as a file name on every file system a run may live on: non-empty, only
// [A-Za-z0-9._-], not starting with '.'. Slide ids and output tags must be.
bool is_safe_slide_id(const std::string& id);

// The longest slide id, tag or output name a stage accepts: room is left in a file name (NAME_MAX,
// 255 bytes) for what the stages add to it (".tmp.<token>", "-patient", ".h5").
inline constexpr size_t kMaxNameLength = 160;

// "rank-00042" + ext.
std::string rank_file_name(int rank, const std::string& ext);

// Reads a JSON file; nullopt when it does not exist. Throws InvalidInput naming the file when it
// exists but is not valid JSON.
std::optional<nlohmann::json> read_json_file(const std::string& path);

// Size of a regular file in bytes, or nullopt when it does not exist.
std::optional<uint64_t> file_size(const std::string& path);

// The names of the directories directly under `dir` (following links), sorted; empty when `dir`
// does not exist or cannot be listed. Never throws.
std::vector<std::string> list_subdirectories(const std::string& dir);

// Whether `path` exists (following links). Throws IoError naming the path when that cannot be
// told (permissions, a name too long), where std::filesystem::exists would throw its own error.
bool path_exists(const std::string& path);

// Creates directory `path` and missing parents; nothing when it is already a directory. Throws
// IoError "cannot create directory '<path>': <reason>".
void make_directories(const std::string& path);

// Removes `path` and, for a directory, everything below it; nothing when it does not exist.
// Throws IoError "cannot remove '<path>': <reason>".
void remove_tree(const std::string& path);

// An exclusive advisory lock (fcntl F_SETLK, works across hosts on NFS and Lustre mounted with
// locking) on `path`, created if missing. The file's content records host, pid and start time for
// diagnostics. The lock is released by the destructor or when the process dies, so a killed run
// never leaves a stale lock. Move-only.
//
// The file holds one JSON line {"host", "pid", "time"} written after locking; it is left in place on
// release. Because fcntl locks belong to the process, a second try_acquire of the same file within
// the holding process returns nullopt (tracked per process, without touching the file), and no other
// code in the process may open and close the lock file while it is held (that would drop the lock).
// Creates missing parent directories. Throws
//   - InvalidInput (exit code 2) when `path` is a directory, or when the file system refuses
//     locks (ENOLCK, EOPNOTSUPP, ENOSYS: mounted without lock support); the message says to run
//     with --file-locking false on such file systems;
//   - IoError when the file cannot be created or opened, or locking fails otherwise.
class FileLock {
 public:
  enum class Mode {
    kExclusive,  // one writer: records {"host", "pid", "time"} and `info` in the file
    kShared      // any number of readers, no writer: the file's content is left alone
  };
  // Returns the lock, or nullopt when another process holds it in a conflicting mode; `holder`
  // then receives who holds it now: the file's record ("host H pid P since T") when the live
  // writer wrote it, else the live holder's pid from fcntl(F_GETLK) ("pid P reading it (shared
  // lock)"; a reader writes no record, and the record may be of a writer long gone).
  static std::optional<FileLock> try_acquire(const std::string& path, std::string* holder = nullptr,
                                             Mode mode = Mode::kExclusive,
                                             const nlohmann::json& info = {});
  // Turns a held exclusive lock into a shared one, atomically (fcntl converts in place).
  void downgrade();
  // Whether a process other than this one holds any lock on `path` (fcntl F_GETLK; on NFS and
  // Lustre mounted with locking this sees other hosts). False when the file does not exist.
  static bool held_elsewhere(const std::string& path);
  FileLock(FileLock&&) noexcept;
  FileLock& operator=(FileLock&&) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();
  void release() noexcept;  // safe to call twice

 private:
  FileLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

// What FileLock::try_acquire throws when fcntl(F_SETLK) on `path` fails with errno `err` for
// another reason than a lock held elsewhere (see FileLock). Separate so that tests can reach the
// messages of file systems they cannot mount.
[[noreturn]] void throw_lock_failure(const std::string& path, int err);

// Current UTC time as ISO 8601 with milliseconds ("2026-11-30T02:25:28.123Z").
std::string utc_timestamp();

// The host name of this process (for markers and locks).
std::string host_name();

}  // namespace tessera
