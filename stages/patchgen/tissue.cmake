# Tissue detection, external masks, tissue fractions and QC images (included by this directory's
# CMakeLists.txt). OpenCV core/imgproc, OpenSlide and libtiff are found in cmake/TesseraDeps.cmake.
add_library(tessera_tissue STATIC
  ${CMAKE_CURRENT_LIST_DIR}/tissue.cpp
  ${CMAKE_CURRENT_LIST_DIR}/qc.cpp
)
target_link_libraries(tessera_tissue
  PUBLIC tessera_slide
  PRIVATE opencv_core opencv_imgproc PkgConfig::TIFF)

if(TESSERA_BUILD_TESTS)
  add_serial_test(tissue_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/tissue_test.cpp ${CMAKE_CURRENT_LIST_DIR}/tissue_mask_test.cpp
            ${CMAKE_CURRENT_LIST_DIR}/qc_test.cpp
    LIBS tessera_tissue tessera_synthslide opencv_core opencv_imgproc PkgConfig::TIFF
         GTest::gtest)
endif()
