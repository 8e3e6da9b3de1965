// CLAM's default input, and aggregate's slide tensors: a float32 tensor file that Python's
// torch.load reads (torch.save's zip format, written through libtorch's pickler). A library of its
// own (tessera_store_pt, built with embed), the one unit of common/store with torch headers, so
// that only embed and aggregate link libtorch for it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

// Writes `path` (via path.tmp, fsynced and renamed when complete): a float32 tensor of shape
// [rows, dim] holding `values` (rows * dim, row-major), as torch.save(tensor) would; rows may be
// 0. Equal inputs give equal bytes. Holds one serialised copy of the slide in memory. Throws
// IoError naming the file. Thread-safe.
void write_pt_tensor(const std::string& path, const std::vector<float>& values, int64_t rows,
                     int64_t dim);

}  // namespace tessera
