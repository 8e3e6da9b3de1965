// A .npy writer (NumPy format 1.0) for the query vectors ingest_bench hands to `query --vectors`.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::ingest_bench {

// Writes `rows` x `dim` little-endian float32 values, C order, with the header padded so that
// the data starts at a multiple of 64 bytes. Throws IoError naming `path` when it cannot write.
void write_npy(const std::string& path, const float* values, int64_t rows, int dim);

}  // namespace tessera::ingest_bench
