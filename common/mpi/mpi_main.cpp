#include "common/mpi/mpi_main.h"

#include "common/mpi/mpi_comm.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/h5/h5.h"
#include "common/core/log.h"

namespace tessera {

namespace {

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown thread level";
  }
}

// What the options ask of the process once every rank has parsed them.
enum class Request { kRun, kHelp, kHelpAll, kVersion };

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  mpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &thread_level_), "Init_thread");
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

bool started_by_mpi_launcher(const std::function<const char*(const char*)>& environment) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "PMI_FD",
                           "MPI_LOCALNRANKS"}) {
    if (environment(name) != nullptr) return true;
  }
  // srun of several tasks without an MPI plug-in: each would be a singleton under MPI too, but
  // MPI_Init is kept so that the job behaves exactly as MPI makes it.
  const char* tasks = environment("SLURM_STEP_NUM_TASKS");
  return tasks != nullptr && std::atoi(tasks) > 1;
}

void check_thread_level(int provided) {
  if (provided < MPI_THREAD_FUNNELED) {
    fail("the MPI library provides {} but tessera needs MPI_THREAD_FUNNELED (worker threads run "
         "while the main thread calls MPI): use an MPI library built with thread support",
         thread_level_name(provided));
  }
}

namespace {

// --version and --help need no MPI: they are answered before MPI_Init, which is most of a short
// run's start-up. Returns nullopt when the arguments ask for something else or do not parse (the
// collective path then reports the error). Under mpirun only the first rank prints.
std::optional<int> answer_without_mpi(int argc, char** argv, const std::string& usage,
                                      OptionTable table) {
  po::options_description common("General");
  add_common_options(common);
  table.add(common, OptionKind::kRunControl);
  ParsedOptions parsed;
  try {
    parsed = parse_options(table.description(), std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (!parsed.version && !parsed.help && !parsed.help_all) return std::nullopt;
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (rank == nullptr || std::string(rank) == "0") {
    const std::string program =
        argc > 0 ? std::filesystem::path(argv[0]).filename().string() : std::string("tessera");
    std::cout << (parsed.version ? version_text(program)
                                 : help_text(usage, table.help_description(parsed.help_all)));
  }
  return kExitOk;
}

}  // namespace

int mpi_main(int argc, char** argv, const std::string& usage, OptionTable table,
             const StageSetup& setup) {
  if (const std::optional<int> answered = answer_without_mpi(argc, argv, usage, table)) {
    return *answered;
  }
  std::optional<MpiSession> session;
  std::unique_ptr<Comm> world;
  if (started_by_mpi_launcher([](const char* name) { return std::getenv(name); })) {
    session.emplace(&argc, &argv);
    world = std::make_unique<MpiComm>(MPI_COMM_WORLD);
  } else {
    world = std::make_unique<SerialComm>();
  }
  const std::string program =
      argc > 0 ? std::filesystem::path(argv[0]).filename().string() : std::string("tessera");
  int code = kExitOk;
  {
    Comm& comm = *world;
    po::options_description common("General");
    add_common_options(common);
    table.add(common, OptionKind::kRunControl);
    const po::options_description desc = table.description();
    std::vector<std::string> args(argv + 1, argv + argc);

    Request request = Request::kRun;
    StageMain run;
    try {
      agree_on_failure(comm, [&] {
        try {
          if (session) check_thread_level(session->thread_level());
          ParsedOptions parsed = parse_options(desc, args);
          if (parsed.version) {
            request = Request::kVersion;
          } else if (parsed.help_all) {
            request = Request::kHelpAll;
          } else if (parsed.help) {
            request = Request::kHelp;
          } else {
            init_logging(comm.rank(), comm.size(), parsed.values["log-level"].as<std::string>());
            run = setup(parsed.values);
          }
        } catch (const Error&) {
          throw;
        } catch (const std::exception& e) {
          fail("unexpected error: {}", e.what());
        }
      });
    } catch (const Error& e) {
      // The same style as an error of the run: a log line of rank 0.
      if (comm.rank() == 0) {
        init_logging(comm.rank(), comm.size(), "info");
        spdlog::error("{}", e.what());
        spdlog::default_logger()->flush();
      }
      return e.exit_code();
    }
    if (request != Request::kRun) {
      if (comm.rank() == 0) {
        if (request == Request::kVersion) {
          std::cout << version_text(program);
        } else {
          std::cout << help_text(usage, table.help_description(request == Request::kHelpAll));
        }
      }
      return kExitOk;
    }

    h5::init();
    try {
      code = run(comm);
    } catch (const Error& e) {
      spdlog::error("{}", e.what());
      spdlog::default_logger()->flush();
      // Bad input (exit code 2) is found before anything is written. Any other error may leave
      // an HDF5 file open that cannot be flushed (a full disk), which HDF5's teardown at exit
      // would try to flush again: end the job at once, as with several ranks.
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

int mpi_main(int argc, char** argv, const std::string& usage, po::options_description desc,
             const DriverBody& body) {
  OptionTable table;
  table.add(desc, OptionKind::kResult);
  return mpi_main(argc, argv, usage, std::move(table),
                  [&body](const po::variables_map& options) -> StageMain {
                    return [&body, options](Comm& comm) { return body(options, comm); };
                  });
}

}  // namespace tessera
