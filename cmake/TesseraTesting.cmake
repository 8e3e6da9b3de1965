# add_serial_test(NAME SOURCES ... LIBS ... [COST seconds]): a GoogleTest executable run once by
# CTest; COST as for the end-to-end tests (tests/CMakeLists.txt), for the few that take long.
# add_mpi_test(NAME NPROCS n... SOURCES ... LIBS ...): one executable, one CTest case per rank
# count, each launched as `mpirun -np n` with a gtest main that initialises MPI.
# odls_base_sigkill_timeout 0: when a rank exits non-zero, Open MPI signals the job's processes
# and by default waits 1 s twice before it returns; tests run hundreds of jobs that fail on purpose.
# mpi_yield_when_idle 1: a rank waiting in a collective (serve's ranks wait for rank 0's next
# command in MPI_Bcast) polls; yielding leaves the core to the other tests that ctest -j runs.
set(TESSERA_MPIEXEC_FLAGS --oversubscribe --allow-run-as-root --mca btl self,vader
    --mca odls_base_sigkill_timeout 0 --mca mpi_yield_when_idle 1
    CACHE STRING "Extra flags for mpirun in tests")

# The tests' own code is compiled with TESSERA_TEST_OPTIMIZATION (-O0 -g0), the code they test with
# the build type's flags: optimising or describing a test program's own code buys nothing (its
# failures are named by GoogleTest) and costs a third more compile time.
set(TESSERA_TEST_OPTIMIZATION -O0 -g0 CACHE STRING "Optimisation of test programs' own sources")

# tessera_test_target(TARGET): compiles TARGET, a test program or test-only library, as above.
function(tessera_test_target target)
  if(CMAKE_BUILD_TYPE MATCHES "^(RelWithDebInfo|Release|MinSizeRel)$")
    target_compile_options(${target} PRIVATE ${TESSERA_TEST_OPTIMIZATION})
  endif()
endfunction()

function(add_serial_test name)
  cmake_parse_arguments(T "" "TIMEOUT;COST" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} tessera_gtest_main)
  tessera_test_target(${name})
  add_test(NAME ${name} COMMAND ${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "serial;${T_LABELS}")
  if(T_COST)
    set_tests_properties(${name} PROPERTIES COST ${T_COST})
  endif()
endfunction()

function(add_mpi_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "NPROCS;SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} tessera_gtest_mpi_main)
  tessera_test_target(${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  foreach(n IN LISTS T_NPROCS)
    add_test(NAME ${name}_np${n}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} ${TESSERA_MPIEXEC_FLAGS}
                     $<TARGET_FILE:${name}>)
    set_tests_properties(${name}_np${n} PROPERTIES TIMEOUT ${T_TIMEOUT} PROCESSORS ${n}
                         LABELS "mpi;${T_LABELS}")
  endforeach()
endfunction()
