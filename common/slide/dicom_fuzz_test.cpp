// The DICOM reader against hostile files (issue 30): mutants of synthslide's DICOM files, made here
// and never committed (tests/synthslide/dicom_mutants.h), each opened and read in a child process
// limited to 2 GiB of address space. Every mutant must end without a signal, either read or
// refused with an IoError naming the file (and, where the kind has one, the exact reason); the
// largest resident size of the children is printed.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/core/error.h"
#include "common/slide/slide.h"
#include "common/slide/slide_test_support.h"
#include "tests/synthslide/dicom_mutants.h"
#include "tests/synthslide/dicom_writer.h"
#include "tests/synthslide/synthslide.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr rlim_t kAddressSpace = rlim_t{2} << 30;
// A watchdog, not a measure: a child still running after this long is taken as hung.
constexpr unsigned kHungSeconds = 120;

struct Base {
  std::string name;
  std::string bytes;
  int64_t frames = 0;
  uint64_t frame_bytes = 0;
  std::vector<synth::DicomMutant> mutants;  // made once
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Level 0 of a small synthetic slide's DICOM twin: encapsulated JPEG frames and uncompressed ones.
const std::vector<Base>& bases() {
  static const std::vector<Base> all = [] {
    synth::SlideSpec spec;
    spec.path = (slide_test::scratch_dir() / "fuzz.tif").string();
    spec.width = 700;
    spec.height = 500;
    spec.seed = 30;
    synth::write_slide(spec);
    std::vector<Base> out;
    for (const auto& [name, codec] : {std::pair{"jpeg", synth::DicomCodec::kJpeg},
                                      std::pair{"raw", synth::DicomCodec::kRaw}}) {
      synth::DicomSpec d;
      d.dir = (slide_test::scratch_dir() / name).string();
      d.codec = codec;
      synth::write_dicom_series(spec, d);
      Base b;
      b.name = name;
      b.bytes = read_bytes(d.dir + "/level-0.dcm");
      b.frames = std::stoll(synth::dicom_element_value(b.bytes, synth::dicom_tag(0x0028, 0x0008)));
      const auto u16 = [&](uint32_t tag) {
        const std::string v = synth::dicom_element_value(b.bytes, tag);
        return static_cast<uint64_t>(static_cast<uint8_t>(v.at(0)) | static_cast<uint8_t>(v.at(1)) << 8);
      };
      b.frame_bytes = u16(synth::dicom_tag(0x0028, 0x0010)) * u16(synth::dicom_tag(0x0028, 0x0011)) * 3;
      b.mutants = synth::dicom_mutants(b.bytes, b.frames, b.frame_bytes, 24, 30);
      out.push_back(std::move(b));
    }
    return out;
  }();
  return all;
}

struct Outcome {
  int status = 0;        // 0 read, 3 refused with IoError, 4 another exception, 128 + signal
  std::string message;   // the exception's
  long max_rss_kb = 0;
};

// Opens `path` and reads a region of every level, in a child limited to kAddressSpace.
Outcome open_in_child(const std::string& path) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::close(pipe_fds[0]);
    const rlimit limit{kAddressSpace, kAddressSpace};
    ::setrlimit(RLIMIT_AS, &limit);
    ::alarm(kHungSeconds);
    int code = 0;
    std::string message;
    try {
      const Slide slide = Slide::open(path, SlideReader::kAuto, size_t{8} << 20);
      std::vector<uint8_t> rgb(64 * 64 * 3);
      for (int level = 0; level < slide.level_count(); ++level) {
        slide.read_rgb(0, 0, level, 64, 64, rgb.data());
      }
    } catch (const IoError& e) {
      code = 3;
      message = e.what();
    } catch (const std::exception& e) {
      code = 4;
      message = e.what();
    }
    for (size_t done = 0; done < message.size();) {
      const ssize_t n = ::write(pipe_fds[1], message.data() + done, message.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::_exit(code);
  }
  ::close(pipe_fds[1]);
  Outcome out;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) out.message.append(buffer, n);
  ::close(pipe_fds[0]);
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  out.max_rss_kb = usage.ru_maxrss;
  out.status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return out;
}

// Runs the mutants of every base whose name starts with `prefix` ("" for all); returns the largest
// resident size a child reached, in KiB.
long run_mutants(const std::string& prefix) {
  long max_rss_kb = 0;
  int count = 0;
  const fs::path dir = slide_test::scratch_dir() / "mutants";
  fs::create_directories(dir);
  for (const Base& base : bases()) {
    for (const synth::DicomMutant& m : base.mutants) {
      if (m.name.rfind(prefix, 0) != 0) continue;
      const std::string path = (dir / (base.name + "-" + m.name + ".dcm")).string();
      std::ofstream(path, std::ios::binary).write(m.bytes.data(), static_cast<std::streamsize>(m.bytes.size()));
      const Outcome o = open_in_child(path);
      ++count;
      max_rss_kb = std::max(max_rss_kb, o.max_rss_kb);
      const std::string what = base.name + "-" + m.name + ": " + o.message;
      EXPECT_LT(o.status, 128) << what << " (signal " << o.status - 128 << ")";
      EXPECT_NE(o.status, 4) << what << " (not an IoError)";
      if (o.status == 3) EXPECT_NE(o.message.find(path), std::string::npos) << what;
      if (m.must_open) EXPECT_EQ(o.status, 0) << what;
      if (!m.refusal.empty()) {
        EXPECT_EQ(o.status, 3) << what;
        EXPECT_NE(o.message.find(m.refusal), std::string::npos) << what << "\nexpected: " << m.refusal;
      }
      fs::remove(path);
    }
  }
  EXPECT_GT(count, 0) << prefix;
  std::printf("%d mutants '%s*': largest child resident size %.1f MiB\n", count, prefix.c_str(),
              max_rss_kb / 1024.0);
  return max_rss_kb;
}

// Issue 30, item 2: a private sequence nested 6,000, 20,000 or 200,000 deep before Pixel Data
// crashed DCMTK's recursive parse (SIGSEGV); it is refused, naming the file and the limit, and a
// nesting within the limit is still read.
TEST(DicomFuzz, DeepNestingIsRefusedNamingTheFile) { run_mutants("nested-"); }

// Issue 30, item 3: Number of Frames = real + 2^(64 - tz(frame bytes)) wrapped frames x frame
// bytes to the real length, and the frame table took 6.1 GB.
TEST(DicomFuzz, FrameCountsAreCheckedAgainstTheFile) { run_mutants("frames-"); }

// Issue 30, item 6: a Total Pixel Matrix of 4294967295^2 in 1x1 tiles wrapped the grid's size
// and threw std::length_error, which ended the whole job.
TEST(DicomFuzz, HugeMatrixIsRefusedNamingTheGrid) { run_mutants("matrix-"); }

// An offset table of 2,000,000 entries over one fragment fewer: each entry was looked up by a
// linear scan (hours, until the watchdog); a binary search answers at once.
TEST(DicomFuzz, LargeOffsetTableIsSearchedNotScanned) { run_mutants("offset-table-"); }

// Every kind, byte flips included: no signal, no hang, no exception but IoError naming the file.
TEST(DicomFuzz, WholeCorpusFailsCleanly) {
  const long max_rss_kb = run_mutants("");
  EXPECT_LT(max_rss_kb, static_cast<long>(kAddressSpace >> 10));
}

}  // namespace
}  // namespace tessera
