# A window's same-node direct path (gpuwire/osc_direct.h): descriptions,
# mappings, direct Put and Get, their tickets; the accumulates done by the
# origin and by reference (direct_acc.cpp).
list(APPEND GPUWIRE_OSC_ENGINE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/direct.cpp
     ${CMAKE_CURRENT_LIST_DIR}/direct_acc.cpp)
