# Sanitizer builds beyond GPUWIRE_SANITIZE (ASan + UBSan, set in the top-level
# CMakeLists.txt). Include it right after project(); each option instruments
# the whole build, so use a build folder of its own (ci/sanitize.sh,
# ci/fuzz.sh) and build only host code in it (-DGPUWIRE_WITH_CUDA=OFF): Open
# MPI and UCX are not instrumented, so the MPI component cannot be loaded from
# such a build.
#
#   GPUWIRE_TSAN  ThreadSanitizer (the engine's threaded unit tests)
#   GPUWIRE_FUZZ  libFuzzer targets in tests/fuzz (clang only): everything is
#                 built with coverage feedback, ASan and UBSan (UB aborts)
include_guard(GLOBAL)

option(GPUWIRE_TSAN "Build with ThreadSanitizer (engine and unit tests)" OFF)
option(GPUWIRE_FUZZ "Build the libFuzzer targets of tests/fuzz (clang only)" OFF)

if(GPUWIRE_TSAN)
  if(GPUWIRE_SANITIZE OR GPUWIRE_FUZZ)
    message(FATAL_ERROR "GPUWIRE_TSAN cannot be combined with GPUWIRE_SANITIZE or GPUWIRE_FUZZ")
  endif()
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()

# tests/fuzz reads GPUWIRE_FUZZ_INSTRUMENTED: ON only where the libraries under
# test carry coverage feedback, which libFuzzer needs to get anywhere.
set(GPUWIRE_FUZZ_INSTRUMENTED OFF)
if(GPUWIRE_FUZZ)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang" AND CMAKE_C_COMPILER_ID MATCHES "Clang")
    add_compile_options(-fsanitize=fuzzer-no-link,address,undefined
                        -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
    add_link_options(-fsanitize=address,undefined)
    set(GPUWIRE_FUZZ_INSTRUMENTED ON)
  else()
    message(WARNING "GPUWIRE_FUZZ needs clang (CC=clang CXX=clang++); "
                    "tests/fuzz builds only the corpus replay with ${CMAKE_CXX_COMPILER_ID}")
  endif()
endif()
