# The scheduler of non-blocking collectives (gpuwire/coll_sched.h): their
# requests, each communicator's order of starts, staged in -> host
# collective -> staged out, and the algorithms' jobs.
list(APPEND GPUWIRE_COLL_ENGINE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/advance.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scheduler.cpp)
