// embed: batched foundation-model inference over patchgen's patch stores.
#include "common/core/cpu.h"
#include "common/core/options.h"
#include "common/mpi/mpi_main.h"
#include "stages/embed/config.h"
#include "stages/embed/embed.h"

int main(int argc, char** argv) {
  namespace em = tessera::embed;
  tessera::keep_freed_memory();  // activations reused, not page-faulted in every batch
  return tessera::mpi_main(argc, argv, em::kUsage, em::option_table(),
                           [](const tessera::po::variables_map& values) -> tessera::StageMain {
                             return [config = em::config_from(values)](tessera::Comm& comm) {
                               return em::run(config, comm);
                             };
                           });
}
