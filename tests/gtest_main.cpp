// The gtest main of serial test executables: HDF5 errors become exceptions, logs stay quiet.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "common/h5/h5.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  spdlog::set_level(spdlog::level::warn);
  tessera::h5::init();
  return RUN_ALL_TESTS();
}
