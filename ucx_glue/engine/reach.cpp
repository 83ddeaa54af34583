// Reachability of a peer, checked at start-up.
//
// Endpoints are made lazily, on a peer's first message. A peer that UCX
// cannot reach with the transports it was given (UCX_TLS=cma, or =self, on
// a node of several processes) would then only show on that first send, in
// the middle of the application. So the job checks, while it starts, the
// peers that stand for the others (the pml chooses them), by making their
// endpoint now.
//
// What ucp_ep_create costs (UCX 1.13, ucp_ep_create_to_worker_addr): it
// unpacks the remote worker address and selects lanes locally
// (ucp_wireup_init_lanes); when no transport of this worker reaches any of
// the peer's, it fails there with UCS_ERR_UNREACHABLE before anything is
// sent. Only an endpoint that does get lanes may queue a wire-up request
// (transports that connect endpoint to endpoint), which its first message
// would have sent anyway; the endpoint is kept for that message. Nothing in
// UCX's public API says "reachable?" without making the endpoint (the
// address unpacking is internal), which is why the pml checks a few
// representative peers rather than everyone: connecting to every process
// would undo the lazy endpoints (memory and wire-up per pair).
#include <cstdlib>

#include "engine/engine.hpp"

namespace gpuwire::engine {

gw_status_t Engine::check_reachable(uint32_t peer, std::string &why)
{
    if (peer >= peers_.size()) {
        why = "process " + std::to_string(peer) + " is not in this job";
        return GW_ERR_INVALID;
    }
    gw_status_t st;
    ucp_ep_h ep;
    {
        std::lock_guard<EngineLock> guard(lock_);
        ep = endpoint(peer, st, true);
    }
    if (ep) return GW_OK;
    const char *tls = std::getenv("UCX_TLS");
    why = "UCX cannot reach process " + std::to_string(peer) +
          (peer == params_.my_peer ? " (this process itself)" : "") + " with the transports it was given (" +
          (tls ? std::string("UCX_TLS=") + tls : std::string("UCX_TLS unset: all")) +
          "); allow one that reaches it (e.g. UCX_TLS=sm,self for processes of one node, or "
          "leave UCX_TLS unset)";
    return st == GW_OK ? GW_ERR_UNREACHABLE : st;
}

} // namespace gpuwire::engine
