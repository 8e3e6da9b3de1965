// patchgen: tissue detection and partitioned patch extraction into HDF5 shards.
#include "common/core/options.h"
#include "common/mpi/mpi_main.h"
#include "stages/patchgen/config.h"
#include "stages/patchgen/patchgen.h"

int main(int argc, char** argv) {
  namespace pg = tessera::patchgen;
  return tessera::mpi_main(argc, argv, pg::kUsage, pg::option_table(),
                           [](const tessera::po::variables_map& values) -> tessera::StageMain {
                             return [config = pg::config_from(values)](tessera::Comm& comm) {
                               return pg::run(config, comm);
                             };
                           });
}
