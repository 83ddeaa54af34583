# The NVLink team family (gpuwire/coll_nvlink.h): the team's set-up, the
# blocking and non-blocking calls over it, and the delegated form of a team
# on one GPU.
list(APPEND GPUWIRE_COLL_ENGINE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/nvl_desc.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nvl_setup.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nvl_call.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nvl_nb.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nvl_delegate.cpp)
