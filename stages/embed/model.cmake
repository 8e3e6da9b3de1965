# The model layer of the embed stage, include()d from stages/embed/CMakeLists.txt.
# libtorch headers are compiled only in model.cpp and builtin_models.cpp; torch is linked PRIVATE
# so its include paths do not leak to consumers (the static library still carries the link).
set(_tessera_model_dir ${CMAKE_CURRENT_LIST_DIR})

add_library(tessera_embed_model STATIC
  ${_tessera_model_dir}/builtin_models.cpp
  ${_tessera_model_dir}/model.cpp
  ${_tessera_model_dir}/preprocess.cpp
  ${_tessera_model_dir}/preset.cpp
)
target_link_libraries(tessera_embed_model PUBLIC tessera_core PRIVATE ${TORCH_LIBRARIES})
target_compile_definitions(tessera_embed_model PRIVATE
  TESSERA_SOURCE_MODELS_DIR="${PROJECT_SOURCE_DIR}/configs/models")

if(TESSERA_BUILD_TESTS)
  # The TorchScript test models are made at build time by PyTorch itself (Debian: python3-torch).
  set(TESSERA_TORCH_PYTHON /usr/bin/python3 CACHE FILEPATH
      "Python with torch, used to generate the TorchScript test models of the embed stage")
  execute_process(COMMAND ${TESSERA_TORCH_PYTHON} -c "import torch"
                  RESULT_VARIABLE _tessera_torch_python_rc OUTPUT_QUIET ERROR_QUIET)
  set(_test_models_dir ${CMAKE_CURRENT_BINARY_DIR}/test_models)
  set(_test_models_defs)
  if(_tessera_torch_python_rc EQUAL 0)
    set(_test_models_files)
    foreach(f tokens.pt tokens.ini pooled.pt pooled.json identity.pt identity.ini expected.json)
      list(APPEND _test_models_files ${_test_models_dir}/${f})
    endforeach()
    add_custom_command(
      OUTPUT ${_test_models_files}
      COMMAND ${TESSERA_TORCH_PYTHON} ${_tessera_model_dir}/tools/make_test_torchscript.py
              ${_test_models_dir}
      DEPENDS ${_tessera_model_dir}/tools/make_test_torchscript.py
      COMMENT "Generating TorchScript test models"
      VERBATIM)
    add_custom_target(tessera_embed_test_models DEPENDS ${_test_models_files})
    set(_test_models_defs TESSERA_EMBED_TEST_MODELS="${_test_models_dir}")
  else()
    # A test that skips passes on a machine that lacks what it needs: the project installs it.
    message(FATAL_ERROR "${TESSERA_TORCH_PYTHON} cannot import torch, which the TorchScript cases "
                        "of embed_model_test need: run .ci/bootstrap (python3-torch), set "
                        "TESSERA_TORCH_PYTHON, or configure with -DTESSERA_BUILD_TESTS=OFF")
  endif()

  add_serial_test(embed_model_test
    SOURCES ${_tessera_model_dir}/model_test.cpp ${_tessera_model_dir}/preset_test.cpp
            ${_tessera_model_dir}/preprocess_test.cpp
    LIBS tessera_embed_model GTest::gmock GTest::gtest
    TIMEOUT 300)
  target_compile_definitions(embed_model_test PRIVATE ${_test_models_defs}
                             TESSERA_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  if(TARGET tessera_embed_test_models)
    add_dependencies(embed_model_test tessera_embed_test_models)
  endif()
endif()
