# The window messages' buffers (gpuwire/osc.h): large ones kept for reuse.
list(APPEND GPUWIRE_OSC_ENGINE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/bufs.cpp)
