#include "egress_port.hpp"

namespace gpuwire::sim {

double red_mark_probability(std::uint64_t queue_bytes, const SwitchConfig& c) {
  if (queue_bytes <= c.ecn_kmin_bytes) return 0.0;
  if (queue_bytes > c.ecn_kmax_bytes) return 1.0;
  return c.ecn_pmax * double(queue_bytes - c.ecn_kmin_bytes) /
         double(c.ecn_kmax_bytes - c.ecn_kmin_bytes);
}

EgressPort::EgressPort(const SwitchConfig& config, std::uint32_t hosts)
    : config_(config), bytes_from_(hosts, 0), paused_(hosts, false) {}

void EgressPort::enqueue(SimPacket packet, double uniform01, std::vector<std::uint32_t>& pause) {
  if (uniform01 < red_mark_probability(queue_bytes_, config_)) {
    packet.ecn_marked = true;
    ++marked_packets_;
  }
  const bool was_above = queue_bytes_ > config_.pfc_xoff_bytes;
  queue_bytes_ += packet.bytes;
  bytes_from_[packet.src] += packet.bytes;
  packets_.push_back(packet);
  if (queue_bytes_ <= config_.pfc_xoff_bytes) return;
  const auto pause_host = [&](std::uint32_t host) {
    if (paused_[host]) return;
    paused_[host] = true;
    ++paused_count_;
    ++pause_frames_;
    pause.push_back(host);
  };
  if (!was_above) {
    for (std::uint32_t h = 0; h < bytes_from_.size(); ++h) {
      if (bytes_from_[h] > 0) pause_host(h);
    }
  } else {
    pause_host(packet.src);  // a host that started sending into a paused port
  }
}

SimPacket EgressPort::dequeue(std::vector<std::uint32_t>& resume) {
  const SimPacket packet = packets_.front();
  packets_.pop_front();
  queue_bytes_ -= packet.bytes;
  bytes_from_[packet.src] -= packet.bytes;
  if (paused_count_ > 0 && queue_bytes_ < config_.pfc_xon_bytes) {
    for (std::uint32_t h = 0; h < paused_.size(); ++h) {
      if (!paused_[h]) continue;
      paused_[h] = false;
      resume.push_back(h);
    }
    paused_count_ = 0;
  }
  return packet;
}

}  // namespace gpuwire::sim
