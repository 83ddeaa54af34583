# Agreements without blocking (gpuwire/coll_agree.h): the OR of a few flags
# of every rank, by dissemination, in initiation order per communicator.
list(APPEND GPUWIRE_COLL_ENGINE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/agree.cpp)
