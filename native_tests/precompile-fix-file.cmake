# Build speed only, for the tool's own builds: a run recompiles ggml-opt.cpp once per control,
# known-wrong and competing fix (dozens), and a quarter of each recompile is parsing the standard
# headers it includes. With GGML_PATCH_PRECOMPILE=ON those headers (its own `#include <...>`
# lines, in its order) are precompiled once per build tree. The code compiled is the same; the
# other sources of ggml-base are left as they are. With ccache the tool sets the sloppiness
# (pch_defines,time_macros) ccache needs to cache these compiles. Included by the harness, or
# through CMAKE_PROJECT_ggml_INCLUDE into ggml's own build, where it runs once ggml's targets
# exist (deferred to the end of the top-level directory).
include_guard(GLOBAL)

option(GGML_PATCH_PRECOMPILE "precompile the standard headers ggml-opt.cpp includes" OFF)

function(ggml_patch_precompile_fix_file)
    if (NOT GGML_PATCH_PRECOMPILE OR NOT TARGET ggml-base)
        return()
    endif()
    get_target_property(dir ggml-base SOURCE_DIR)
    set(fix_file "${dir}/ggml-opt.cpp")
    if (NOT EXISTS "${fix_file}")
        return()
    endif()
    file(STRINGS "${fix_file}" lines REGEX "^#include <[A-Za-z0-9_]+>")
    set(headers "")
    foreach(line IN LISTS lines)
        string(REGEX REPLACE "^#include <([A-Za-z0-9_]+)>.*" "\\1" header "${line}")
        # C++ only ($<ANGLE-R>: a bare '>' would end the generator expression)
        list(APPEND headers "$<$<COMPILE_LANGUAGE:CXX>:<${header}$<ANGLE-R>>")
    endforeach()
    if (NOT headers)
        return()
    endif()
    # only ggml-opt.cpp uses it: the others compile once per run, as upstream builds them
    get_target_property(sources ggml-base SOURCES)
    set(others "")
    foreach(src IN LISTS sources)
        if (NOT IS_ABSOLUTE "${src}")
            set(src "${dir}/${src}")
        endif()
        get_filename_component(name "${src}" NAME)
        if (NOT name STREQUAL "ggml-opt.cpp")
            list(APPEND others "${src}")
        endif()
    endforeach()
    set_source_files_properties(${others} TARGET_DIRECTORY ggml-base
        PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    target_precompile_headers(ggml-base PRIVATE ${headers})
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL ggml_patch_precompile_fix_file)
