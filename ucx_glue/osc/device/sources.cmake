# The one-sided engine's door to the GPU over gpuwire/gpu_device.h, and where
# its lines go (gpuwire/osc_direct.h).
list(APPEND GPUWIRE_OSC_ENGINE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/device.cpp
     ${CMAKE_CURRENT_LIST_DIR}/log.cpp)
