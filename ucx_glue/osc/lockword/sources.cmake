# Passive-target locks that same-node origins take in the target's shared
# lock word (gpuwire/osc.h): POSIX shared memory and atomics, no GPU.
list(APPEND GPUWIRE_OSC_ENGINE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/lockword.cpp)
