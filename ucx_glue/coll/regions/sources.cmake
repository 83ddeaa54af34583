# The regions of a call (gpuwire/coll_regions.h): which bytes of which
# buffer each collective may read or write on this rank.
list(APPEND GPUWIRE_COLL_ENGINE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/regions.cpp)
