# Records the git revision at configure time; build/version.cpp is regenerated on each configure.
find_package(Git QUIET)
set(TESSERA_GIT_REVISION "unknown")
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} describe --always --dirty --abbrev=12
                  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
                  OUTPUT_VARIABLE _rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                  RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND _rev)
    set(TESSERA_GIT_REVISION "${_rev}")
  endif()
endif()
