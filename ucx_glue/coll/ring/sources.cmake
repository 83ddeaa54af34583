# The device reduction ring (gpuwire/coll_ring.h): Allreduce, Reduce,
# Reduce_scatter(_block), Scan and Exscan on the GPU over the transport.
list(APPEND GPUWIRE_COLL_ENGINE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/device.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ring_job.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ring_steps.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ring_api.cpp)
