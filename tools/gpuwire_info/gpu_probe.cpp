// GPUs and how each pair is linked.
//
// Whether there is a usable GPU is asked of gpuwire's own CUDA loader
// (cuda::Driver), so the tool says what the engine will find. Names, PCI
// addresses and peer access come from libcuda, NVLink counts and the PCIe
// topology from NVML; both are dlopen-ed (never linked) and create no CUDA
// context.
#include <dlfcn.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gpu_apis.hpp"
#include "gpuwire/cuda/driver.hpp"
#include "probes.hpp"

namespace gpuwire::info {
namespace {

template <class F>
void bind(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
}

struct Pci {
  unsigned domain = 0, bus = 0, device = 0;
  bool known = false;
  bool operator==(const Pci& o) const {
    return known && o.known && domain == o.domain && bus == o.bus && device == o.device;
  }
};

std::string pci_string(const Pci& p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.0", p.domain, p.bus, p.device);
  return buf;
}

std::string uuid_string(const unsigned char u[16]) {
  char buf[48];
  std::snprintf(buf, sizeof buf,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                u[14], u[15]);
  return buf;
}

GpuDevice describe_device(const CudaApi& cu, int ordinal, Pci& pci) {
  GpuDevice d;
  d.ordinal = ordinal;
  CUdevice dev = 0;
  if (!cu.device_get || cu.device_get(&dev, ordinal) != 0) return d;
  char name[256] = "";
  if (cu.get_name && cu.get_name(name, sizeof name, dev) == 0) d.name = name;
  size_t bytes = 0;
  if (cu.total_mem && cu.total_mem(&bytes, dev) == 0) d.memory_bytes = bytes;
  if (cu.get_attribute) {
    int dom = 0, bus = 0, devno = 0;
    if (cu.get_attribute(&dom, kAttrPciDomainId, dev) == 0 &&
        cu.get_attribute(&bus, kAttrPciBusId, dev) == 0 &&
        cu.get_attribute(&devno, kAttrPciDeviceId, dev) == 0) {
      pci = Pci{unsigned(dom), unsigned(bus), unsigned(devno), true};
      d.pci_bus_id = pci_string(pci);
    }
    int major = 0, minor = 0;
    if (cu.get_attribute(&major, kAttrCcMajor, dev) == 0 &&
        cu.get_attribute(&minor, kAttrCcMinor, dev) == 0) {
      d.cc_major = major;
      d.cc_minor = minor;
    }
  }
  unsigned char u[16];
  if (cu.get_uuid && cu.get_uuid(u, dev) == 0) d.uuid = uuid_string(u);
  return d;
}

// NVLinks from a to the GPU at b's PCI address, counted over a's active links.
int count_nvlinks(const NvmlApi& nvml, nvmlDevice_t a, const Pci& b) {
  int count = 0;
  for (unsigned l = 0; l < kNvmlMaxLinks; ++l) {
    int state = 0;
    NvmlPciInfo remote{};
    if (nvml.nvlink_state(a, l, &state) != 0 || state != kNvmlFeatureEnabled) continue;
    if (nvml.nvlink_remote_pci(a, l, &remote) != 0) continue;
    if (Pci{remote.domain, remote.bus, remote.device, true} == b) ++count;
  }
  return count;
}

void add_nvml_links(const NvmlApi& nvml, const std::vector<Pci>& cuda_pci, GpuReport& r) {
  unsigned n = 0;
  if (!nvml.count || !nvml.handle || !nvml.pci_info || nvml.count(&n) != 0) return;
  std::vector<nvmlDevice_t> of_cuda(cuda_pci.size(), nullptr);
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice_t d = nullptr;
    NvmlPciInfo info{};
    if (nvml.handle(i, &d) != 0 || nvml.pci_info(d, &info) != 0) continue;
    const Pci p{info.domain, info.bus, info.device, true};
    for (size_t c = 0; c < cuda_pci.size(); ++c) {
      if (cuda_pci[c] == p) of_cuda[c] = d;
    }
  }
  for (GpuLink& link : r.links) {
    nvmlDevice_t a = of_cuda[link.a], b = of_cuda[link.b];
    if (!a || !b) continue;
    link.source = link.source.empty() ? "nvml" : "nvml+cuda";
    if (nvml.nvlink_state && nvml.nvlink_remote_pci) {
      link.nvlinks = count_nvlinks(nvml, a, cuda_pci[link.b]);
      if (*link.nvlinks > 0) link.topology = "NV" + std::to_string(*link.nvlinks);
    }
    if (link.topology.empty() && nvml.common_ancestor) {
      int level = -1;
      if (nvml.common_ancestor(a, b, &level) == 0) link.topology = topology_name(level);
    }
    // CUDA's own peer-access answer is kept where it was given.
    if (!link.p2p && nvml.p2p_status) {
      int status = -1;
      if (nvml.p2p_status(a, b, kNvmlP2pCapsRead, &status) == 0) {
        link.p2p = status == kNvmlP2pStatusOk;
      }
    }
  }
}

}  // namespace

const char* topology_name(int level) {
  switch (level) {
    case 0: return "SELF";   // NVML_TOPOLOGY_INTERNAL
    case 10: return "PIX";   // one PCIe switch
    case 20: return "PXB";   // several PCIe switches
    case 30: return "PHB";   // a PCIe host bridge
    case 40: return "NODE";  // host bridges of one NUMA node
    case 50: return "SYS";   // across NUMA nodes
  }
  return "";
}

bool load_cuda(CudaApi& api) {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!h) return false;
  bind(h, api.init, "cuInit");
  bind(h, api.device_get, "cuDeviceGet");
  bind(h, api.get_name, "cuDeviceGetName");
  bind(h, api.total_mem, "cuDeviceTotalMem_v2");
  bind(h, api.get_attribute, "cuDeviceGetAttribute");
  bind(h, api.get_uuid, "cuDeviceGetUuid_v2");
  bind(h, api.can_access_peer, "cuDeviceCanAccessPeer");
  return api.init && api.device_get && api.init(0) == 0;
}

bool load_nvml(NvmlApi& api, std::string& why) {
  void* h = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    why = std::string("libnvidia-ml.so.1 not loadable: ") + (e ? e : "?");
    return false;
  }
  bind(h, api.init, "nvmlInit_v2");
  bind(h, api.shutdown, "nvmlShutdown");
  bind(h, api.error_string, "nvmlErrorString");
  bind(h, api.driver_version, "nvmlSystemGetDriverVersion");
  bind(h, api.count, "nvmlDeviceGetCount_v2");
  bind(h, api.handle, "nvmlDeviceGetHandleByIndex_v2");
  bind(h, api.pci_info, "nvmlDeviceGetPciInfo_v3");
  bind(h, api.nvlink_state, "nvmlDeviceGetNvLinkState");
  bind(h, api.nvlink_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  bind(h, api.common_ancestor, "nvmlDeviceGetTopologyCommonAncestor");
  bind(h, api.p2p_status, "nvmlDeviceGetP2PStatus");
  if (!api.init || !api.shutdown || !api.count || !api.handle || !api.pci_info) {
    why = "libnvidia-ml.so.1 lacks nvmlInit_v2 or the device queries";
    return false;
  }
  const nvmlReturn_t rc = api.init();
  if (rc != 0) {
    why = std::string("nvmlInit_v2 failed: ") + (api.error_string ? api.error_string(rc) : "?");
    return false;
  }
  return true;
}

void describe_gpus(int count, const CudaApi* cu, const NvmlApi* nvml, GpuReport& r) {
  std::vector<Pci> pci(static_cast<size_t>(count > 0 ? count : 0));
  for (int i = 0; i < count; ++i) {
    if (cu) {
      r.devices.push_back(describe_device(*cu, i, pci[i]));
    } else {
      GpuDevice d;
      d.ordinal = i;
      r.devices.push_back(d);
    }
  }
  for (int a = 0; a < count; ++a) {
    for (int b = a + 1; b < count; ++b) {
      GpuLink link;
      link.a = a;
      link.b = b;
      CUdevice da = 0, db = 0;
      int can = 0;
      if (cu && cu->can_access_peer && cu->device_get && cu->device_get(&da, a) == 0 &&
          cu->device_get(&db, b) == 0 && cu->can_access_peer(&can, da, db) == 0) {
        link.p2p = can != 0;
        link.source = "cuda";
      }
      r.links.push_back(link);
    }
  }
  if (nvml && !r.links.empty()) add_nvml_links(*nvml, pci, r);
}

GpuReport probe_gpus() {
  GpuReport r;
  cuda::Driver& drv = cuda::Driver::instance();
  r.driver_available = drv.available();
  r.driver_version = drv.driver_version();
  if (!drv.available()) {
    r.reason = drv.unavailable_reason();
  } else if (drv.device_count() <= 0) {
    r.reason = "no GPU";
  }
  r.count = drv.available() ? drv.device_count() : 0;

  CudaApi cu;
  const bool have_cu = r.count > 0 && load_cuda(cu);
  NvmlApi nvml;
  std::string why;
  if (load_nvml(nvml, why)) {
    r.nvml_available = true;
    char version[96] = "";
    if (nvml.driver_version && nvml.driver_version(version, sizeof version) == 0) {
      r.nvml_note = std::string("driver ") + version;
    }
  } else {
    r.nvml_note = why;
  }
  describe_gpus(r.count, have_cu ? &cu : nullptr, r.nvml_available ? &nvml : nullptr, r);
  if (r.nvml_available) nvml.shutdown();
  return r;
}

}  // namespace gpuwire::info
