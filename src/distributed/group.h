// The process group of a data-parallel run: a c10d TCPStore rendezvous (rank 0 hosts the store) and LibTorch's
// ProcessGroupGloo for the collectives, behind an interface without torch or c10d headers. A single process
// gets a group of one whose operations do nothing, so the training engine calls them unconditionally.
//
// Failure behaviour: every wait is bounded by Environment::timeout_seconds. A peer that never arrives ends the
// rendezvous with an error naming the missing ranks; a peer that dies during a collective (Gloo sees the closed
// connection, or the timeout passes) ends the survivors with an error naming it, found through the store (the
// survivors check in, whoever does not is named; a store that no longer answers means rank 0 is gone).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mimic/distributed/environment.h"

namespace at { class Tensor; }

namespace mimic::distributed {

class Group {
 public:
  // Joins the group `env` describes (a group of one when !env.distributed(): no store, no sockets).
  explicit Group(const Environment& env);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool lead() const { return rank_ == 0; }  // the rank that writes checkpoints, logs, exports, progress

  // Replaces each tensor by its mean over the ranks. Tensors are packed into flat buckets per dtype (few large
  // messages instead of one per tensor) and written back in place; every rank must pass the same shapes in the
  // same order. `what` names the operation in an error.
  void average(const std::vector<at::Tensor>& tensors, const std::string& what);
  double average(double value, const std::string& what);
  // Copies rank 0's values into every rank's tensors, in place (same packing as average).
  void broadcast(const std::vector<at::Tensor>& tensors, const std::string& what);
  // Rank 0's string on every rank.
  std::string broadcast(const std::string& value, const std::string& what);
  void barrier(const std::string& what);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, size_ = 1;
};

// The process's group, joined on first use from environment() (training calls it; a single process gets the
// group of one). Throws what the rendezvous throws; a later call tries again.
Group& world();

}  // namespace mimic::distributed
