// The fabric layer's start-up work for the engine: before UCX starts, the
// engine probes the RDMA devices (gpuwire/fabric/fabric_probe.hpp), logs the
// RoCE port, GID and traffic class it would use, warns once when DCQCN is off
// for that port's priority, and later paces toward other nodes on that port.
//
// What reaches UCX: with apply_roce, the chosen GID index and traffic class
// (UCX_IB_GID_INDEX, UCX_IB_TRAFFIC_CLASS) unless the user exported them; never
// the device list, so a node with several NICs keeps all of its rails. Only
// for the real sysfs root: a tree that tests build names devices UCX lacks.
//
// Threading: called once, from the engine's constructor path.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuwire/fabric/fabric_probe.hpp"

namespace gpuwire::engine {

struct FabricSetup {
    fabric::FabricProbeResult probe;
    // UCX settings (names without the UCX_ prefix) for ucp_config_modify.
    std::vector<std::pair<std::string, std::string>> ucx_settings;
    // The port to pace: the RoCE selection's, else the first active RoCE port.
    std::optional<fabric::RdmaPort> pace_port;
};

using GetenvFn = const char *(*)(const char *);

// The UCX settings for a RoCE selection: GID index and traffic class, less
// those the user exported (getenv_fn reads the environment; tests pass their
// own). Each decision is logged as one line.
std::vector<std::pair<std::string, std::string>>
roce_ucx_settings(const fabric::RoceSelection &sel, GetenvFn getenv_fn, const fabric::LogSink &sink);

FabricSetup setup_fabric(const char *sysfs_root, bool apply_roce, fabric::OnceFilter &once,
                         const fabric::LogSink &sink,
                         GetenvFn getenv_fn = nullptr);

} // namespace gpuwire::engine
