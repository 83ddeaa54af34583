// One switch egress port: a FIFO with RED/ECN marking on enqueue and PFC.
//
// PFC is modelled per egress queue: when the queue passes XOFF, every host
// with bytes in it is paused (one XOFF frame each), and so is any host whose
// packet arrives while the queue is above XOFF; when it falls below XON every
// paused host is resumed. Real switches count per ingress port and priority
// against a shared buffer; for one congested egress port fed by N hosts the
// effect (every sender into the hot port stops) is the same.
//
// Threading: not thread-safe; owned by the simulation.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "fabric_sim.hpp"

namespace gpuwire::sim {

struct SimPacket {
  std::uint32_t flow;
  std::uint32_t src;
  std::uint32_t bytes;
  bool ecn_marked;
};

// RED's marking probability for an instantaneous queue of `queue_bytes`.
double red_mark_probability(std::uint64_t queue_bytes, const SwitchConfig& config);

class EgressPort {
 public:
  EgressPort(const SwitchConfig& config, std::uint32_t hosts);

  // Enqueues `packet`, marking it with probability red_mark_probability
  // (`uniform01` is the caller's random draw). Hosts to pause are appended
  // to `pause`.
  void enqueue(SimPacket packet, double uniform01, std::vector<std::uint32_t>& pause);

  // Removes the head packet; hosts to resume are appended to `resume`.
  SimPacket dequeue(std::vector<std::uint32_t>& resume);

  bool empty() const { return packets_.empty(); }
  const SimPacket& head() const { return packets_.front(); }
  std::uint64_t queue_bytes() const { return queue_bytes_; }
  std::uint64_t pause_frames() const { return pause_frames_; }
  std::uint64_t marked_packets() const { return marked_packets_; }

 private:
  SwitchConfig config_;
  std::deque<SimPacket> packets_;
  std::uint64_t queue_bytes_ = 0;
  std::vector<std::uint64_t> bytes_from_;  // per source host
  std::vector<bool> paused_;               // per source host: paused by this port
  std::uint32_t paused_count_ = 0;
  std::uint64_t pause_frames_ = 0;
  std::uint64_t marked_packets_ = 0;
};

}  // namespace gpuwire::sim
