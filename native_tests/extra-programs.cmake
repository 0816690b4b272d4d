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
    # each program of native_tests/ (a gate test a topic declares, a training program): from
    # here unless the tree has it (a series that carries it, upstream approval recorded)
    file(GLOB native_programs "${GGML_PATCH_NATIVE_TESTS}/test-*.cpp" "${GGML_PATCH_NATIVE_TESTS}/train-*.cpp")
    foreach(source IN LISTS native_programs)
        get_filename_component(program "${source}" NAME_WE)
        if (NOT TARGET ${program})
            add_executable(${program} "${source}")
            target_link_libraries(${program} PRIVATE ggml)
            set_target_properties(${program} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bin")
        endif()
    endforeach()
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL ggml_patch_add_programs)
