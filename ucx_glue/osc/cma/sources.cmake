# Cross-memory attach to the host windows of ranks on this node
# (gpuwire/osc.h): no Open MPI type, no GPU.
list(APPEND GPUWIRE_OSC_ENGINE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/cma.cpp)
