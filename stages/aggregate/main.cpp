// aggregate: slide- or patient-level vectors from a completed embed output.
#include "common/core/options.h"
#include "common/mpi/mpi_main.h"
#include "stages/aggregate/aggregate.h"
#include "stages/aggregate/config.h"

int main(int argc, char** argv) {
  namespace ag = tessera::aggregate;
  return tessera::mpi_main(argc, argv, ag::kUsage, ag::option_table(),
                           [](const tessera::po::variables_map& values) -> tessera::StageMain {
                             return [config = ag::config_from(values)](tessera::Comm& comm) {
                               return ag::run(config, comm);
                             };
                           });
}
