# Helpers every component uses, so each CMakeLists.txt stays a list of files.

# -Wno-missing-field-initializers: designated initializers for options structs leave the rest defaulted.
set(GPUGEEK_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wimplicit-fallthrough
  -Wno-missing-field-initializers)
# clang checks the lock annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED) of absl::Mutex users.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  list(APPEND GPUGEEK_WARNINGS -Wthread-safety)
endif()
if(GPUGEEK_WERROR)
  list(APPEND GPUGEEK_WARNINGS -Werror)
endif()
if(GPUGEEK_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
endif()

# Precompiled headers: the standard library, fmt, nlohmann::json and absl::Status parsed once per target
# instead of once per source file, which is most of a file's compile time at -O0 (a control-plane
# controller with clang under ASan: 15.9 s, 9.4 s with them). Headers of other projects only: ours change
# too often. On by default with clang only: gcc's precompiled header is 136 MB per target and saves little
# at -O2, where optimising, not parsing, takes the time. The gcc build, without them, is where a file that
# leans on them for a missing #include still fails.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  set(GPUGEEK_PCH_DEFAULT ON)
else()
  set(GPUGEEK_PCH_DEFAULT OFF)
endif()
option(GPUGEEK_PCH "Precompile the common third-party headers of each target" ${GPUGEEK_PCH_DEFAULT})
set(GPUGEEK_PCH_HEADERS <algorithm> <chrono> <cstdint> <filesystem> <fstream> <functional> <map> <memory>
  <mutex> <optional> <set> <sstream> <string> <string_view> <thread> <utility> <vector>
  <fmt/format.h> <nlohmann/json.hpp> <absl/status/status.h> <absl/status/statusor.h>)

# gpugeek_precompile(TARGET [TEST]): GPUGEEK_PCH_HEADERS (and GoogleTest's with TEST) precompiled for TARGET.
function(gpugeek_precompile target)
  if(NOT GPUGEEK_PCH)
    return()
  endif()
  set(headers ${GPUGEEK_PCH_HEADERS})
  if("TEST" IN_LIST ARGN)
    list(APPEND headers <gmock/gmock.h> <gtest/gtest.h>)
  endif()
  target_precompile_headers(${target} PRIVATE ${headers})
endfunction()

# gpugeek_library(NAME SOURCES ... DEPS ...): the component library gpugeek::NAME.
function(gpugeek_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(gpugeek_${name} STATIC ${ARG_SOURCES})
  add_library(gpugeek::${name} ALIAS gpugeek_${name})
  target_include_directories(gpugeek_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(gpugeek_${name} PRIVATE ${GPUGEEK_WARNINGS})
  if(GPUGEEK_FUZZ)
    # Coverage feedback from every library a fuzz target reaches, not only from its entry file. Test
    # binaries are not instrumented: no fuzz target links them, and coverage would double their build.
    target_compile_options(gpugeek_${name} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
  target_link_libraries(gpugeek_${name} PUBLIC ${ARG_DEPS})
  list(LENGTH ARG_SOURCES count)
  if(count GREATER 1)
    gpugeek_precompile(gpugeek_${name})
  endif()
endfunction()

# gpugeek_optimised_tests(TARGET...): targets the tests labelled python, soak or heavy need. They run on the
# optimised build only (scripts/test.sh), which then builds just the target `optimised_tests` (CMakeLists.txt)
# and not every test that the sanitizer build runs.
function(gpugeek_optimised_tests)
  set_property(GLOBAL APPEND PROPERTY GPUGEEK_OPTIMISED_TESTS ${ARGN})
endfunction()

# gpugeek_test(NAME SOURCES ... DEPS ... [LABELS ...] [SERIAL] [PROPERTIES KEY VALUE ...]): a GoogleTest binary
# registered with CTest; SERIAL: each of its tests runs alone (RUN_SERIAL), for tests that need the machine's cores
# or fixed ports; PROPERTIES: more test properties for each of its tests (e.g. FIXTURES_REQUIRED, ENVIRONMENT).
function(gpugeek_test name)
  cmake_parse_arguments(ARG "SERIAL" "" "SOURCES;DEPS;LABELS;PROPERTIES" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  if(ARG_LABELS MATCHES "(^|;)(python|soak|heavy)(;|$)")
    gpugeek_optimised_tests(${name})
  endif()
  target_compile_options(${name} PRIVATE ${GPUGEEK_WARNINGS})
  target_compile_definitions(${name} PRIVATE
    GPUGEEK_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    GPUGEEK_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared")
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  list(LENGTH ARG_SOURCES count)
  if(count GREATER 1)
    gpugeek_precompile(${name} TEST)
  endif()
  # PROPERTIES is one flat key/value list that GoogleTest.cmake re-splits, so a label list cannot pass as
  # one value (CMake issue 17812); LABELS given once per label adds each.
  set(labels LABELS unit)
  foreach(label IN LISTS ARG_LABELS)
    list(APPEND labels LABELS ${label})
  endforeach()
  if(ARG_SERIAL)
    gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST PROPERTIES ${labels} RUN_SERIAL TRUE ${ARG_PROPERTIES})
  else()
    gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST PROPERTIES ${labels} ${ARG_PROPERTIES})
  endif()
endfunction()

# gpugeek_fuzz(NAME SOURCES ... DEPS ... CORPUS DIR): a libFuzzer target, built only with GPUGEEK_FUZZ.
# CTest runs it over its seed corpus, then mutates for GPUGEEK_FUZZ_SECONDS (label "fuzz"); scripts/test.sh
# gives each 5 s, a longer hunt is -DGPUGEEK_FUZZ_SECONDS=3600 and `ctest -L fuzz -R NAME`.
set(GPUGEEK_FUZZ_SECONDS 20 CACHE STRING "Seconds each fuzz target mutates its corpus under CTest")
function(gpugeek_fuzz name)
  cmake_parse_arguments(ARG "" "CORPUS" "SOURCES;DEPS" ${ARGN})
  if(NOT GPUGEEK_FUZZ)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  # New inputs go to a scratch corpus in the build tree (libFuzzer writes to its first directory), so the
  # seed corpus in the source tree stays as committed.
  set(scratch ${CMAKE_CURRENT_BINARY_DIR}/${name}_corpus)
  file(MAKE_DIRECTORY ${scratch})
  add_test(NAME ${name}
    COMMAND ${name} -max_total_time=${GPUGEEK_FUZZ_SECONDS} -timeout=5 -rss_limit_mb=2048 ${scratch} ${ARG_CORPUS})
  set_tests_properties(${name} PROPERTIES LABELS fuzz)
endfunction()

# gpugeek_bench(NAME SOURCES ... DEPS ...): a Google Benchmark binary (not run by CTest).
function(gpugeek_bench name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  if(NOT GPUGEEK_BENCH)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${GPUGEEK_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} benchmark::benchmark)
  gpugeek_optimised_tests(${name})  # not run by CTest, but built with -Werror where the optimised tests are
endfunction()
