# The git revision compiled into every executable (markers, run.json, benchmark reports).
#
# Included from the top-level CMakeLists.txt, it adds the target tessera_version, which runs this
# file again in script mode (cmake -P) at every build: the revision is taken then, not at
# configure time, and version.cpp is rewritten only when it changed, so an unchanged revision
# rebuilds nothing. `git describe --always --dirty`; "unknown" outside a checkout.
if(CMAKE_SCRIPT_MODE_FILE)
  set(_rev "unknown")
  find_package(Git QUIET)
  if(GIT_FOUND)
    execute_process(COMMAND ${GIT_EXECUTABLE} describe --always --dirty --abbrev=12
                    WORKING_DIRECTORY ${SOURCE_DIR}
                    OUTPUT_VARIABLE _out OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                    RESULT_VARIABLE _rc)
    if(_rc EQUAL 0 AND _out)
      set(_rev "${_out}")
    endif()
  endif()
  set(TESSERA_GIT_REVISION "${_rev}")
  configure_file(${INPUT} ${OUTPUT} @ONLY)
  return()
endif()

set(TESSERA_VERSION_CPP ${PROJECT_BINARY_DIR}/common/version.cpp)
add_custom_target(tessera_version
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
          -DINPUT=${PROJECT_SOURCE_DIR}/common/core/version.cpp.in -DOUTPUT=${TESSERA_VERSION_CPP}
          -DPROJECT_VERSION=${PROJECT_VERSION} -P ${CMAKE_CURRENT_LIST_FILE}
  BYPRODUCTS ${TESSERA_VERSION_CPP}
  COMMENT "Recording the git revision"
  VERBATIM)
