// The paths gpuwire will take on this machine, decided by the engine itself.
//
// A one-process engine is created with the pml_gpuwire_* settings found in
// the environment (OMPI_MCA_pml_gpuwire_*): it starts UCX and looks for a GPU
// exactly as under mpirun, so "declined" and "device buffers: no" carry the
// engine's own reasons. Each path is then engine::choose_protocol() for a
// typical message, the function the engine calls for every message.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

#include "engine/protocol.hpp"
#include "gpuwire/engine.h"
#include "probes.hpp"

namespace gpuwire::info {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Open MPI's boolean spellings (its enum of 0: f|false|disabled|no|n,
// 1: t|true|enabled|yes|y).
bool parse_bool(const std::string& text, bool* out) {
  const std::string t = lower(text);
  if (t == "1" || t == "true" || t == "yes" || t == "enabled" || t == "t" || t == "y") {
    *out = true;
    return true;
  }
  if (t == "0" || t == "false" || t == "no" || t == "disabled" || t == "f" || t == "n") {
    *out = false;
    return true;
  }
  return false;
}

// A size as Open MPI reads one: digits with an optional k, m or g (binary).
bool parse_size(const std::string& text, size_t* out) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 0);
  std::string suffix = lower(end);
  unsigned shift = 0;
  if (suffix == "k") shift = 10;
  else if (suffix == "m") shift = 20;
  else if (suffix == "g") shift = 30;
  else if (!suffix.empty()) return false;
  if (shift && v > (~0ull >> shift)) return false;
  *out = static_cast<size_t>(v << shift);
  return true;
}

Settings read_settings() {
  Settings s;
  gw_engine_params_t defaults;
  gw_engine_params_init(&defaults);
  s.device = defaults.device_support != 0;
  s.ipc = defaults.ipc_enabled != 0;
  s.ipc_threshold = defaults.ipc_threshold;

  auto env = [&s](const char* param) -> const char* {
    std::string var = std::string("OMPI_MCA_pml_gpuwire_") + param;
    const char* v = std::getenv(var.c_str());
    if (v) s.from_env.emplace_back(std::string("pml_gpuwire_") + param, v);
    return v;
  };
  auto bad = [&s](const char* param, const char* value) {
    s.errors.push_back(std::string("OMPI_MCA_pml_gpuwire_") + param + "=" + value +
                       " is not a valid value (Open MPI reports it as invalid); the default is assumed here");
  };
  if (const char* v = env("device"); v && !parse_bool(v, &s.device)) bad("device", v);
  if (const char* v = env("ipc"); v && !parse_bool(v, &s.ipc)) bad("ipc", v);
  if (const char* v = env("ipc_threshold"); v && !parse_size(v, &s.ipc_threshold)) {
    bad("ipc_threshold", v);
  }
  return s;
}

int no_peer_address(void*, uint32_t, const void**, size_t*) { return -1; }

void keep_line(void* ctx, int, const char* msg) {
  static_cast<std::vector<std::string>*>(ctx)->emplace_back(msg);
}

std::string decide(bool exportable, bool local, size_t len, const engine::PathConfig& c) {
  return engine::protocol_name(
      engine::choose_protocol(engine::SendTraits{true, exportable, local}, len, c));
}

}  // namespace

PathReport probe_paths(const UcxReport& ucx) {
  PathReport r;
  r.settings = read_settings();

  gw_engine_params_t p;
  gw_engine_params_init(&p);
  p.my_peer = 0;
  p.npeers = 1;
  p.resolve_peer = no_peer_address;
  p.log = keep_line;
  p.log_ctx = &r.engine_log;
  p.verbose = GW_LOG_INFO;
  p.device_support = r.settings.device ? 1 : 0;
  p.ipc_enabled = r.settings.ipc ? 1 : 0;
  p.ipc_threshold = r.settings.ipc_threshold;

  gw_engine_t* e = nullptr;
  char why[512] = "";
  if (gw_engine_create(&p, &e, why, sizeof why) == GW_OK) {
    r.engine_started = true;
    const char* no_device = "";
    r.device_buffers = gw_engine_has_device(e, &no_device) != 0;
    if (!r.device_buffers) r.device_reason = no_device ? no_device : "";
    gw_engine_destroy(e);
  } else {
    r.decline = why;
  }

  // The decisions are made whether or not a GPU is usable here: they say
  // what a device buffer would take with this UCX and these settings.
  engine::PathConfig c;
  c.ipc_enabled = p.ipc_enabled != 0;
  c.ipc_threshold = p.ipc_threshold;
  c.ucx_has_cuda = ucx.cuda_memory;
  c.ipc_sync_max = p.ipc_sync_max;
  r.host = engine::protocol_name(
      engine::choose_protocol(engine::SendTraits{false, false, false}, 1, c));
  const size_t at_threshold = std::max<size_t>(c.ipc_threshold, 1);
  r.same_node = decide(true, true, at_threshold, c);
  if (c.ipc_threshold > 1) r.same_node_below_threshold = decide(true, true, c.ipc_threshold - 1, c);
  r.same_node_pool = decide(false, true, at_threshold, c);  // cudaMallocAsync: no legacy IPC
  r.between_nodes = decide(true, false, size_t{1} << 20, c);
  return r;
}

}  // namespace gpuwire::info
