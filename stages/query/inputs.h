// Readers for what a user hands to `query`: query vectors (NumPy .npy or an HDF5 dataset) and
// query images (PNG or JPEG). All functions are pure readers, thread-safe for any arguments, and
// report a missing file and malformed content as InvalidInput and an unreadable one as IoError; every
// message names the file (and the dataset) and the problem.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/slide/png_io.h"

namespace tessera::query {

// A dense row-major float32 matrix: rows vectors of cols values each.
struct Matrix {
  int64_t rows = 0;
  int cols = 0;
  std::vector<float> values;  // rows * cols values, row after row
};

// Reads a NumPy .npy file (format versions 1.0, 2.0 and 3.0) holding little-endian float32 ('<f4')
// or float64 ('<f8', converted to float32) values of shape (rows, cols), or (cols,) read as one
// row. Fortran-order arrays are transposed into row-major order. Zero rows are allowed; zero
// columns are not. Throws InvalidInput naming the file for a bad magic string or version, a header
// that cannot be parsed, another dtype ('<i8', '>f4', ...), a shape of another rank, data shorter
// or longer than the shape says, or a non-finite value (naming its row); IoError when the file
// cannot be read.
Matrix read_npy(const std::string& path);

// Reads the 1-D or 2-D floating-point dataset `dataset` (an absolute or root-relative HDF5 path)
// of the HDF5 file `path`, converted to float32; a 1-D dataset is one row. Throws InvalidInput
// naming file and dataset when the dataset is missing, not a dataset, of another rank or not
// floating point, has zero columns, or holds a non-finite value; IoError when the file cannot be
// opened or read as HDF5.
Matrix read_vectors_h5(const std::string& path, const std::string& dataset);

// Reads query vectors named by `spec`:
//   FILE            a .npy file or an HDF5 file, told apart by their signatures (not the name);
//                   in HDF5 the dataset is /embeddings, else /features, else the only 2-D
//                   floating-point dataset anywhere in the file;
//   FILE:DATASET    an HDF5 file and a dataset path in it ("emb.h5:/run1/embeddings"); the split
//                   is at the last ':' whose left side is an existing file.
// Throws InvalidInput when the file is neither format, when no dataset (or several candidates)
// fit, when a dataset is named for a .npy file, or when the matrix has no rows; otherwise as
// read_npy / read_vectors_h5.
Matrix read_query_vectors(const std::string& spec);

// Reads a PNG or JPEG image, told apart by their signatures (not the extension), as 8-bit RGB
// (channels == 3 always; gray is replicated, alpha dropped). Images over 2^28 pixels are refused
// from their header, before any pixel memory is allocated. Throws InvalidInput naming the path
// when the file does not exist, is neither PNG nor JPEG, or is a PNG or JPEG that cannot be
// decoded completely (including a truncated one); IoError when an existing file cannot be
// opened.
Image8 read_image(const std::string& path);

}  // namespace tessera::query
