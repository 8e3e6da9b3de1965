#include "common/core/fs.h"
#include "common/core/hash.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>
#include <regex>
#include <string>

#include "common/core/error.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class FsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ =
        fs::temp_directory_path() / fmt::format("tessera_fs_test_{}_{}", info->name(), ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::vector<std::string> entries(const fs::path& d) const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(d)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
};

// Runs `body` in a forked child and returns its exit status (or -1 when it did not exit normally).
template <typename F>
int in_child(F body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 99;
    try {
      code = body();
    } catch (...) {
      code = 98;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, IncrementalMatchesOneShotAndResets) {
  Sha256 h;
  h.update("ab");
  h.update(std::string_view("c"));
  EXPECT_EQ(h.hex_digest(), sha256_hex("abc"));
  h.update("abc");
  EXPECT_EQ(h.hex_digest(), sha256_hex("abc"));
  Sha256 moved = std::move(h);
  moved.update("");
  EXPECT_EQ(moved.hex_digest(), sha256_hex(""));
}

TEST_F(FsTest, Sha256FileStreamsAcrossBlocks) {
  std::string content(9 * 1024 * 1024 + 123, '\0');
  std::mt19937 rng(7);
  for (char& c : content) c = static_cast<char>(rng());
  atomic_write_file(path("big.bin"), content);
  EXPECT_EQ(sha256_file(path("big.bin")), sha256_hex(content));
  atomic_write_file(path("abc"), "abc");
  EXPECT_EQ(sha256_file(path("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  try {
    sha256_file(path("missing"));
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(path("missing")), std::string::npos) << e.what();
  }
}

TEST_F(FsTest, AtomicWriteCreatesParentsReplacesAndLeavesNoTemp) {
  const std::string target = path("a/b/marker.json");
  atomic_write_file(target, "first");
  EXPECT_EQ(read_file(target), "first");
  atomic_write_file(target, std::string("second\0with nul", 15));
  EXPECT_EQ(read_file(target), std::string("second\0with nul", 15));
  atomic_write_file(target, "");
  EXPECT_EQ(read_file(target), "");
  EXPECT_EQ(entries(dir_ / "a" / "b"), std::vector<std::string>{"marker.json"});
}

TEST_F(FsTest, AtomicWriteFailureRemovesTempAndNamesPath) {
  // Renaming a file over a non-empty directory fails after the temp file was written.
  const std::string target = path("occupied");
  fs::create_directories(dir_ / "occupied" / "child");
  try {
    atomic_write_file(target, "data");
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(target), std::string::npos) << e.what();
  }
  EXPECT_EQ(entries(dir_), std::vector<std::string>{"occupied"});

  // A parent that is a regular file cannot be created.
  atomic_write_file(path("plain"), "x");
  EXPECT_THROW(atomic_write_file(path("plain/inside"), "y"), IoError);
}

TEST_F(FsTest, ReadFileNamesMissingPath) {
  try {
    read_file(path("nope.txt"));
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path("nope.txt")), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
  }
  EXPECT_THROW(read_file(dir_.string()), IoError);
}

TEST_F(FsTest, FileSize) {
  EXPECT_EQ(file_size(path("missing")), std::nullopt);
  EXPECT_EQ(file_size(path("missing/deeper")), std::nullopt);
  atomic_write_file(path("five"), "12345");
  EXPECT_EQ(file_size(path("five")), 5u);
  atomic_write_file(path("empty"), "");
  EXPECT_EQ(file_size(path("empty")), 0u);
  EXPECT_THROW(file_size(dir_.string()), IoError);
}

TEST_F(FsTest, FileLockExcludesOtherProcessesUntilReleased) {
  const std::string lock_path = path("run/.lock");
  const pid_t parent = ::getpid();
  std::optional<FileLock> lock = FileLock::try_acquire(lock_path);
  ASSERT_TRUE(lock.has_value());

  // The holder's record is read in a child: closing any descriptor of the lock file in the holding
  // process would drop its fcntl lock.
  EXPECT_EQ(in_child([&] {
              const std::string content = read_file(lock_path);
              if (content.find(fmt::format("\"pid\":{}", parent)) == std::string::npos) return 1;
              return content.find(host_name()) == std::string::npos ? 2 : 0;
            }),
            0);

  // While held: another process is refused and learns who holds it. The child reports by exit code.
  const int refused = in_child([&] {
    std::string holder;
    if (FileLock::try_acquire(lock_path, &holder).has_value()) return 1;
    if (holder.find(fmt::format("pid {}", parent)) == std::string::npos) return 2;
    if (holder.find(host_name()) == std::string::npos) return 3;
    return 0;
  });
  EXPECT_EQ(refused, 0);

  // A second acquire in the holding process is refused and does not drop the lock.
  std::string holder;
  EXPECT_FALSE(FileLock::try_acquire(lock_path, &holder).has_value());
  EXPECT_NE(holder.find("this process"), std::string::npos) << holder;
  EXPECT_EQ(in_child([&] { return FileLock::try_acquire(lock_path).has_value() ? 1 : 0; }), 0);

  // A moved lock is still held; releasing twice is harmless.
  FileLock moved = std::move(*lock);
  lock.reset();
  EXPECT_EQ(in_child([&] { return FileLock::try_acquire(lock_path).has_value() ? 1 : 0; }), 0);
  moved.release();
  moved.release();

  EXPECT_EQ(in_child([&] { return FileLock::try_acquire(lock_path).has_value() ? 0 : 1; }), 0);
}

// Issue 21, case 18: the refusal names the live reader, not the writer recorded in the file
// before it.
TEST_F(FsTest, FileLockRefusalNamesTheLiveHolderNotAnEarlierWriter) {
  const std::string lock_path = path("run/.lock");
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  // A writer records itself and ends.
  const pid_t writer = ::fork();
  if (writer == 0) {
    auto lock = FileLock::try_acquire(lock_path);
    ::_exit(lock ? 0 : 1);
  }
  int status = 0;
  ::waitpid(writer, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_NE(read_file(lock_path).find(fmt::format("\"pid\":{}", writer)), std::string::npos);
  // A reader holds it shared until told to end.
  const pid_t reader = ::fork();
  if (reader == 0) {
    auto lock = FileLock::try_acquire(lock_path, nullptr, FileLock::Mode::kShared);
    char c = lock ? 'y' : 'n';
    if (::write(ready[1], &c, 1) != 1) ::_exit(2);
    if (::read(done[0], &c, 1) != 1) ::_exit(3);
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  std::string holder;
  EXPECT_FALSE(FileLock::try_acquire(lock_path, &holder).has_value());
  EXPECT_NE(holder.find(fmt::format("pid {} reading it", reader)), std::string::npos) << holder;
  EXPECT_EQ(holder.find(fmt::format("pid {}", writer)), std::string::npos) << holder;
  ASSERT_EQ(::write(done[1], &c, 1), 1);
  ::waitpid(reader, &status, 0);
  for (int fd : {ready[0], ready[1], done[0], done[1]}) ::close(fd);
  // A live writer is still named from its record, with its host.
  auto lock = FileLock::try_acquire(lock_path);
  ASSERT_TRUE(lock.has_value());
  const pid_t self = ::getpid();
  EXPECT_EQ(in_child([&] {
              std::string h;
              if (FileLock::try_acquire(lock_path, &h).has_value()) return 1;
              return h.find(fmt::format("host {} pid {} since", host_name(), self)) ==
                             std::string::npos
                         ? 2
                         : 0;
            }),
            0);
}

TEST_F(FsTest, FileLockIsReleasedWhenHolderDies) {
  const std::string lock_path = path(".lock");
  // The child takes the lock and exits without releasing it.
  EXPECT_EQ(in_child([&] {
              auto lock = FileLock::try_acquire(lock_path);
              if (!lock) return 1;
              ::_exit(0);
              return 0;
            }),
            0);
  auto lock = FileLock::try_acquire(lock_path);
  EXPECT_TRUE(lock.has_value());
}

TEST_F(FsTest, LockFileThatIsADirectoryIsInvalidInput) {
  const std::string lock_path = path("run/.lock");
  fs::create_directories(lock_path);
  try {
    FileLock::try_acquire(lock_path);
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.exit_code(), kExitBadInput);
    EXPECT_NE(std::string(e.what()).find(lock_path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
}

TEST(FileLockFailure, FileSystemsWithoutLocksSayWhatToDo) {
  for (int err : {ENOLCK, EOPNOTSUPP, ENOSYS}) {
    try {
      throw_lock_failure("/nfs/run/patchgen/.lock", err);
    } catch (const InvalidInput& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("/nfs/run/patchgen/.lock"), std::string::npos) << msg;
      EXPECT_NE(msg.find("--file-locking false"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::strerror(err)), std::string::npos) << msg;
      EXPECT_EQ(e.exit_code(), kExitBadInput);
    }
  }
  try {
    throw_lock_failure("/x/.lock", EIO);
  } catch (const InvalidInput&) {
    FAIL() << "EIO is an I/O error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot lock '/x/.lock'"), std::string::npos) << e.what();
  }
}

TEST_F(FsTest, FilesystemFailuresAreIoErrorsNamingThePath) {
  // A name longer than NAME_MAX makes std::filesystem::exists throw its own filesystem_error.
  const std::string too_long = path(std::string(300, 'x') + ".json");
  for (const auto& call : std::vector<std::function<void()>>{
           [&] { read_json_file(too_long); }, [&] { path_exists(too_long); },
           [&] { make_directories(too_long); }}) {
    try {
      call();
      FAIL() << "expected IoError";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(too_long), std::string::npos) << e.what();
    }
  }
  atomic_write_file(path("plain"), "x");
  try {
    make_directories(path("plain/sub"));
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create directory '" + path("plain/sub") + "'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(path_exists(path("plain/sub")));
  EXPECT_TRUE(path_exists(path("plain")));
  make_directories(path("a/b/c"));
  make_directories(path("a/b/c"));
  atomic_write_file(path("a/b/c/f"), "y");
  remove_tree(path("a"));
  EXPECT_FALSE(path_exists(path("a")));
  remove_tree(path("a"));
}

TEST(TimeTest, UtcTimestampFormatAndHostName) {
  const std::string ts = utc_timestamp();
  EXPECT_TRUE(std::regex_match(ts, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)"))) << ts;
  EXPECT_GE(ts.substr(0, 4), "2024");
  EXPECT_FALSE(host_name().empty());
}

}  // namespace
}  // namespace tessera
