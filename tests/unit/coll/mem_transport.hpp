/*
 * A gw_ce_transport_t over memory, for the collective engine's unit tests:
 * n ranks in one process, one thread each (or one thread driving every
 * rank's non-blocking form in turn). A send copies its bytes at once and
 * completes; a receive completes once a message of its (source, tag) is
 * there, in posting order, as MPI matches. A message longer than the
 * receive is an error, as MPI_ERR_TRUNCATE is. Every request must have been
 * waited for, tested to completion or cancelled when the world is destroyed:
 * leaks() counts those that were not.
 */
#ifndef GPUWIRE_TESTS_COLL_MEM_TRANSPORT_HPP
#define GPUWIRE_TESTS_COLL_MEM_TRANSPORT_HPP

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "gpuwire/coll_engine.h"

namespace gwtest {

class MemWorld {
public:
    explicit MemWorld(int n) : n_(n), eps_(n)
    {
        for (int r = 0; r < n; ++r) {
            eps_[r] = Endpoint{this, r};
            gw_ce_transport_t &t = ts_.emplace_back();
            t.ctx = &eps_[r];
            t.rank = r;
            t.size = n;
            t.isend = &MemWorld::isend;
            t.irecv = &MemWorld::irecv;
            t.test = &MemWorld::test;
            t.wait_all = &MemWorld::wait_all;
            t.cancel = &MemWorld::cancel;
            t.progress = &MemWorld::progress;
        }
    }
    const gw_ce_transport_t &transport(int rank) const { return ts_[rank]; }
    int size() const { return n_; }
    /* Requests neither completed-and-released nor cancelled. */
    long leaks() const
    {
        std::lock_guard<std::mutex> g(mu_);
        return live_;
    }
    /* Messages sent but never received. */
    size_t unreceived() const
    {
        std::lock_guard<std::mutex> g(mu_);
        size_t k = 0;
        for (const auto &[key, q] : mail_) k += q.size();
        return k;
    }
    long sends() const
    {
        std::lock_guard<std::mutex> g(mu_);
        return sends_;
    }

private:
    struct Endpoint {
        MemWorld *w;
        int rank;
    };
    struct Req {
        bool is_recv;
        void *buf;
        size_t bytes;
        int src, dst, tag;
        bool done = false;
        int status = 0;
    };
    using Key = std::tuple<int, int, int>; /* src, dst, tag */

    /* Delivers what has arrived to the oldest receives of each (src, dst,
     * tag); under mu_. */
    void match(const Key &k)
    {
        auto &q = mail_[k];
        auto &posted = recvs_[k];
        while (!q.empty() && !posted.empty()) {
            Req *r = posted.front();
            posted.pop_front();
            std::vector<char> &m = q.front();
            if (m.size() > r->bytes) {
                r->status = GW_CE_ERR;
            } else if (!m.empty()) {
                std::memcpy(r->buf, m.data(), m.size());
            }
            r->done = true;
            q.pop_front();
        }
        cv_.notify_all();
    }

    static int isend(void *ctx, const void *buf, size_t bytes, int peer, int tag, void **req)
    {
        auto *e = static_cast<Endpoint *>(ctx);
        MemWorld *w = e->w;
        if (peer < 0 || peer >= w->n_) return GW_CE_ERR_ARG;
        auto *r = new Req{false, const_cast<void *>(buf), bytes, e->rank, peer, tag};
        std::lock_guard<std::mutex> g(w->mu_);
        const Key k{e->rank, peer, tag};
        const char *p = static_cast<const char *>(buf);
        w->mail_[k].emplace_back(p, p + bytes);
        r->done = true;
        ++w->live_;
        ++w->sends_;
        w->match(k);
        *req = r;
        return 0;
    }
    static int irecv(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req)
    {
        auto *e = static_cast<Endpoint *>(ctx);
        MemWorld *w = e->w;
        if (peer < 0 || peer >= w->n_) return GW_CE_ERR_ARG;
        auto *r = new Req{true, buf, bytes, peer, e->rank, tag};
        std::lock_guard<std::mutex> g(w->mu_);
        const Key k{peer, e->rank, tag};
        w->recvs_[k].push_back(r);
        ++w->live_;
        w->match(k);
        *req = r;
        return 0;
    }
    static int test(void *ctx, void **req, bool *done)
    {
        MemWorld *w = static_cast<Endpoint *>(ctx)->w;
        auto *r = static_cast<Req *>(*req);
        std::lock_guard<std::mutex> g(w->mu_);
        *done = r->done;
        if (!r->done) return 0;
        const int st = r->status;
        delete r;
        *req = nullptr;
        --w->live_;
        return st;
    }
    static int wait_all(void *ctx, void **reqs, size_t n)
    {
        MemWorld *w = static_cast<Endpoint *>(ctx)->w;
        int rc = 0;
        std::unique_lock<std::mutex> g(w->mu_);
        for (size_t i = 0; i < n; ++i) {
            auto *r = static_cast<Req *>(reqs[i]);
            if (nullptr == r) continue;
            w->cv_.wait(g, [r] { return r->done; });
            if (0 == rc) rc = r->status;
            delete r;
            reqs[i] = nullptr;
            --w->live_;
        }
        return rc;
    }
    static void cancel(void *ctx, void **req)
    {
        MemWorld *w = static_cast<Endpoint *>(ctx)->w;
        auto *r = static_cast<Req *>(*req);
        if (nullptr == r) return;
        std::lock_guard<std::mutex> g(w->mu_);
        if (r->is_recv && !r->done) {
            auto &posted = w->recvs_[Key{r->src, r->dst, r->tag}];
            for (auto it = posted.begin(); it != posted.end(); ++it) {
                if (*it == r) {
                    posted.erase(it);
                    break;
                }
            }
        }
        delete r;
        *req = nullptr;
        --w->live_;
    }
    static void progress(void *) {}

    int n_;
    std::vector<Endpoint> eps_;
    std::vector<gw_ce_transport_t> ts_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::map<Key, std::deque<std::vector<char>>> mail_;
    std::map<Key, std::deque<Req *>> recvs_;
    long live_ = 0, sends_ = 0;
};

} // namespace gwtest

#endif
