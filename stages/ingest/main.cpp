// ingest: embeddings of a completed embed output into K FAISS shards with their metadata.
#include "common/core/options.h"
#include "common/mpi/mpi_main.h"
#include "stages/ingest/config.h"
#include "stages/ingest/ingest.h"

int main(int argc, char** argv) {
  namespace in = tessera::ingest;
  return tessera::mpi_main(argc, argv, in::kUsage, in::option_table(),
                           [](const tessera::po::variables_map& values) -> tessera::StageMain {
                             return [config = in::config_from(values)](tessera::Comm& comm) {
                               return in::run(config, comm);
                             };
                           });
}
