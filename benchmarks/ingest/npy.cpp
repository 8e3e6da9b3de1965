#include "benchmarks/ingest/npy.h"

#include <fmt/format.h>

#include <fstream>

#include "common/core/error.h"

namespace tessera::ingest_bench {

void write_npy(const std::string& path, const float* values, int64_t rows, int dim) {
  std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}",
                                   rows, dim);
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const auto len = static_cast<uint16_t>(header.size());
  const char le[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(le, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(values),
            static_cast<std::streamsize>(sizeof(float) * rows * dim));
  if (!out) fail<IoError>("cannot write '{}'", path);
}

}  // namespace tessera::ingest_bench
