// MPI matching: per-communicator queues of posted receives and unexpected
// messages, both in arrival/posting order.
//
// MPI requires that a receive matches the earliest message (from the sender's
// order) it can match, and that a message matches the earliest posted receive
// that can take it. Both queues are plain intrusive lists in order; a scan
// stops at the first hit. Nothing here allocates: the nodes live inside
// requests (receives) or inbound message records (unexpected messages).
//
// Not thread-safe: the engine's lock protects it.
#pragma once

#include <cstdint>

#include "gpuwire/engine.h"

namespace gpuwire::engine {

// True when a receive for (want_source, want_tag) takes a message from
// (source, tag). GW_ANY_TAG never matches negative (internal) tags.
inline bool tag_matches(int32_t want_source, int32_t want_tag, int32_t source, int32_t tag)
{
    return (want_source == GW_ANY_SOURCE || want_source == source) &&
           (want_tag == tag || (want_tag == GW_ANY_TAG && tag >= 0));
}

struct ListNode {
    ListNode *prev = nullptr;
    ListNode *next = nullptr;
    bool linked() const { return prev != nullptr; }
};

// A circular doubly linked list with a sentinel; T embeds a ListNode `link`.
template <class T>
class OrderedQueue {
public:
    OrderedQueue() { head_.prev = head_.next = &head_; }
    OrderedQueue(const OrderedQueue &) = delete;
    OrderedQueue &operator=(const OrderedQueue &) = delete;

    bool empty() const { return head_.next == &head_; }
    size_t size() const { return size_; }

    void push_back(T *item)
    {
        ListNode *n = &item->link;
        n->prev = head_.prev;
        n->next = &head_;
        head_.prev->next = n;
        head_.prev = n;
        ++size_;
    }

    static void unlink(T *item, OrderedQueue &q)
    {
        ListNode *n = &item->link;
        n->prev->next = n->next;
        n->next->prev = n->prev;
        n->prev = n->next = nullptr;
        --q.size_;
    }
    void remove(T *item) { unlink(item, *this); }

    // Removes and returns the first item for which pred(item) holds.
    template <class Pred>
    T *take_first(Pred pred)
    {
        for (ListNode *n = head_.next; n != &head_; n = n->next) {
            T *item = from_node(n);
            if (pred(item)) {
                remove(item);
                return item;
            }
        }
        return nullptr;
    }
    template <class Pred>
    T *find_first(Pred pred) const
    {
        for (ListNode *n = head_.next; n != &head_; n = n->next) {
            T *item = from_node(n);
            if (pred(item)) return item;
        }
        return nullptr;
    }
    // Calls f(item) for every item, in order; f must not change the queue.
    template <class F>
    void for_each(F f) const
    {
        for (ListNode *n = head_.next; n != &head_; n = n->next) f(from_node(n));
    }
    T *pop_front()
    {
        if (empty()) return nullptr;
        T *item = from_node(head_.next);
        remove(item);
        return item;
    }

private:
    static T *from_node(const ListNode *n)
    {
        // `link` is the first member of every queued type (checked where used).
        return reinterpret_cast<T *>(const_cast<ListNode *>(n));
    }
    ListNode head_;
    size_t size_ = 0;
};

// The matching state of one communicator (context id) on this process.
// P: posted receive type with members link, want_source, want_tag.
// U: unexpected message type with members link, source, tag.
template <class P, class U>
class MatchContext {
public:
    explicit MatchContext(uint32_t id) : id_(id) {}
    uint32_t id() const { return id_; }

    // A message arrived in order: returns the receive it completes (removed
    // from the posted queue), or nullptr when it must wait as unexpected.
    P *match_posted(int32_t source, int32_t tag)
    {
        return posted_.take_first(
            [&](P *r) { return tag_matches(r->want_source, r->want_tag, source, tag); });
    }
    // A receive is posted: returns the earliest unexpected message it takes
    // (removed), or nullptr when it must be queued as posted.
    U *match_unexpected(int32_t want_source, int32_t want_tag)
    {
        return unexpected_.take_first(
            [&](U *m) { return tag_matches(want_source, want_tag, m->source, m->tag); });
    }
    U *peek_unexpected(int32_t want_source, int32_t want_tag) const
    {
        return unexpected_.find_first(
            [&](U *m) { return tag_matches(want_source, want_tag, m->source, m->tag); });
    }

    OrderedQueue<P> &posted() { return posted_; }
    OrderedQueue<U> &unexpected() { return unexpected_; }

private:
    uint32_t id_;
    OrderedQueue<P> posted_;
    OrderedQueue<U> unexpected_;
};

} // namespace gpuwire::engine
