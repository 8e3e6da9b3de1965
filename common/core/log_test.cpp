#include "common/core/log.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <thread>

#include "common/core/error.h"

namespace tessera {
namespace {

TEST(Logging, LinesCarryTheProcessRankOrTheThreadsOwn) {
  EXPECT_THROW(init_logging(0, 1, "chatty"), InvalidInput);
  init_logging(1, 4, "error");
  init_logging(1, 4, "info");  // calling again reconfigures
  ::testing::internal::CaptureStderr();
  spdlog::info("from the process");
  {
    ScopedLogRank outer(2, 3);
    spdlog::info("from rank two");
    {
      ScopedLogRank inner(0, 3);
      spdlog::info("from rank zero");
    }
    spdlog::info("from rank two again");
    // Another thread keeps the process's tag.
    std::thread([] { spdlog::info("from another thread"); }).join();
  }
  spdlog::info("from the process again");
  const std::string out = ::testing::internal::GetCapturedStderr();
  spdlog::set_level(spdlog::level::warn);
  for (const char* line : {"[info] [rank 1/4] from the process\n",
                           "[info] [rank 2/3] from rank two\n",
                           "[info] [rank 0/3] from rank zero\n",
                           "[info] [rank 2/3] from rank two again\n",
                           "[info] [rank 1/4] from another thread\n",
                           "[info] [rank 1/4] from the process again\n"}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "\nin:\n" << out;
  }
}

}  // namespace
}  // namespace tessera
