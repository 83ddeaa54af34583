// gpuwire-info --json: the whole report as one JSON object. Field names are
// part of the tool's interface for scripts; add fields, do not rename them.
#include "json_writer.hpp"
#include "probes.hpp"

namespace gpuwire::info {
namespace {

void gpus(JsonWriter& j, const GpuReport& g) {
  j.begin_object("gpus");
  j.number("count", static_cast<long long>(g.count));
  j.boolean("usable", g.count > 0);
  j.optional_string("reason", g.reason);
  j.boolean("cuda_driver", g.driver_available);
  if (g.driver_version) j.number("cuda_driver_version", static_cast<long long>(g.driver_version));
  else j.null("cuda_driver_version");
  j.boolean("nvml", g.nvml_available);
  j.optional_string("nvml_note", g.nvml_note);
  j.begin_array("devices");
  for (const GpuDevice& d : g.devices) {
    j.begin_object();
    j.number("ordinal", static_cast<long long>(d.ordinal));
    j.optional_string("name", d.name);
    j.optional_string("pci_bus_id", d.pci_bus_id);
    j.optional_string("uuid", d.uuid);
    if (d.cc_major) j.string("compute_capability", std::to_string(d.cc_major) + "." +
                                                        std::to_string(d.cc_minor));
    else j.null("compute_capability");
    j.number("memory_bytes", static_cast<long long>(d.memory_bytes));
    j.end_object();
  }
  j.end_array();
  j.begin_array("links");
  for (const GpuLink& l : g.links) {
    j.begin_object();
    j.number("a", static_cast<long long>(l.a));
    j.number("b", static_cast<long long>(l.b));
    j.optional_number("nvlinks", l.nvlinks);
    j.optional_boolean("p2p", l.p2p);
    j.optional_string("topology", l.topology);
    j.optional_string("source", l.source);
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

void mpi(JsonWriter& j, const MpiReport& m) {
  j.begin_object("open_mpi");
  j.string("built_for", m.built_for);
  j.optional_string("running", m.running);
  j.optional_string("library", m.library);
  j.optional_string("library_version", m.library_version);
  j.boolean("match", m.match);
  j.optional_string("mismatch", m.mismatch);
  j.begin_object("component");
  j.string("file", "mca_pml_gpuwire.so");
  j.optional_string("path", m.component_path);
  j.string("search_path_from", m.component_path_source);
  j.strings("search_path", m.component_dirs);
  j.end_object();
  j.end_object();
}

void ucx(JsonWriter& j, const UcxReport& u) {
  j.begin_object("ucx");
  j.string("version", u.version);
  j.string("built_with", u.built_with);
  j.boolean("started", u.started);
  j.optional_string("error", u.error);
  j.begin_array("transports");
  for (const UcxTransport& t : u.transports) {
    j.begin_object();
    j.string("name", t.name);
    j.string("device", t.device);
    j.end_object();
  }
  j.end_array();
  j.strings("memory_types", u.memory_types);
  j.boolean("cuda_memory", u.cuda_memory);
  j.end_object();
}

void fabric(JsonWriter& j, const FabricReport& f) {
  j.begin_object("rdma");
  j.strings("devices", f.devices);
  j.begin_array("ports");
  for (const RdmaPortView& p : f.ports) {
    j.begin_object();
    j.string("device", p.device);
    j.number("port", static_cast<long long>(p.port));
    j.string("link_layer", p.link_layer);
    j.string("state", p.state);
    j.number("rate_gbps", p.rate_gbps);
    j.optional_string("netdev", p.netdev);
    j.end_object();
  }
  j.end_array();
  j.string("summary", f.summary);
  j.string("note", f.note);
  if (f.roce) j.string("roce", *f.roce);
  else j.null("roce");
  j.optional_boolean("dcqcn_enabled", f.dcqcn_enabled);
  j.end_object();
}

void paths(JsonWriter& j, const PathReport& p) {
  j.begin_object("paths");
  j.begin_object("settings");
  j.boolean("pml_gpuwire_device", p.settings.device);
  j.boolean("pml_gpuwire_ipc", p.settings.ipc);
  j.number("pml_gpuwire_ipc_threshold", static_cast<long long>(p.settings.ipc_threshold));
  j.begin_object("from_environment");
  for (const auto& [name, value] : p.settings.from_env) j.string(name, value);
  j.end_object();
  j.strings("errors", p.settings.errors);
  j.end_object();
  j.boolean("pml_starts", p.engine_started);
  j.optional_string("declined", p.decline);
  j.boolean("device_buffers", p.device_buffers);
  j.optional_string("device_buffers_reason", p.device_reason);
  j.string("host", p.host);
  // The engine's choice for a device buffer with this UCX and these settings;
  // in_use is false when this machine gives gpuwire no device buffers.
  j.begin_object("device");
  j.boolean("in_use", p.engine_started && p.device_buffers);
  j.string("same_node", p.same_node);
  j.optional_string("same_node_below_ipc_threshold", p.same_node_below_threshold);
  j.string("same_node_pool_memory", p.same_node_pool);
  j.string("between_nodes", p.between_nodes);
  j.end_object();
  j.strings("engine_log", p.engine_log);
  j.end_object();
}

void select(JsonWriter& j, const SelectReport& s) {
  j.begin_object("select");
  j.string("source", s.source);
  j.optional_string("error", s.error);
  j.number("gpus_per_node", static_cast<long long>(s.gpus));
  j.begin_array("rows");
  for (size_t i = 0; i < s.rows.size(); ++i) {
    j.begin_object();
    j.string("row", s.rows[i]);
    j.boolean("applies_here", s.applies[i]);
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

}  // namespace

void render_json(const Report& report, std::string& out) {
  JsonWriter j(out);
  j.begin_object();
  j.string("gpuwire_version", report.gpuwire_version);
  gpus(j, report.gpus);
  mpi(j, report.mpi);
  ucx(j, report.ucx);
  fabric(j, report.fabric);
  paths(j, report.paths);
  select(j, report.select);
  j.end_object();
  out += '\n';
}

}  // namespace gpuwire::info
