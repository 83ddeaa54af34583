// What gpuwire-info found, as plain values. Each probe fills its part; the
// renderers (text, JSON) only read it. Nothing here owns a resource.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuwire::info {

struct GpuDevice {
  int ordinal = -1;        // CUDA ordinal, as the application sees it
  std::string name;
  std::string pci_bus_id;  // "0000:3b:00.0"; empty when unknown
  std::string uuid;        // "GPU-..."; empty when unknown
  int cc_major = 0, cc_minor = 0;
  uint64_t memory_bytes = 0;
};

// How two GPUs of this machine reach each other.
struct GpuLink {
  int a = -1, b = -1;                // CUDA ordinals, a < b
  std::optional<int> nvlinks;        // active NVLinks between them (NVML); nullopt: unknown
  std::optional<bool> p2p;           // peer access possible (NVML, else the CUDA driver)
  std::string topology;              // "NV18", "PIX", "SYS", ... as nvidia-smi topo prints; "" unknown
  std::string source;                // "cuda", "nvml" or "nvml+cuda"
};

struct GpuReport {
  bool driver_available = false;  // gpuwire's own CUDA driver loader (cuda::Driver)
  std::string reason;             // why there is no usable GPU; "" when there is one
  int driver_version = 0;         // e.g. 13000
  int count = 0;
  std::vector<GpuDevice> devices;
  std::vector<GpuLink> links;
  bool nvml_available = false;
  std::string nvml_note;          // why NVML was not used, or its driver version
};

struct MpiReport {
  std::string built_for;          // "4.1.4" (mpi.h at build time)
  int built_major = 0, built_minor = 0, built_release = 0;
  bool found = false;             // libmpi.so.40 could be loaded
  std::string library;            // path of the loaded libmpi
  std::string load_error;         // dlopen's message when !found
  std::string library_version;    // MPI_Get_library_version, first line
  std::string running;            // "4.1.4"; empty when unknown
  bool match = false;             // the component would load (same major.minor)
  std::string mismatch;           // the component's own one-line refusal
  // Where Open MPI looks for components, and where mca_pml_gpuwire.so was found.
  std::vector<std::string> component_dirs;
  std::string component_path;     // empty: not found
  std::string component_path_source;  // "default" or "OMPI_MCA_mca_base_component_path"
};

struct UcxTransport {
  std::string name;    // "tcp", "cuda_copy", ...
  std::string device;  // "eth0", "memory", ...
};

struct UcxReport {
  std::string version;          // run time, ucp_get_version()
  std::string built_with;       // UCP_API_MAJOR.MINOR of the headers
  bool started = false;         // ucp_init succeeded
  std::string error;            // why not
  std::vector<UcxTransport> transports;
  std::vector<std::string> memory_types;  // "host", "cuda", ...
  bool cuda_memory = false;     // UCS_MEMORY_TYPE_CUDA among them
};

struct RdmaPortView {
  std::string device;
  unsigned port = 0;
  std::string link_layer, state, netdev;
  double rate_gbps = 0;
};

struct FabricReport {
  std::vector<RdmaPortView> ports;
  std::vector<std::string> devices;  // every device, ports or not
  std::string summary;               // the fabric layer's own one-line summary
  std::string note;                  // what probe_fabric chose, or why nothing
  std::optional<std::string> roce;   // the chosen RoCE selection, described
  std::optional<bool> dcqcn_enabled; // both switches on for the chosen priority
};

// The pml_gpuwire_* settings that shape the path decision, with where each
// value came from ("default" or the OMPI_MCA_ variable).
struct Settings {
  bool device = true;
  bool ipc = true;
  size_t ipc_threshold = 0;
  std::vector<std::pair<std::string, std::string>> from_env;  // name, value as given
  std::vector<std::string> errors;                            // unparsable values
};

struct PathReport {
  Settings settings;
  bool engine_started = false;  // a one-process engine could be created here
  std::string decline;          // "pml:gpuwire: declined: ..." cause when it could not
  bool device_buffers = false;
  std::string device_reason;    // the engine's reason when device_buffers is false
  std::string host;             // protocol of host buffers
  // engine::choose_protocol for a device buffer (cudaMalloc) to a process on
  // this node / another node, whether or not this machine has a usable GPU.
  // same_node_pool: pool memory (cudaMallocAsync), which legacy IPC refuses.
  std::string same_node, same_node_below_threshold, same_node_pool, between_nodes;
  std::vector<std::string> engine_log;  // what the engine logged while starting
};

// coll gpuwire's selection table (select_probe.cpp).
struct SelectReport {
  std::string source;                // "shipped" or the file's name
  std::string error;                 // a malformed or unreadable file
  int gpus = 1;                      // GPUs per node the rows were matched with
  std::vector<std::string> rows;     // in the table file's format
  std::vector<bool> applies;         // per row: one node of this machine
};

struct Report {
  std::string gpuwire_version;
  GpuReport gpus;
  MpiReport mpi;
  UcxReport ucx;
  FabricReport fabric;
  PathReport paths;
  SelectReport select;
};

}  // namespace gpuwire::info
