// embed: batched foundation-model inference over patchgen's patch stores.
#include "common/mpi/mpi_main.h"
#include "stages/embed/config.h"
#include "stages/embed/embed.h"

int main(int argc, char** argv) {
  namespace em = tessera::embed;
  tessera::po::options_description desc("embed options");
  em::add_options(desc);
  return tessera::mpi_main(argc, argv, em::kUsage, desc,
                           [](const tessera::po::variables_map& values, tessera::Comm& comm) {
                             return em::run(em::config_from(values), comm);
                           });
}
