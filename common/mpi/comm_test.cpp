#include "common/mpi/comm.h"

#include <gtest/gtest.h>

#include "common/core/error.h"

namespace tessera {
namespace {

TEST(DecidedByRoot, ReturnsTheResultOrRethrowsByKind) {
  SerialComm comm;
  EXPECT_EQ(decided_by_root(comm, [] { return std::string("plan"); }), "plan");
  EXPECT_EQ(decided_by_root(comm, [] { return std::string(); }), "");
  EXPECT_THROW(decided_by_root(comm, []() -> std::string { throw InvalidInput("bad option"); }),
               InvalidInput);
  try {
    decided_by_root(comm, []() -> std::string { throw IoError("disk full"); });
    ADD_FAILURE() << "no exception";
  } catch (const InvalidInput&) {
    ADD_FAILURE() << "an I/O error became bad input";
  } catch (const IoError& e) {
    EXPECT_STREQ(e.what(), "disk full");
    EXPECT_EQ(e.exit_code(), kExitError);
  }
  // A plain Error keeps its own exit code and is not turned into another type.
  try {
    decided_by_root(comm, []() -> std::string { throw Error("slides failed: a: b", 3); });
    ADD_FAILURE() << "no exception";
  } catch (const IoError&) {
    ADD_FAILURE() << "a plain Error became an IoError";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "slides failed: a: b");
    EXPECT_EQ(e.exit_code(), 3);
  }
  EXPECT_THROW(done_by_root(comm, [] { throw IoError("cannot write"); }), IoError);
}

}  // namespace
}  // namespace tessera
