// tessera-status: the state of a run directory, stage by stage and part by part (single process,
// no MPI).
#include <iostream>
#include <string>
#include <vector>

#include "stages/status/status.h"

int main(int argc, char** argv) {
  return tessera::status::status_main(std::vector<std::string>(argv + 1, argv + argc), std::cout,
                                      std::cerr);
}
