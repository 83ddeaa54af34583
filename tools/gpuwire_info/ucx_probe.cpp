// The UCX found at run time: version, the transports UCP would use with this
// environment (UCX_TLS, UCX_NET_DEVICES apply), and the memory types it can
// move. The context is created with the features the engine asks for, so its
// answer about CUDA memory is the engine's.
#include <ucp/api/ucp.h>
#include <ucs/memory/memory_type.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <string>

#include "probes.hpp"

namespace gpuwire::info {
namespace {

// ucp_context_print_info writes one line per resource:
//   "#      resource 1  :  md 1  dev 1  flags -- tcp/eth0"
// There is no structured query of the transport list in UCP's API.
std::vector<UcxTransport> transports_of(ucp_context_h context) {
  std::vector<UcxTransport> out;
  char* buf = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&buf, &size);
  if (!f) return out;
  ucp_context_print_info(context, f);
  std::fclose(f);
  std::istringstream lines(std::string(buf, size));
  std::free(buf);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("resource") == std::string::npos) continue;
    size_t dashes = line.find("-- ");
    if (dashes == std::string::npos) continue;
    std::string tl = line.substr(dashes + 3);
    while (!tl.empty() && (tl.back() == ' ' || tl.back() == '\r')) tl.pop_back();
    size_t slash = tl.find('/');
    if (tl.empty() || slash == std::string::npos) continue;
    out.push_back(UcxTransport{tl.substr(0, slash), tl.substr(slash + 1)});
  }
  return out;
}

}  // namespace

UcxReport probe_ucx() {
  UcxReport r;
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  r.version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
  r.built_with = std::to_string(UCP_API_MAJOR) + "." + std::to_string(UCP_API_MINOR);

  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) {
    r.error = std::string("ucp_config_read: ") + ucs_status_string(s);
    return r;
  }
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES;
  p.features = UCP_FEATURE_AM;  // what the engine asks for
  ucp_context_h context = nullptr;
  s = ucp_init(&p, config, &context);
  ucp_config_release(config);
  if (s != UCS_OK) {
    r.error = std::string("ucp_init: ") + ucs_status_string(s);
    return r;
  }
  r.started = true;
  r.transports = transports_of(context);

  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(context, &attr) == UCS_OK) {
    // Only set bits are named: the running library knows every type it sets,
    // even one newer than these headers.
    for (unsigned bit = 0; bit < 64; ++bit) {
      if (attr.memory_types & (uint64_t{1} << bit)) {
        r.memory_types.emplace_back(ucs_memory_type_names[bit]);
      }
    }
    r.cuda_memory = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  }
  ucp_cleanup(context);
  return r;
}

}  // namespace gpuwire::info
