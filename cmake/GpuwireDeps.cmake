# Finds Open MPI (headers + exact version), UCX, rdma-core and the CUDA toolkit.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

# --- Open MPI ---------------------------------------------------------------
# The devel headers come from the distribution's libopenmpi-dev; the version is
# read from mpi.h so that the component is built for exactly that release.
find_program(GPUWIRE_MPICC mpicc REQUIRED)
execute_process(COMMAND ${GPUWIRE_MPICC} --showme:incdirs OUTPUT_VARIABLE _ompi_inc OUTPUT_STRIP_TRAILING_WHITESPACE)
execute_process(COMMAND ${GPUWIRE_MPICC} --showme:libdirs OUTPUT_VARIABLE _ompi_libdirs OUTPUT_STRIP_TRAILING_WHITESPACE)
separate_arguments(_ompi_inc UNIX_COMMAND "${_ompi_inc}")
separate_arguments(_ompi_libdirs UNIX_COMMAND "${_ompi_libdirs}")
set(OMPI_INCLUDE_DIRS ${_ompi_inc})
find_file(OMPI_MPI_H mpi.h PATHS ${_ompi_inc} NO_DEFAULT_PATH REQUIRED)
file(STRINGS ${OMPI_MPI_H} _v REGEX "^#define OMPI_(MAJOR|MINOR|RELEASE)_VERSION")
string(REGEX REPLACE ".*OMPI_MAJOR_VERSION ([0-9]+).*" "\\1" OMPI_VERSION_MAJOR "${_v}")
string(REGEX REPLACE ".*OMPI_MINOR_VERSION ([0-9]+).*" "\\1" OMPI_VERSION_MINOR "${_v}")
string(REGEX REPLACE ".*OMPI_RELEASE_VERSION ([0-9]+).*" "\\1" OMPI_VERSION_RELEASE "${_v}")
set(OMPI_VERSION "${OMPI_VERSION_MAJOR}.${OMPI_VERSION_MINOR}.${OMPI_VERSION_RELEASE}")
find_library(OMPI_LIBMPI NAMES mpi PATHS ${_ompi_libdirs} REQUIRED)
find_program(GPUWIRE_MPIRUN mpirun REQUIRED)
find_program(GPUWIRE_OMPI_INFO ompi_info REQUIRED)
execute_process(COMMAND ${GPUWIRE_OMPI_INFO} --path pkglibdir --parsable
                OUTPUT_VARIABLE _pkglib OUTPUT_STRIP_TRAILING_WHITESPACE)
string(REGEX REPLACE ".*pkglibdir:" "" OMPI_COMPONENT_DIR "${_pkglib}")
# Open MPI 5.0 uses an external PMIx, whose headers its internal ones include.
if(OMPI_VERSION_MAJOR GREATER_EQUAL 5)
  pkg_check_modules(PMIX REQUIRED IMPORTED_TARGET pmix)
endif()
# A devel package may lack internal headers that others include (Debian 13's
# Open MPI 5.0.7 has no opal/mca/threads/pthreads/*.h): the same release's
# source provides them through GPUWIRE_OMPI_EXTRA_INCLUDE_DIRS
# (ci/ompi5_chroot.sh shows how). Checked here, so that a missing one is
# named at configure time.
set(GPUWIRE_OMPI_EXTRA_INCLUDE_DIRS "" CACHE STRING
    "Folders with Open MPI internal headers that its devel package lacks")
list(APPEND OMPI_INCLUDE_DIRS ${GPUWIRE_OMPI_EXTRA_INCLUDE_DIRS})
set(_probe_dir ${CMAKE_BINARY_DIR}/CMakeFiles/gpuwire_ompi_headers)
file(WRITE ${_probe_dir}/probe.c
     "#include \"ompi_config.h\"\n#include \"ompi/mca/pml/pml.h\"\n"
     "#include \"ompi/communicator/communicator.h\"\n#include \"ompi/proc/proc.h\"\n"
     "#include \"opal/runtime/opal_progress.h\"\nint gw_probe;\n")
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
try_compile(_ompi_headers_ok ${_probe_dir}/build SOURCES ${_probe_dir}/probe.c
            CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${OMPI_INCLUDE_DIRS};${PMIX_INCLUDE_DIRS}"
            OUTPUT_VARIABLE _probe_out)
unset(CMAKE_TRY_COMPILE_TARGET_TYPE)
if(NOT _ompi_headers_ok)
  string(REGEX MATCH "error: [^\n]*" _why "${_probe_out}")
  message(FATAL_ERROR "Open MPI ${OMPI_VERSION}'s devel headers are incomplete (${_why}); "
          "pass -DGPUWIRE_OMPI_EXTRA_INCLUDE_DIRS=<folder holding the missing headers from the "
          "Open MPI ${OMPI_VERSION} source>")
endif()
message(STATUS "Open MPI ${OMPI_VERSION}: headers ${OMPI_INCLUDE_DIRS}, components in ${OMPI_COMPONENT_DIR}")
add_library(gpuwire_ompi INTERFACE)
target_include_directories(gpuwire_ompi SYSTEM INTERFACE ${OMPI_INCLUDE_DIRS})
target_link_libraries(gpuwire_ompi INTERFACE ${OMPI_LIBMPI})
if(OMPI_VERSION_MAJOR GREATER_EQUAL 5)
  target_link_libraries(gpuwire_ompi INTERFACE PkgConfig::PMIX)
endif()

# --- UCX ----------------------------------------------------------------------
# GPUWIRE_UCX_ROOT points at an unpacked libucx-dev where the system has only
# the runtime (the headers must be at least as old as the library).
set(GPUWIRE_UCX_ROOT "" CACHE PATH "Folder holding include/ucp of a UCX without pkg-config")
if(GPUWIRE_UCX_ROOT)
  find_path(UCX_INCLUDE_DIR ucp/api/ucp.h PATHS ${GPUWIRE_UCX_ROOT}/usr/include ${GPUWIRE_UCX_ROOT}/include NO_DEFAULT_PATH REQUIRED)
  find_library(UCX_UCP NAMES ucp libucp.so.0 REQUIRED)
  find_library(UCX_UCS NAMES ucs libucs.so.0 REQUIRED)
  find_library(UCX_UCM NAMES ucm libucm.so.0 REQUIRED)
  add_library(gpuwire_ucx INTERFACE)
  target_include_directories(gpuwire_ucx SYSTEM INTERFACE ${UCX_INCLUDE_DIR})
  target_link_libraries(gpuwire_ucx INTERFACE ${UCX_UCP} ${UCX_UCS} ${UCX_UCM})
else()
  pkg_check_modules(UCX REQUIRED IMPORTED_TARGET ucx)
  add_library(gpuwire_ucx INTERFACE)
  target_link_libraries(gpuwire_ucx INTERFACE PkgConfig::UCX)
endif()

# --- rdma-core ---------------------------------------------------------------
find_library(IBVERBS_LIBRARY ibverbs)
find_path(IBVERBS_INCLUDE_DIR infiniband/verbs.h)
if(IBVERBS_LIBRARY AND IBVERBS_INCLUDE_DIR)
  set(GPUWIRE_HAVE_IBVERBS ON)
else()
  set(GPUWIRE_HAVE_IBVERBS OFF)
endif()
message(STATUS "rdma-core (libibverbs): ${GPUWIRE_HAVE_IBVERBS}")

# --- CUDA ---------------------------------------------------------------------
# cudart is linked statically so a machine without a GPU driver still loads the
# component; the driver API is reached through cudaGetDriverEntryPoint.
set(GPUWIRE_HAVE_CUDA OFF)
if(GPUWIRE_WITH_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES ${GPUWIRE_CUDA_ARCHITECTURES})
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(CMAKE_CUDA_STANDARD 20)
    set(GPUWIRE_HAVE_CUDA ON)
  endif()
endif()
message(STATUS "CUDA: ${GPUWIRE_HAVE_CUDA}")
