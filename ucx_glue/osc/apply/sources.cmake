# An operation applied to the target's window (gpuwire/osc.h): blocks
# located, fetched, written, combined, compared.
list(APPEND GPUWIRE_OSC_ENGINE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/apply.cpp)
