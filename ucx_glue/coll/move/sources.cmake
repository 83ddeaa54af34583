# The data movement (gpuwire/coll_move.h): Bcast (incl. the chain),
# Allgather(v), Alltoall(v) over point-to-point, blocking and not.
list(APPEND GPUWIRE_COLL_ENGINE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/move_call.cpp
     ${CMAKE_CURRENT_LIST_DIR}/move_capi.cpp)
