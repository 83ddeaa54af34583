/*
 * One call of the data movement (gpuwire/coll_move.h): its posted messages
 * (a Requests set, cancelled on destruction) and its own-block copy's
 * ticket. post() posts a call's messages in the order the header gives;
 * the blocking form then runs finish(), the non-blocking one poll().
 */
#ifndef GPUWIRE_COLL_MOVE_CALL_HPP
#define GPUWIRE_COLL_MOVE_CALL_HPP

#include <cstdint>
#include <string>

#include "common/requests.hpp"
#include "gpuwire/coll_move.h"

namespace gpuwire::coll {

/* Whether a description is one the engine can run: 0, or GW_CE_ERR_ARG with
 * why. blocking: the chain is allowed. */
int move_check(const gw_ce_transport_t &t, const gw_ce_move_t &m, bool blocking, std::string &why);

class MoveCall {
public:
    explicit MoveCall(const gw_ce_transport_t &t) : reqs_(t), me_(t.rank), n_(t.size) {}
    MoveCall(const MoveCall &) = delete;
    MoveCall &operator=(const MoveCall &) = delete;
    /* An unfinished copy is waited for: the GPU never writes into buffers
     * whose owner has been told the call is over. */
    ~MoveCall();

    /* Posts the call's messages and the own-block copy; a chained bcast
     * also waits for each segment before sending it on. */
    int post(const gw_ce_move_t &m);
    /* Waits for everything posted and the copy; the first failure wins. */
    int finish(int rc);
    /* Non-blocking: *done once everything has completed. */
    int poll(bool query, bool *done);

    const std::string &why() const { return why_; }

private:
    int send(const void *base, ptrdiff_t offset, size_t bytes, int peer, int tag);
    int recv(void *base, ptrdiff_t offset, size_t bytes, int peer, int tag);
    int bcast(const gw_ce_move_t &m);
    int bcast_chain(const gw_ce_move_t &m);
    int exchange(const gw_ce_move_t &m);
    int own_block(const gw_ce_move_t &m);
    int fail(int rc, const char *what, const std::string &detail);
    int copy_failed(const char *why);

    Requests reqs_;
    int me_, n_;
    int gpu_ = -1;
    uint64_t ticket_ = 0;
    bool copying_ = false;
    std::string why_;
};

} // namespace gpuwire::coll

#endif
