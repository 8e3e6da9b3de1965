// serve: the index of an ingest output as a search service with a slide viewer in the browser.
#include <spdlog/spdlog.h>

#include "common/core/options.h"
#include "common/mpi/mpi_main.h"
#include "stages/serve/config.h"
#include "stages/serve/serve.h"

int main(int argc, char** argv) {
  namespace s = tessera::serve;
  static s::Controls controls;
  s::install_signal_handlers(controls);
  const int code = tessera::mpi_main(
      argc, argv, s::kUsage, s::option_table(),
      [](const tessera::po::variables_map& values) -> tessera::StageMain {
        return [config = s::config_from(values)](tessera::Comm& comm) {
          const int code = s::run(config, comm, controls);
          s::bound_finalize(controls, code);
          return code;
        };
      });
  if (controls.stop_signal.load() != 0) spdlog::info("exit {}", code);
  return code;
}
