// gpuwire-info's human-readable report: one section per part, a label column
// and one line per fact, each "no" with its reason.
#include <cstdarg>
#include <cstdio>

#include "probes.hpp"

namespace gpuwire::info {
namespace {

void line(std::string& out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void line(std::string& out, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  out += buf;
  out += '\n';
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f GiB", double(bytes) / double(uint64_t{1} << 30));
  return buf;
}

std::string cuda_version(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// A protocol name of engine::protocol_name, in words.
std::string protocol_words(const std::string& p, bool ucx_cuda) {
  if (p == "ipc") return "CUDA IPC: the receiver copies from the sender's GPU memory (over NVLink where linked)";
  if (p == "ucx-device") return "handed to UCX as CUDA memory (GPUDirect RDMA where the NIC and driver allow)";
  if (p == "staged") {
    return ucx_cuda ? "staged through pinned host memory"
                    : "staged through pinned host memory (this UCX cannot move CUDA memory)";
  }
  if (p == "host") return "to UCX as host memory";
  return p;
}

void gpus(std::string& out, const GpuReport& g) {
  std::string head = "GPUs";
  std::vector<std::string> versions;
  if (g.driver_version) versions.push_back("CUDA driver " + cuda_version(g.driver_version));
  if (g.nvml_available && !g.nvml_note.empty()) versions.push_back("NVML: " + g.nvml_note);
  if (!versions.empty()) head += " (" + join(versions, ", ") + ")";
  line(out, "%s", head.c_str());
  if (g.count == 0) {
    line(out, "  no GPU: %s", g.reason.c_str());
    if (!g.nvml_available) line(out, "  NVML: %s", g.nvml_note.c_str());
    return;
  }
  for (const GpuDevice& d : g.devices) {
    std::string s = "  GPU " + std::to_string(d.ordinal);
    if (!d.name.empty()) s += "  " + d.name;
    if (d.cc_major) s += "  sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor);
    if (d.memory_bytes) s += "  " + gib(d.memory_bytes);
    if (!d.pci_bus_id.empty()) s += "  " + d.pci_bus_id;
    if (!d.uuid.empty()) s += "  " + d.uuid;
    line(out, "%s", s.c_str());
  }
  if (!g.nvml_available) line(out, "  NVML: %s; links from CUDA peer access only", g.nvml_note.c_str());
  for (const GpuLink& l : g.links) {
    std::string s = "  GPU " + std::to_string(l.a) + " <-> GPU " + std::to_string(l.b) + ": ";
    if (l.nvlinks && *l.nvlinks > 0) {
      s += std::to_string(*l.nvlinks) + " NVLinks (" + l.topology + ")";
    } else if (!l.topology.empty()) {
      s += "no NVLink, PCIe " + l.topology;
    } else if (l.nvlinks) {
      s += "no NVLink";
    } else {
      s += "NVLink unknown";
    }
    s += l.p2p ? (*l.p2p ? ", peer access yes" : ", peer access no") : ", peer access unknown";
    line(out, "%s", s.c_str());
  }
}

void mpi(std::string& out, const MpiReport& m) {
  line(out, "Open MPI");
  line(out, "  built for       %s", m.built_for.c_str());
  if (!m.found) {
    line(out, "  running         none found: %s", m.load_error.c_str());
  } else {
    line(out, "  running         %s (%s): %s", m.running.empty() ? "?" : m.running.c_str(),
         m.library.c_str(), m.match ? "match" : "MISMATCH");
    if (!m.library_version.empty()) line(out, "                  %s", m.library_version.c_str());
  }
  if (!m.match) line(out, "  => %s", m.mismatch.c_str());
  if (!m.component_path.empty()) {
    line(out, "  component       %s", m.component_path.c_str());
  } else {
    line(out, "  component       mca_pml_gpuwire.so not found in %s (%s); run cmake --install, "
              "or point --mca mca_base_component_path at it",
         join(m.component_dirs, ":").c_str(), m.component_path_source.c_str());
  }
}

void ucx(std::string& out, const UcxReport& u) {
  line(out, "UCX");
  line(out, "  version         %s (headers %s)", u.version.c_str(), u.built_with.c_str());
  if (!u.started) {
    line(out, "  transports      none: UCX did not start (%s)", u.error.c_str());
    return;
  }
  std::vector<std::string> tls;
  for (const UcxTransport& t : u.transports) tls.push_back(t.name + "/" + t.device);
  line(out, "  transports      %s", tls.empty() ? "none" : join(tls, ", ").c_str());
  line(out, "  memory types    %s", join(u.memory_types, ", ").c_str());
  line(out, "  CUDA memory     %s", u.cuda_memory ? "yes: UCX moves device buffers itself"
                                                  : "no: this UCX has no CUDA transports loaded");
}

void fabric(std::string& out, const FabricReport& f) {
  line(out, "RDMA");
  if (f.devices.empty()) {
    line(out, "  no RDMA device under /sys/class/infiniband: RoCE GID selection, DCQCN "
              "checks and congestion counters are off");
    return;
  }
  for (const RdmaPortView& p : f.ports) {
    line(out, "  %s:%u  %s %s %g Gb/s%s%s", p.device.c_str(), p.port, p.link_layer.c_str(),
         p.state.c_str(), p.rate_gbps, p.netdev.empty() ? "" : "  ", p.netdev.c_str());
  }
  line(out, "  RoCE            %s", f.roce ? f.roce->c_str() : f.note.c_str());
  if (f.dcqcn_enabled) {
    line(out, "  DCQCN           %s", *f.dcqcn_enabled ? "enabled" : "NOT fully enabled");
  }
}

void paths(std::string& out, const PathReport& p, const UcxReport& u, bool verbose) {
  line(out, "gpuwire on this machine");
  std::string settings = "pml_gpuwire_device=" + std::string(p.settings.device ? "1" : "0") +
                         " pml_gpuwire_ipc=" + (p.settings.ipc ? "1" : "0") +
                         " pml_gpuwire_ipc_threshold=" + std::to_string(p.settings.ipc_threshold);
  line(out, "  settings        %s (%s)", settings.c_str(),
       p.settings.from_env.empty() ? "defaults; OMPI_MCA_pml_gpuwire_* changes them"
                                   : "from the environment where set");
  for (const std::string& e : p.settings.errors) line(out, "  => %s", e.c_str());
  if (p.engine_started) {
    line(out, "  pml gpuwire     starts (UCX up)");
  } else {
    line(out, "  pml gpuwire     declined: %s", p.decline.c_str());
  }
  line(out, "  host buffers    %s", protocol_words(p.host, u.cuda_memory).c_str());
  const bool in_use = p.engine_started && p.device_buffers;
  if (in_use) {
    line(out, "  device buffers  yes");
  } else {
    line(out, "  device buffers  no: %s",
         p.engine_started ? p.device_reason.c_str() : "pml gpuwire does not start");
  }
  const char* prefix = in_use ? "" : "not used; with a usable GPU: ";
  std::string from;
  if (!p.same_node_below_threshold.empty() && p.same_node_below_threshold != p.same_node) {
    from = " (messages of " + std::to_string(p.settings.ipc_threshold) + " B and more)";
  }
  line(out, "  same node       %s%s%s", prefix, protocol_words(p.same_node, u.cuda_memory).c_str(),
       from.c_str());
  if (!from.empty()) {
    line(out, "    below ipc_threshold  %s",
         protocol_words(p.same_node_below_threshold, u.cuda_memory).c_str());
  }
  if (p.same_node_pool != p.same_node) {
    line(out, "    cudaMallocAsync memory  %s",
         protocol_words(p.same_node_pool, u.cuda_memory).c_str());
  }
  line(out, "  between nodes   %s%s", prefix,
       p.between_nodes == "ucx-device" ? "GDR through UCX (UCX moves CUDA memory)"
                                       : protocol_words(p.between_nodes, u.cuda_memory).c_str());
  if (verbose) {
    for (const std::string& l : p.engine_log) line(out, "  engine: %s", l.c_str());
  }
}

void select(std::string& out, const SelectReport& s) {
  line(out, "Collective selection (coll gpuwire, blocking calls on device buffers)");
  line(out, "  table           %s, %zu rows", s.source.c_str(), s.rows.size());
  if (!s.error.empty()) line(out, "  error           %s", s.error.c_str());
  if (s.rows.empty()) {
    line(out, "  no rows: the built-in rules everywhere (unmeasured)");
    return;
  }
  line(out, "  # collective  ranks nodes ppn gpn rpg nvlink  min bytes  max bytes algorithm");
  size_t here = 0;
  for (size_t i = 0; i < s.rows.size(); ++i) {
    line(out, "  %s %s", s.applies[i] ? "*" : " ", s.rows[i].c_str());
    here += s.applies[i];
  }
  line(out, "  *: applies on one node of this machine (%d GPU(s)) at that rank count; %zu rows",
       s.gpus, here);
  line(out, "  a topology without rows keeps the built-in rules (unmeasured)");
}

}  // namespace

void render_text(const Report& r, bool verbose, std::string& out) {
  line(out, "gpuwire %s", r.gpuwire_version.c_str());
  out += '\n';
  gpus(out, r.gpus);
  out += '\n';
  mpi(out, r.mpi);
  out += '\n';
  ucx(out, r.ucx);
  out += '\n';
  fabric(out, r.fabric);
  out += '\n';
  paths(out, r.paths, r.ucx, verbose);
  out += '\n';
  select(out, r.select);
}

}  // namespace gpuwire::info
