// Where query writes: the results (standard output or --output) and the mosaics (--mosaic).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace tessera::query {

// Checks a file that `option` ("--output", "--mosaic") asks query to write, before any work. Throws
// InvalidInput naming the option and the path when its directory does not exist (query creates no
// directories), when it is a directory, a symbolic link or another file that is not regular (a
// device or pipe, which the rename would replace), or when it lies inside a stage folder of a run, where it
// could replace an index's own files: RUN/patchgen, RUN/embed or RUN/ingest of the run that holds
// `index_dir` (RUN/ingest/<name>), or any directory holding run.json, catalog.json or _SUCCESS.
void check_output_path(const std::string& option, const std::string& path,
                       const std::string& index_dir);

// The results as they are produced, in pieces: to standard output, or to `path` through a
// temporary file beside it that commit() makes durable and renames onto it, so that a failed query
// leaves no partial file under the name. Move-only in spirit (copying is deleted); not
// thread-safe. Throws IoError naming the file when it cannot be written.
class ResultSink {
 public:
  explicit ResultSink(std::string path);  // "" = standard output
  ~ResultSink();                          // removes an uncommitted temporary file
  ResultSink(const ResultSink&) = delete;
  ResultSink& operator=(const ResultSink&) = delete;

  void write(std::string_view text);
  void commit();

 private:
  std::string path_, tmp_;
  std::FILE* file_ = nullptr;
};

}  // namespace tessera::query
