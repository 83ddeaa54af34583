/*
 * The engine's side of a gw_ce_transport_t (gpuwire/coll_engine.h): a set of
 * posted messages owned by one step of an algorithm. Whatever is still in
 * the set when it is destroyed is cancelled through the transport, so an
 * error path never leaks a request, and none is waited for twice.
 */
#ifndef GPUWIRE_COLL_COMMON_REQUESTS_HPP
#define GPUWIRE_COLL_COMMON_REQUESTS_HPP

#include <cstddef>
#include <vector>

#include "gpuwire/coll_engine.h"

namespace gpuwire::coll {

class Requests {
public:
    explicit Requests(const gw_ce_transport_t &t) : t_(&t) {}
    ~Requests() { cancel_all(); }
    Requests(const Requests &) = delete;
    Requests &operator=(const Requests &) = delete;

    const gw_ce_transport_t &transport() const { return *t_; }

    /* Posts one message; on success it joins the set. */
    int send(const void *buf, size_t bytes, int peer, int tag);
    int recv(void *buf, size_t bytes, int peer, int tag);

    /* Waits for every request of the set; the set is empty afterwards. */
    int wait_all();
    /* Waits for request i alone (it stays in the set as an empty slot). */
    int wait(size_t i);
    /* Whether request i has completed, without blocking (an empty slot has). */
    int test(size_t i, bool *done);
    /* Whether every request has completed; completed ones are released. */
    int test_all(bool *done);

    size_t size() const { return reqs_.size(); }
    void clear_completed();
    void cancel_all();

private:
    const gw_ce_transport_t *t_;
    std::vector<void *> reqs_;
};

} // namespace gpuwire::coll

#endif
