// patchgen: tissue detection and cyclic-partitioned patch extraction into HDF5 shards.
#include "common/mpi/mpi_main.h"
#include "stages/patchgen/config.h"
#include "stages/patchgen/patchgen.h"

int main(int argc, char** argv) {
  namespace pg = tessera::patchgen;
  tessera::po::options_description desc("patchgen options");
  pg::add_options(desc);
  return tessera::mpi_main(argc, argv, pg::kUsage, desc,
                           [](const tessera::po::variables_map& values, tessera::Comm& comm) {
                             return pg::run(pg::config_from(values), comm);
                           });
}
