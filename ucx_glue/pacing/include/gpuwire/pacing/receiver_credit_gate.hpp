// ReceiverCreditGate: a receiver bounds the bytes in flight toward it.
//
// Many senders toward one receiver (incast) fill the switch port in front of
// it faster than any sender-side controller can react: CNPs need a marked
// queue and a round trip, and by then PFC has paused the fabric. In gpuwire's
// rendezvous the receiver decides when each chunk moves (it issues the GET,
// or sends the clear-to-send), so it can hold the sum over all senders of
// granted-but-not-landed bytes under a window, and issue grants at a rate
// slightly below its own link's rate. The queue in front of it then stays
// within a few packets, whatever the number of senders.
//
//   RTS from a sender       gate.add_demand(sender, message_bytes)
//   progress                while (auto g = gate.next_grant(now)) move g->bytes of g->sender
//   a chunk landed          gate.release(bytes)
//
// Senders with demand are served round-robin, one chunk each, so each gets
// an equal share of the receiver's link.
//
// Threading: not thread-safe; one owner (the receiver's progress path).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "gpuwire/pacing/token_bucket.hpp"

namespace gpuwire::pacing {

struct ReceiverCreditConfig {
  // Bytes granted and not yet landed, summed over senders: a backstop for
  // senders that stall and then send what they were granted all at once.
  // See recommended_window_bytes. [chunk_bytes, 2^40]
  std::uint64_t window_bytes = 512 * 1024;
  // Size of one grant (the rendezvous pipeline chunk). [4096, 2^30]
  std::uint64_t chunk_bytes = 64 * 1024;
  // The receiver's link. (0, 3200]
  double link_gbps = 100.0;
  // Grants are paced to (1 - grant_headroom) * link_gbps. Pacing at exactly
  // the link rate would keep forever any queue a burst once left. [0, 0.5)
  double grant_headroom = 0.01;
  // Grant bytes that may go out back to back after an idle spell; covers the
  // jitter of the progress loop that calls next_grant (link rate * polling
  // interval). Each byte of it can become a byte of switch queue, so keep it
  // near the switch's ECN threshold. [0, window_bytes]
  std::uint64_t grant_burst_bytes = 8 * 1024;
  // Sender ids are [0, max_senders). [1, 2^24]
  std::uint32_t max_senders = 1u << 16;
};

// Empty when every field is in range, else one line naming the first bad one.
std::string check_receiver_credit_config(const ReceiverCreditConfig& config);

// A window that keeps a link of `link_gbps` busy when a grant takes
// `round_trip_ns` to turn into landed bytes: one bandwidth-delay product
// plus two chunks of slack (one being sent, one being granted).
std::uint64_t recommended_window_bytes(double link_gbps, std::uint64_t round_trip_ns,
                                       std::uint64_t chunk_bytes);

struct CreditGrant {
  std::uint32_t sender;
  std::uint64_t bytes;
};

class ReceiverCreditGate {
 public:
  struct Stats {
    std::uint64_t grants = 0;
    std::uint64_t granted_bytes = 0;
    std::uint64_t released_bytes = 0;
    std::uint64_t window_stalls = 0;  // next_grant refused for the window
    std::uint64_t pacing_stalls = 0;  // next_grant refused for the grant rate
  };

  // nullopt (and `error` set to one line) when the config is out of range.
  static std::optional<ReceiverCreditGate> create(const ReceiverCreditConfig& config,
                                                  std::uint64_t now_ns, std::string& error);

  // `sender` has `bytes` more to send here. False (nothing changes) when
  // sender >= max_senders or bytes == 0.
  bool add_demand(std::uint32_t sender, std::uint64_t bytes);

  // Drops what `sender` still had to send (a cancelled message, a failed
  // peer) and returns it. Bytes already granted stay in flight until released.
  std::uint64_t cancel_demand(std::uint32_t sender);

  // The next grant if the window and the grant rate allow one now.
  std::optional<CreditGrant> next_grant(std::uint64_t now_ns);

  // When next_grant can next succeed: `now_ns` if now, a later time if only
  // the grant rate holds it back, UINT64_MAX if there is no demand or the
  // window is full (then add_demand or release changes the answer).
  std::uint64_t next_grant_time_ns(std::uint64_t now_ns) const;

  // Granted bytes landed (or will never come). False when `bytes` exceeds
  // what is in flight; then in-flight drops to zero.
  bool release(std::uint64_t bytes);

  std::uint64_t in_flight_bytes() const { return in_flight_; }
  std::uint64_t demand_bytes(std::uint32_t sender) const;
  std::size_t waiting_senders() const { return ready_.size(); }
  const Stats& stats() const { return stats_; }
  const ReceiverCreditConfig& config() const { return config_; }

 private:
  ReceiverCreditGate(const ReceiverCreditConfig& config, std::uint64_t now_ns);
  std::uint64_t head_grant_bytes() const;

  ReceiverCreditConfig config_;
  TokenBucket grant_pacing_;
  std::vector<std::uint64_t> demand_;  // indexed by sender, grown on demand
  std::deque<std::uint32_t> ready_;    // senders with demand, in round-robin order
  std::uint64_t in_flight_ = 0;
  Stats stats_;
};

}  // namespace gpuwire::pacing
