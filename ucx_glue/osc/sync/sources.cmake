# A window's synchronisation bookkeeping (gpuwire/osc.h): completion counts,
# the target's lock queue, the origin's lock epochs, message handling.
list(APPEND GPUWIRE_OSC_ENGINE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/sync.cpp)
