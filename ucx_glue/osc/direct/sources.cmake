# A window's same-node direct path (gpuwire/osc_direct.h): descriptions,
# mappings, direct Put and Get, their tickets, accumulates by reference.
list(APPEND GPUWIRE_OSC_ENGINE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/direct.cpp)
