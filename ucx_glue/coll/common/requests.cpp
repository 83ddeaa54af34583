#include "requests.hpp"

#include <algorithm>

namespace gpuwire::coll {

int Requests::send(const void *buf, size_t bytes, int peer, int tag)
{
    void *r = nullptr;
    const int rc = t_->isend(t_->ctx, buf, bytes, peer, tag, &r);
    if (0 != rc) return rc;
    reqs_.push_back(r);
    return 0;
}

int Requests::recv(void *buf, size_t bytes, int peer, int tag)
{
    void *r = nullptr;
    const int rc = t_->irecv(t_->ctx, buf, bytes, peer, tag, &r);
    if (0 != rc) return rc;
    reqs_.push_back(r);
    return 0;
}

int Requests::wait_all()
{
    int rc = 0;
    if (!reqs_.empty()) rc = t_->wait_all(t_->ctx, reqs_.data(), reqs_.size());
    reqs_.clear();
    return rc;
}

int Requests::wait(size_t i)
{
    if (i >= reqs_.size() || nullptr == reqs_[i]) return 0;
    return t_->wait_all(t_->ctx, &reqs_[i], 1);
}

int Requests::test(size_t i, bool *done)
{
    if (i >= reqs_.size() || nullptr == reqs_[i]) {
        *done = true;
        return 0;
    }
    return t_->test(t_->ctx, &reqs_[i], done);
}

int Requests::test_all(bool *done)
{
    *done = true;
    for (size_t i = 0; i < reqs_.size(); ++i) {
        bool d = true;
        const int rc = test(i, &d);
        if (0 != rc) return rc;
        if (!d) *done = false;
    }
    if (*done) reqs_.clear();
    return 0;
}

void Requests::clear_completed()
{
    reqs_.erase(std::remove(reqs_.begin(), reqs_.end(), nullptr), reqs_.end());
}

void Requests::cancel_all()
{
    for (void *&r : reqs_) {
        if (nullptr != r) t_->cancel(t_->ctx, &r);
    }
    reqs_.clear();
}

} // namespace gpuwire::coll
