// What every other file of the engine stands on: its log, the contexts
// (communicators) by id, and the running of completed requests' callbacks.
#include "engine/engine.hpp"

#include <cstdarg>
#include <cstdio>

namespace gpuwire::engine {

void Engine::log(int level, const char *fmt, ...)
{
    if (!params_.log || level > params_.verbose) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    params_.log(params_.log_ctx, level, line);
}

Context &Engine::context(uint32_t id)
{
    if (last_context_ && last_context_->id() == id) return *last_context_;
    auto it = contexts_.find(id);
    if (it == contexts_.end()) {
        it = contexts_.emplace(id, std::make_unique<Context>(id)).first;
    }
    last_context_ = it->second.get();
    return *last_context_;
}

void Engine::run_completions()
{
    for (;;) {
        std::unique_lock<EngineLock> guard(lock_);
        if (done_head_ == done_.size()) {
            done_.clear();
            done_head_ = 0;
            return;
        }
        gw_request_t *req = done_[done_head_++];
        guard.unlock();
        req->complete_cb(req);
    }
}

} // namespace gpuwire::engine

extern "C" const char *gw_status_string(gw_status_t status)
{
    switch (status) {
    case GW_OK: return "success";
    case GW_ERR_NO_MEMORY: return "out of memory";
    case GW_ERR_UNREACHABLE: return "peer unreachable";
    case GW_ERR_TRUNCATE: return "message truncated";
    case GW_ERR_CANCELED: return "cancelled";
    case GW_ERR_TRANSPORT: return "transport error";
    case GW_ERR_INVALID: return "invalid argument";
    case GW_ERR_UNSUPPORTED: return "not supported";
    }
    return "unknown status";
}
