# The origin's side of an operation (gpuwire/osc.h): its target layout as
# blocks.
list(APPEND GPUWIRE_OSC_ENGINE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/blocks.cpp)
