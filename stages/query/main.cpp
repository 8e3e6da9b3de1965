// query: nearest-neighbour search over an ingest output's shards, with metadata filters.
#include "common/core/options.h"
#include "common/mpi/mpi_main.h"
#include "stages/query/config.h"
#include "stages/query/query.h"

int main(int argc, char** argv) {
  namespace q = tessera::query;
  return tessera::mpi_main(argc, argv, q::kUsage, q::option_table(),
                           [](const tessera::po::variables_map& values) -> tessera::StageMain {
                             return [config = q::config_from(values)](tessera::Comm& comm) {
                               return q::run(config, comm);
                             };
                           });
}
