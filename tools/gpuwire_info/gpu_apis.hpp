// The few CUDA driver and NVML entry points gpuwire-info uses, as tables of
// function pointers filled by dlopen/dlsym (neither library is linked, and
// nvml.h is not part of the CUDA toolkit). Types and constants are those of
// the libraries' stable ABI. Tests fill the tables with fakes.
#pragma once

#include <cstddef>
#include <string>

#include "report.hpp"

namespace gpuwire::info {

using CUresult = int;
using CUdevice = int;
constexpr int kAttrPciBusId = 33;     // CU_DEVICE_ATTRIBUTE_PCI_BUS_ID
constexpr int kAttrPciDeviceId = 34;  // CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID
constexpr int kAttrPciDomainId = 50;  // CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID
constexpr int kAttrCcMajor = 75;      // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrCcMinor = 76;      // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

// libcuda.so.1. Queries of devices only: no context is created.
struct CudaApi {
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*get_name)(char*, int, CUdevice) = nullptr;
  CUresult (*total_mem)(size_t*, CUdevice) = nullptr;               // cuDeviceTotalMem_v2
  CUresult (*get_attribute)(int*, int, CUdevice) = nullptr;
  CUresult (*get_uuid)(unsigned char*, CUdevice) = nullptr;         // cuDeviceGetUuid_v2
  CUresult (*can_access_peer)(int*, CUdevice, CUdevice) = nullptr;
};

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
// nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 and nvmlDeviceGetNvLinkRemotePciInfo_v2 fill it.
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
static_assert(sizeof(NvmlPciInfo) == 68, "nvmlPciInfo_t is 68 bytes");
constexpr unsigned kNvmlMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS
constexpr int kNvmlFeatureEnabled = 1;  // NVML_FEATURE_ENABLED
constexpr int kNvmlP2pCapsRead = 0;     // NVML_P2P_CAPS_INDEX_READ
constexpr int kNvmlP2pStatusOk = 0;     // NVML_P2P_STATUS_OK

// libnvidia-ml.so.1.
struct NvmlApi {
  nvmlReturn_t (*init)() = nullptr;  // nvmlInit_v2
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;  // nvmlSystemGetDriverVersion
  nvmlReturn_t (*count)(unsigned*) = nullptr;                 // nvmlDeviceGetCount_v2
  nvmlReturn_t (*handle)(unsigned, nvmlDevice_t*) = nullptr;  // ..GetHandleByIndex_v2
  nvmlReturn_t (*pci_info)(nvmlDevice_t, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*nvlink_remote_pci)(nvmlDevice_t, unsigned, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*common_ancestor)(nvmlDevice_t, nvmlDevice_t, int*) = nullptr;  // topology level
  nvmlReturn_t (*p2p_status)(nvmlDevice_t, nvmlDevice_t, int, int*) = nullptr;
};

// Load and initialise the libraries; false when absent or unusable (`why`
// says which). Loaded libraries stay loaded.
bool load_cuda(CudaApi& api);
bool load_nvml(NvmlApi& api, std::string& why);

// Fills r.devices and r.links for the first `count` CUDA devices, from
// whichever of the two tables is given (either may be null or partly
// filled). NVML's devices are matched to CUDA's by PCI address, since the
// two number them differently (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER).
void describe_gpus(int count, const CudaApi* cuda, const NvmlApi* nvml, GpuReport& r);

// nvmlGpuTopologyLevel_t in nvidia-smi's words ("PIX", "SYS", ...); "" if unknown.
const char* topology_name(int level);

}  // namespace gpuwire::info
