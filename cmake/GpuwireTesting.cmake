# Test helpers.
#   gpuwire_add_unit_test(NAME SOURCES... [LIBS ...] [LABELS ...])
#       a Catch2 executable run in one process (no MPI)
#   gpuwire_add_mpi_test(NAME SOURCE NP [ARGS ...] [LABELS ...] [TIMEOUT s])
#       a C program run under mpirun with pml gpuwire loaded from the build tree
find_package(Catch2 REQUIRED)
# Catch2 2.13 also defines Catch2WithMain, so the version decides.
if(Catch2_VERSION VERSION_GREATER_EQUAL 3)
  set(GPUWIRE_CATCH_VERSION 3)
else()
  set(GPUWIRE_CATCH_VERSION 2)
endif()

add_library(gpuwire_catch_main STATIC ${PROJECT_SOURCE_DIR}/tests/common/catch_main.cpp)
target_include_directories(gpuwire_catch_main PUBLIC ${PROJECT_SOURCE_DIR}/tests/common)
target_compile_definitions(gpuwire_catch_main PUBLIC GPUWIRE_CATCH_VERSION=${GPUWIRE_CATCH_VERSION})
if(GPUWIRE_CATCH_VERSION EQUAL 3)
  target_link_libraries(gpuwire_catch_main PUBLIC Catch2::Catch2WithMain)
else()
  target_link_libraries(gpuwire_catch_main PUBLIC Catch2::Catch2)
endif()

function(gpuwire_add_unit_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES} ${T_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE gpuwire_catch_main ${T_LIBS})
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "unit;${T_LABELS}" SKIP_RETURN_CODE 77 TIMEOUT 300)
endfunction()

# Where the freshly built components live; Open MPI's own folder stays first.
set(GPUWIRE_TEST_COMPONENT_PATH "${OMPI_COMPONENT_DIR}:${PROJECT_BINARY_DIR}/components")
set(GPUWIRE_MPIRUN_FLAGS --allow-run-as-root --oversubscribe --bind-to none
    --mca mca_base_component_path ${GPUWIRE_TEST_COMPONENT_PATH}
    --mca btl self,vader --mca btl_vader_single_copy_mechanism none
    --mca pml gpuwire)

function(gpuwire_add_mpi_test name source np)
  cmake_parse_arguments(T "" "TIMEOUT" "ARGS;LABELS;MPIRUN_FLAGS;LIBS" ${ARGN})
  if(NOT TARGET ${name}_exe)
    add_executable(${name}_exe ${source})
    target_link_libraries(${name}_exe PRIVATE gpuwire_ompi gpuwire_mpitest ${T_LIBS})
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_test(NAME ${name}
           COMMAND ${GPUWIRE_MPIRUN} -np ${np} ${GPUWIRE_MPIRUN_FLAGS} ${T_MPIRUN_FLAGS}
                   $<TARGET_FILE:${name}_exe> ${T_ARGS})
  set_tests_properties(${name} PROPERTIES LABELS "mpi;${T_LABELS}" TIMEOUT ${T_TIMEOUT}
                       SKIP_RETURN_CODE 77 PROCESSORS ${np})
endfunction()
