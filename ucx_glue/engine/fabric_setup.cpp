#include "engine/fabric_setup.hpp"

#include <cstdlib>
#include <string_view>

namespace gpuwire::engine {

namespace {

const char *system_getenv(const char *name) { return std::getenv(name); }

} // namespace

std::vector<std::pair<std::string, std::string>>
roce_ucx_settings(const fabric::RoceSelection &sel, GetenvFn getenv_fn, const fabric::LogSink &sink)
{
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto &[name, value] : sel.ucx_environment()) {
        // The device list stays UCX's: pinning one port would drop the others.
        if (name == "UCX_NET_DEVICES") continue;
        if (const char *user = getenv_fn(name.c_str())) {
            fabric::emit(sink, fabric::LogLevel::Info,
                         "roce: " + name + " stays " + user + " (set by the user; gpuwire chose " +
                             value + ")");
            continue;
        }
        out.emplace_back(name.substr(4), value);
        fabric::emit(sink, fabric::LogLevel::Info, "roce: UCX gets " + name + "=" + value);
    }
    return out;
}

FabricSetup setup_fabric(const char *sysfs_root, bool apply_roce, fabric::OnceFilter &once,
                         const fabric::LogSink &sink, GetenvFn getenv_fn)
{
    if (!getenv_fn) getenv_fn = &system_getenv;
    FabricSetup out;
    fabric::FabricConfig config;
    config.sysfs_root = sysfs_root ? sysfs_root : "/";
    out.probe = fabric::probe_fabric(config, {}, once, sink);
    if (!out.probe.roce) {
        if (const fabric::RdmaPort *p = out.probe.inventory.first_active_roce_port())
            out.pace_port = *p;
        return out;
    }
    const fabric::RoceSelection &sel = *out.probe.roce;
    if (const fabric::RdmaPort *p = out.probe.inventory.find_port(sel.device, sel.port_number))
        out.pace_port = *p;
    if (!apply_roce) {
        fabric::emit(sink, fabric::LogLevel::Info,
                     "roce: GID index and traffic class left to UCX (pml_gpuwire_roce_apply 1 "
                     "hands gpuwire's choice to UCX)");
    } else if (config.sysfs_root != "/") {
        // A tree that tests build names devices UCX does not have.
        fabric::emit(sink, fabric::LogLevel::Info, "roce: not applied to UCX for a test sysfs tree");
    } else {
        out.ucx_settings = roce_ucx_settings(sel, getenv_fn, sink);
    }
    return out;
}

} // namespace gpuwire::engine
