# Programs of native_tests/ that are not part of the upstream series (the 29-case gate test, the
# training evidence), added to any ggml build: included by the harness, or through
# CMAKE_PROJECT_INCLUDE into a layout's own build (ggml's), where it runs once ggml's targets exist
# (deferred to the end of the top-level directory).
include_guard(GLOBAL)

set(GGML_PATCH_NATIVE_TESTS "${CMAKE_CURRENT_LIST_DIR}")

function(ggml_patch_add_programs)
    if (NOT TARGET ggml)
        message(FATAL_ERROR "native_tests/extra-programs.cmake: no 'ggml' target to link the training program to")
    endif()
    # the gate: from native_tests/ unless the tree has it (a series that carries it, upstream approval recorded)
    if (NOT TARGET test-opt-dynamic-accum)
        add_executable(test-opt-dynamic-accum "${GGML_PATCH_NATIVE_TESTS}/test-opt-dynamic-accum.cpp")
        target_link_libraries(test-opt-dynamic-accum PRIVATE ggml)
        set_target_properties(test-opt-dynamic-accum PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bin")
    endif()
    add_executable(train-opt-dynamic "${GGML_PATCH_NATIVE_TESTS}/train-opt-dynamic.cpp")
    target_link_libraries(train-opt-dynamic PRIVATE ggml)
    set_target_properties(train-opt-dynamic PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bin")
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL ggml_patch_add_programs)
