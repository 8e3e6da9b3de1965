# Every dependency is found here once, so stage CMakeLists only link imported targets.
find_package(MPI REQUIRED COMPONENTS C CXX)
find_package(Boost REQUIRED COMPONENTS program_options)
find_package(spdlog REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
# The serial, thread-safe HDF5 build (docs/architecture.md says why not the parallel one). Found
# through its own pkg-config name so an installed parallel build is never picked by accident.
pkg_check_modules(HDF5 REQUIRED IMPORTED_TARGET hdf5-serial)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(PNG REQUIRED IMPORTED_TARGET libpng)
pkg_check_modules(TURBOJPEG REQUIRED IMPORTED_TARGET libturbojpeg)
# libjpeg-turbo's libjpeg API (same library as TurboJPEG): the direct tile reader must set the
# JPEG colour space as OpenSlide does, which the TurboJPEG API cannot.
pkg_check_modules(JPEG REQUIRED IMPORTED_TARGET libjpeg)
# The slide library (OpenSlide, libtiff, OpenCV core/imgproc) serves patchgen, embed's
# --source wsi and query's patch pixels and mosaics.
set(TESSERA_NEEDS_SLIDE OFF)
if(TESSERA_BUILD_PATCHGEN OR TESSERA_BUILD_EMBED OR TESSERA_BUILD_INGEST)
  set(TESSERA_NEEDS_SLIDE ON)
endif()
if(TESSERA_NEEDS_SLIDE)
  pkg_check_modules(OPENSLIDE REQUIRED IMPORTED_TARGET openslide)
  pkg_check_modules(TIFF REQUIRED IMPORTED_TARGET libtiff-4)
  # DICOM whole-slide images: DCMTK parses the attributes (only its dcmdata library is linked),
  # OpenJPEG decodes JPEG 2000 frames.
  find_package(DCMTK CONFIG REQUIRED)
  pkg_check_modules(OPENJPEG REQUIRED IMPORTED_TARGET libopenjp2)
  # Debian ships OpenCV's CMake config only in the full libopencv-dev (which drags imgcodecs, GDAL
  # and a serial HDF5 in); core and imgproc are found directly instead.
  find_path(OPENCV_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4 REQUIRED)
  foreach(module core imgproc)
    find_library(OPENCV_${module}_LIBRARY opencv_${module} REQUIRED)
    add_library(opencv_${module} SHARED IMPORTED GLOBAL)
    set_target_properties(opencv_${module} PROPERTIES
      IMPORTED_LOCATION ${OPENCV_${module}_LIBRARY}
      INTERFACE_INCLUDE_DIRECTORIES ${OPENCV_INCLUDE_DIR})
  endforeach()
endif()
if(TESSERA_BUILD_EMBED)
  find_package(Torch REQUIRED)
endif()
if(TESSERA_BUILD_INGEST)
  # Debian's FAISS is a static library built with OpenMP; its CMake config expects the OpenMP
  # targets to exist already.
  find_package(OpenMP REQUIRED COMPONENTS CXX)
  find_package(faiss REQUIRED)
endif()
if(TESSERA_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(TESSERA_BUILD_BENCHMARKS)
  find_package(benchmark QUIET)
endif()
