// agree_on_failure (common/mpi/comm.h) at R = 1..3 ranks as threads, for every kind of error a
// rank can throw, and for every set of failing ranks: every rank must throw the same type, exit
// code and message, the lowest failing rank's.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "common/core/error.h"
#include "common/mpi/comm.h"
#include "common/mpi/thread_comm.h"

namespace tessera {
namespace {

// What a rank throws, by kind.
enum class Kind { kError, kErrorCode3, kIoError, kInvalidInput, kStdException, kNotStd };

[[noreturn]] void throw_kind(Kind kind, const std::string& message) {
  switch (kind) {
    case Kind::kError: throw Error(message);
    case Kind::kErrorCode3: throw Error(message, kExitSlidesFailed);
    case Kind::kIoError: throw IoError(message);
    case Kind::kInvalidInput: throw InvalidInput(message);
    case Kind::kStdException: throw std::runtime_error(message);
    case Kind::kNotStd: throw 42;
  }
  throw Error("unreachable");
}

// The most derived tessera type an agreed error has: "InvalidInput", "IoError" or "Error".
std::string type_of(const Error& e) {
  if (dynamic_cast<const InvalidInput*>(&e)) return "InvalidInput";
  if (dynamic_cast<const IoError*>(&e)) return "IoError";
  return "Error";
}

struct Expected {
  std::string type;
  int exit_code;
};

Expected expected_for(Kind kind) {
  switch (kind) {
    case Kind::kError: return {"Error", kExitError};
    case Kind::kErrorCode3: return {"Error", kExitSlidesFailed};
    case Kind::kIoError: return {"IoError", kExitError};
    case Kind::kInvalidInput: return {"InvalidInput", kExitBadInput};
    case Kind::kStdException: return {"Error", kExitError};
    case Kind::kNotStd: return {"Error", kExitError};
  }
  return {"", -1};
}

struct Case {
  int ranks;
  Kind kind;
};

class AgreeOnFailure : public ::testing::TestWithParam<Case> {};

TEST_P(AgreeOnFailure, EveryRankThrowsTheLowestFailingRanksError) {
  const int R = GetParam().ranks;
  const Kind kind = GetParam().kind;
  const Expected want = expected_for(kind);
  // Every non-empty set of failing ranks, as a bit mask.
  for (int failing = 1; failing < (1 << R); ++failing) {
    int lowest = 0;
    while (!(failing & (1 << lowest))) ++lowest;
    const std::string message =
        kind == Kind::kNotStd ? "an exception that is not a std::exception"
                              : "bad thing on rank " + std::to_string(lowest);
    const std::string agreed = lowest == 0 ? message : "rank " + std::to_string(lowest) + ": " + message;
    run_ranks(R, [&](Comm& comm) {
      int ran = 0;
      try {
        agree_on_failure(comm, [&] {
          ++ran;
          if (failing & (1 << comm.rank())) {
            throw_kind(kind, "bad thing on rank " + std::to_string(comm.rank()));
          }
        });
        ADD_FAILURE() << "rank " << comm.rank() << " did not throw (failing ranks " << failing << ")";
      } catch (const Error& e) {
        EXPECT_EQ(type_of(e), want.type) << "rank " << comm.rank() << ", failing " << failing;
        EXPECT_EQ(e.exit_code(), want.exit_code) << "rank " << comm.rank();
        EXPECT_EQ(std::string(e.what()), agreed) << "rank " << comm.rank();
      }
      EXPECT_EQ(ran, 1) << "the step runs once on every rank";
      // The ranks still agree afterwards: the next collective pairs up.
      EXPECT_EQ(comm.allreduce_sum(int64_t{1}), R);
      return 0;
    });
  }
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int r = 1; r <= 3; ++r) {
    for (Kind k : {Kind::kError, Kind::kErrorCode3, Kind::kIoError, Kind::kInvalidInput,
                   Kind::kStdException, Kind::kNotStd}) {
      all.push_back({r, k});
    }
  }
  return all;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  static const char* const kNames[] = {"Error", "ErrorCode3", "IoError", "InvalidInput",
                                       "StdException", "NotStd"};
  return "R" + std::to_string(info.param.ranks) + "_" +
         kNames[static_cast<int>(info.param.kind)];
}

INSTANTIATE_TEST_SUITE_P(RanksAndKinds, AgreeOnFailure, ::testing::ValuesIn(cases()), case_name);

TEST(AgreeOnFailureSuccess, ReturnsOnEveryRankWhenNoneFails) {
  for (int R = 1; R <= 3; ++R) {
    run_ranks(R, [&](Comm& comm) {
      int ran = 0;
      agree_on_failure(comm, [&] { ++ran; });
      EXPECT_EQ(ran, 1);
      EXPECT_EQ(comm.allreduce_sum(int64_t{1}), R);
      return 0;
    });
  }
}

TEST(AgreeOnFailureSuccess, ASerialCommKeepsTheErrorAsItWas) {
  SerialComm comm;
  EXPECT_NO_THROW(agree_on_failure(comm, [] {}));
  try {
    agree_on_failure(comm, [] { throw InvalidInput("invalid --stride: 0"); });
    ADD_FAILURE() << "no exception";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "invalid --stride: 0");
    EXPECT_EQ(e.exit_code(), kExitBadInput);
  }
}

}  // namespace
}  // namespace tessera
