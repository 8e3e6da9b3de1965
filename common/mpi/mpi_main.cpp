#include "common/mpi/mpi_main.h"

#include "common/mpi/mpi_comm.h"

#include <iostream>

#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/h5/h5.h"
#include "common/core/log.h"

namespace tessera {

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  mpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "Init_thread");
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

int mpi_main(int argc, char** argv, const std::string& usage, po::options_description desc,
             const StageBody& body) {
  MpiSession session(&argc, &argv);
  int code = kExitOk;
  {
    MpiComm comm(MPI_COMM_WORLD);
    add_common_options(desc);
    std::vector<std::string> args(argv + 1, argv + argc);
    ParsedOptions parsed;
    try {
      parsed = parse_options(desc, args);
      if (parsed.help) {
        if (comm.rank() == 0) std::cout << help_text(usage, desc);
        return kExitOk;
      }
      init_logging(comm.rank(), comm.size(), parsed.values["log-level"].as<std::string>());
    } catch (const Error& e) {
      if (comm.rank() == 0) std::cerr << "error: " << e.what() << "\n";
      return e.exit_code();
    }
    h5::init();
    try {
      code = body(parsed.values, comm);
    } catch (const Error& e) {
      spdlog::error("{}", e.what());
      spdlog::default_logger()->flush();
      // Bad input (exit code 2) is found before anything is written. Any other error may leave
      // an HDF5 file that cannot be flushed (a full disk), and HDF5 1.10's teardown in
      // MPI_Finalize crashes on one: end the job without it, as with several ranks.
      if (comm.size() > 1 || e.exit_code() != kExitBadInput) comm.abort(e.exit_code());
      code = e.exit_code();
    } catch (const std::exception& e) {
      spdlog::error("unexpected error: {}", e.what());
      spdlog::default_logger()->flush();
      comm.abort(kExitError);
      code = kExitError;
    }
  }
  return code;
}

}  // namespace tessera
