# The hierarchical collectives (gpuwire/coll_hier.h): Allreduce, Reduce,
# Bcast and Allgather(v) as steps of collectives on the node's ranks and on
# the nodes' leaders, over a transport that starts them; the non-blocking
# form's driver, which starts the calls in their turns (gpuwire/coll_turn.h).
list(APPEND GPUWIRE_COLL_ENGINE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/hier_plan.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hier_steps.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hier_drive.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hier_capi.cpp)
