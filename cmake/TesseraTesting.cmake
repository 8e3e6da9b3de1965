# add_serial_test(NAME SOURCES ... LIBS ...): a GoogleTest executable run once by CTest.
# add_mpi_test(NAME NPROCS n... SOURCES ... LIBS ...): one executable, one CTest case per rank
# count, each launched as `mpirun -np n` with a gtest main that initialises MPI.
set(TESSERA_MPIEXEC_FLAGS --oversubscribe --allow-run-as-root --mca btl self,vader
    CACHE STRING "Extra flags for mpirun in tests")

function(add_serial_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} tessera_gtest_main)
  add_test(NAME ${name} COMMAND ${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "serial;${T_LABELS}")
endfunction()

function(add_mpi_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "NPROCS;SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} tessera_gtest_mpi_main)
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
