# Precompiled headers: the standard and third-party headers nearly every file includes (the C++
# library, fmt, spdlog, nlohmann/json, Boost.Program_options; gtest for tests) are compiled once
# for the libraries and executables (tessera_pch) and once for the test programs
# (tessera_test_pch, at the tests' optimisation level), and every target reuses one of the two.
# With unity builds this saves their parse in each of some 160 translation units.
# tessera_use_pch() is called once, at the end of the top-level CMakeLists.txt.
option(TESSERA_PCH "Precompile the common headers once and reuse them in every target" ON)

set(_tessera_pch_headers
  <algorithm> <array> <atomic> <chrono> <cmath> <cstdint> <cstring> <filesystem> <fstream>
  <functional> <map> <memory> <mutex> <optional> <set> <sstream> <string> <string_view> <thread>
  <unordered_map> <utility> <vector>
  <fmt/format.h> <spdlog/spdlog.h> <nlohmann/json.hpp> <boost/program_options.hpp>)

# The targets in DIR and the directories below it.
function(_tessera_targets_below dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _tessera_targets_below(${sub} below)
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(tessera_use_pch)
  if(NOT TESSERA_PCH)
    return()
  endif()
  add_library(tessera_pch STATIC ${PROJECT_SOURCE_DIR}/cmake/pch.cpp)
  target_link_libraries(tessera_pch PRIVATE tessera_core)
  target_precompile_headers(tessera_pch PRIVATE ${_tessera_pch_headers})
  if(TARGET GTest::gtest)
    add_library(tessera_test_pch STATIC ${PROJECT_SOURCE_DIR}/cmake/pch.cpp)
    target_link_libraries(tessera_test_pch PRIVATE tessera_core GTest::gtest)
    target_precompile_headers(tessera_test_pch PRIVATE ${_tessera_pch_headers} <gtest/gtest.h>)
    tessera_test_target(tessera_test_pch)
  endif()
  _tessera_targets_below(${PROJECT_SOURCE_DIR} targets)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|EXECUTABLE)$" OR target MATCHES "^tessera_(test_)?pch$")
      continue()
    endif()
    get_target_property(is_test ${target} TESSERA_TEST)
    if(is_test AND TARGET tessera_test_pch)
      target_precompile_headers(${target} REUSE_FROM tessera_test_pch)
    else()
      target_precompile_headers(${target} REUSE_FROM tessera_pch)
    endif()
  endforeach()
endfunction()
