# Staging of a call's regions (gpuwire/coll_stage.h): host copies of device
# regions for algorithms that run on the CPU, device temporaries for those
# that run on the GPU.
list(APPEND GPUWIRE_COLL_ENGINE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/staging.cpp
  ${CMAKE_CURRENT_LIST_DIR}/temps.cpp)
