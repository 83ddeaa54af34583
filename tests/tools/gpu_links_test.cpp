// gpuwire-info's GPU description against fake CUDA and NVML tables: NVML's
// devices matched to CUDA's by PCI address whatever their order, NVLinks
// counted per peer (inactive links and links to hidden GPUs left out), the
// PCIe topology where there is no NVLink, CUDA's peer-access answer first.
// Also the renderers on such a report.
#include <cstring>
#include <map>
#include <string>

#include "gpu_apis.hpp"
#include "gw_catch.hpp"
#include "json_writer.hpp"
#include "probes.hpp"

using namespace gpuwire::info;

namespace {

// CUDA ordinals 0, 1, 2 at these PCI buses (domain 0, device 0).
const unsigned kCudaBus[] = {0x18, 0x2a, 0x9b};
// NVML's order differs, and it sees a GPU CUDA does not (bus 0x55).
const unsigned kNvmlBus[] = {0x9b, 0x18, 0x55, 0x2a};

nvmlDevice_t handle_of(unsigned bus) { return reinterpret_cast<nvmlDevice_t>(uintptr_t{bus}); }
unsigned bus_of(nvmlDevice_t d) { return static_cast<unsigned>(reinterpret_cast<uintptr_t>(d)); }

CUresult cu_device_get(CUdevice* d, int ordinal) {
  if (ordinal < 0 || ordinal > 2) return 101;  // CUDA_ERROR_INVALID_DEVICE
  *d = ordinal;
  return 0;
}
CUresult cu_name(char* out, int len, CUdevice d) {
  std::snprintf(out, len, "Fake GPU %d", d);
  return 0;
}
CUresult cu_mem(size_t* bytes, CUdevice) {
  *bytes = size_t{80} << 30;
  return 0;
}
CUresult cu_attr(int* v, int attr, CUdevice d) {
  switch (attr) {
    case kAttrPciDomainId: *v = 0; return 0;
    case kAttrPciBusId: *v = static_cast<int>(kCudaBus[d]); return 0;
    case kAttrPciDeviceId: *v = 0; return 0;
    case kAttrCcMajor: *v = 9; return 0;
    case kAttrCcMinor: *v = 0; return 0;
  }
  return 1;
}
CUresult cu_uuid(unsigned char* u, CUdevice d) {
  std::memset(u, 0, 16);
  u[15] = static_cast<unsigned char>(d);
  return 0;
}
CUresult cu_peer(int* can, CUdevice a, CUdevice b) {
  *can = (a + b == 1);  // only 0 <-> 1
  return 0;
}

nvmlReturn_t nv_count(unsigned* n) {
  *n = 4;
  return 0;
}
nvmlReturn_t nv_handle(unsigned i, nvmlDevice_t* d) {
  if (i >= 4) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *d = handle_of(kNvmlBus[i]);
  return 0;
}
nvmlReturn_t nv_pci(nvmlDevice_t d, NvmlPciInfo* p) {
  std::memset(p, 0, sizeof *p);
  p->bus = bus_of(d);
  return 0;
}
// 0x18: links 0-11 to 0x2a (link 5 down), 12-17 to the hidden 0x55;
// 0x2a: links 0-11 to 0x18; 0x9b and 0x55 (as seen here): no NVLink.
nvmlReturn_t nv_link_state(nvmlDevice_t d, unsigned link, int* active) {
  const unsigned bus = bus_of(d);
  if (bus == 0x9b) return 3;  // NVML_ERROR_NOT_SUPPORTED
  if (bus == 0x2a && link >= 12) return 2;
  *active = (bus == 0x18 && link == 5) ? 0 : kNvmlFeatureEnabled;
  return 0;
}
nvmlReturn_t nv_link_remote(nvmlDevice_t d, unsigned link, NvmlPciInfo* p) {
  std::memset(p, 0, sizeof *p);
  const unsigned bus = bus_of(d);
  if (bus == 0x18) p->bus = link < 12 ? 0x2a : 0x55;
  else if (bus == 0x2a) p->bus = 0x18;
  else return 3;
  return 0;
}
nvmlReturn_t nv_ancestor(nvmlDevice_t a, nvmlDevice_t b, int* level) {
  const unsigned x = bus_of(a), y = bus_of(b);
  *level = (x == 0x9b || y == 0x9b) ? ((x == 0x18 || y == 0x18) ? 50 : 40) : 10;
  return 0;
}
nvmlReturn_t nv_p2p(nvmlDevice_t a, nvmlDevice_t b, int index, int* status) {
  REQUIRE(index == kNvmlP2pCapsRead);
  const unsigned x = bus_of(a), y = bus_of(b);
  *status = (x != 0x9b && y != 0x9b) ? kNvmlP2pStatusOk : 5;  // 5: not supported
  return 0;
}

CudaApi fake_cuda() {
  CudaApi c;
  c.device_get = cu_device_get;
  c.get_name = cu_name;
  c.total_mem = cu_mem;
  c.get_attribute = cu_attr;
  c.get_uuid = cu_uuid;
  c.can_access_peer = cu_peer;
  return c;
}

NvmlApi fake_nvml() {
  NvmlApi n;
  n.count = nv_count;
  n.handle = nv_handle;
  n.pci_info = nv_pci;
  n.nvlink_state = nv_link_state;
  n.nvlink_remote_pci = nv_link_remote;
  n.common_ancestor = nv_ancestor;
  n.p2p_status = nv_p2p;
  return n;
}

const GpuLink& link_of(const GpuReport& r, int a, int b) {
  for (const GpuLink& l : r.links) {
    if (l.a == a && l.b == b) return l;
  }
  FAIL("no link " << a << "-" << b);
  return r.links.front();
}

}  // namespace

TEST_CASE("GPUs are described from CUDA, links from NVML matched by PCI address") {
  CudaApi cu = fake_cuda();
  NvmlApi nv = fake_nvml();
  GpuReport r;
  r.count = 3;
  describe_gpus(3, &cu, &nv, r);

  REQUIRE(r.devices.size() == 3);
  CHECK(r.devices[1].name == "Fake GPU 1");
  CHECK(r.devices[1].pci_bus_id == "0000:2a:00.0");
  CHECK(r.devices[2].uuid == "GPU-00000000-0000-0000-0000-000000000002");
  CHECK(r.devices[0].cc_major == 9);
  CHECK(r.devices[0].memory_bytes == size_t{80} << 30);
  REQUIRE(r.links.size() == 3);

  const GpuLink& l01 = link_of(r, 0, 1);
  CHECK(l01.nvlinks == 11);  // 12 links, one down; none to the hidden GPU counted
  CHECK(l01.topology == "NV11");
  CHECK(l01.p2p == true);
  CHECK(l01.source == "nvml+cuda");

  const GpuLink& l02 = link_of(r, 0, 2);
  CHECK(l02.nvlinks == 0);
  CHECK(l02.topology == "SYS");
  CHECK(l02.p2p == false);  // CUDA's answer

  const GpuLink& l12 = link_of(r, 1, 2);
  CHECK(l12.nvlinks == 0);
  CHECK(l12.topology == "NODE");
}

TEST_CASE("without NVML, links carry CUDA's peer access only") {
  CudaApi cu = fake_cuda();
  GpuReport r;
  describe_gpus(3, &cu, nullptr, r);
  const GpuLink& l01 = link_of(r, 0, 1);
  CHECK_FALSE(l01.nvlinks.has_value());
  CHECK(l01.topology.empty());
  CHECK(l01.p2p == true);
  CHECK(l01.source == "cuda");
  CHECK(link_of(r, 1, 2).p2p == false);
}

TEST_CASE("without libcuda details, NVML still gives peer access; devices stay bare") {
  CudaApi none;  // no entry points: names and PCI addresses unknown
  NvmlApi nv = fake_nvml();
  GpuReport r;
  describe_gpus(2, &none, &nv, r);
  REQUIRE(r.devices.size() == 2);
  CHECK(r.devices[0].name.empty());
  // No PCI address from CUDA, so no NVML device can be matched.
  CHECK_FALSE(r.links[0].nvlinks.has_value());
  CHECK_FALSE(r.links[0].p2p.has_value());
}

TEST_CASE("topology levels read as nvidia-smi prints them") {
  CHECK(std::string(topology_name(10)) == "PIX");
  CHECK(std::string(topology_name(20)) == "PXB");
  CHECK(std::string(topology_name(30)) == "PHB");
  CHECK(std::string(topology_name(40)) == "NODE");
  CHECK(std::string(topology_name(50)) == "SYS");
  CHECK(std::string(topology_name(7)).empty());
}

TEST_CASE("the text report names each link and the device paths") {
  CudaApi cu = fake_cuda();
  NvmlApi nv = fake_nvml();
  Report rep;
  rep.gpuwire_version = "test";
  rep.gpus.count = 3;
  rep.gpus.driver_available = true;
  rep.gpus.driver_version = 13000;
  describe_gpus(3, &cu, &nv, rep.gpus);
  rep.paths.engine_started = true;
  rep.paths.device_buffers = true;
  rep.paths.host = "host";
  rep.paths.same_node = "ipc";
  rep.paths.same_node_pool = "staged";
  rep.paths.between_nodes = "ucx-device";
  rep.ucx.cuda_memory = true;
  std::string text;
  render_text(rep, false, text);
  CHECK(text.find("GPUs (CUDA driver 13.0)") != std::string::npos);
  CHECK(text.find("  GPU 0  Fake GPU 0  sm_90  80 GiB  0000:18:00.0") != std::string::npos);
  CHECK(text.find("GPU 0 <-> GPU 1: 11 NVLinks (NV11), peer access yes") != std::string::npos);
  CHECK(text.find("GPU 0 <-> GPU 2: no NVLink, PCIe SYS, peer access no") != std::string::npos);
  CHECK(text.find("device buffers  yes") != std::string::npos);
  CHECK(text.find("between nodes   GDR through UCX") != std::string::npos);
  CHECK(text.find("cudaMallocAsync memory  staged") != std::string::npos);

  std::string json;
  render_json(rep, json);
  CHECK(json.find("\"nvlinks\": 11") != std::string::npos);
  CHECK(json.find("\"in_use\": true") != std::string::npos);
}

TEST_CASE("the JSON writer escapes strings and keeps invalid UTF-8 out") {
  std::string out;
  JsonWriter j(out);
  j.begin_object();
  j.string("q", "a\"b\\c\n\x01");
  j.string("utf8", "caf\xc3\xa9");
  j.string("bad", "x\xff" "y");
  j.begin_array("empty");
  j.end_array();
  j.optional_number("none", std::nullopt);
  j.end_object();
  CHECK(out ==
        "{\n"
        "  \"q\": \"a\\\"b\\\\c\\n\\u0001\",\n"
        "  \"utf8\": \"caf\xc3\xa9\",\n"
        "  \"bad\": \"x\\ufffdy\",\n"
        "  \"empty\": [],\n"
        "  \"none\": null\n"
        "}");
}
