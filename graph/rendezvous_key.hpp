#pragma once
/// The name a tensor crossing devices goes by within a step (TensorFlow's
/// Rendezvous::CreateKey / ParseKey): made once, by the partitioner, with every field it needs,
/// and parsed in one place.
///   auto key = make_rendezvous_key(send_device, recv_device, "w/read:0", send_incarnation);
///   auto parsed = rendezvous_key::parse(text);    // what a receiver gets back
/// Text form: "<send device>;<send incarnation, 16 hex digits>;<recv device>;<tensor>", and for
/// a tensor crossing inside a while loop ";@<frame>:<iteration>" after it (the executor adds
/// that part at run time: with_frame_iteration). The
/// incarnation is a number a task draws when it starts: a key made for a task's earlier life
/// never equals one made for its current life, so a restarted task's stale tensors cannot be
/// taken for live ones.

#include "graph/status.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace actorflow {

struct rendezvous_key {
  /// Full device names.
  std::string send_device;
  /// The sending task's incarnation; 0 when unknown (in-process clusters, local sessions).
  std::uint64_t send_incarnation = 0;
  std::string recv_device;
  /// "node:output", or "^node" for a control edge.
  std::string tensor;
  /// Inside a while loop: which frame and iteration ("outer.0/inner.3:2"); empty outside.
  std::string frame_iteration;

  std::string to_string() const;

  /// Checks and splits the text form; errors (invalid_argument) quote the text.
  static result<rendezvous_key> parse(std::string_view text);

  friend bool operator==(const rendezvous_key& a, const rendezvous_key& b) {
    return a.send_device == b.send_device && a.send_incarnation == b.send_incarnation &&
           a.recv_device == b.recv_device && a.tensor == b.tensor &&
           a.frame_iteration == b.frame_iteration;
  }
};

/// `key` (a key's text without a frame part) for one iteration of one frame.
std::string with_frame_iteration(const std::string& key, const std::string& frame_iteration);
/// The key's text without its frame part: what the partitioner made.
std::string_view without_frame_iteration(std::string_view text);

/// An incarnation as the key writes it: 16 lower-case hex digits.
std::string incarnation_to_string(std::uint64_t incarnation);

/// A fresh incarnation for a process or task starting (TensorFlow's): random, never 0 (which
/// means unknown).
std::uint64_t new_incarnation();

rendezvous_key make_rendezvous_key(std::string send_device, std::string recv_device,
                                   std::string tensor, std::uint64_t send_incarnation = 0);

} // namespace actorflow
