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
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mimic/distributed/environment.h"

namespace at { class Tensor; }

namespace mimic::distributed {

// The default largest gradient bucket (one all-reduce each; PyTorch's DDP takes 25 MB): few messages per step,
// without doubling the memory of a large model's gradients in one copy, and several buckets for a large model,
// so that the first ones travel while backward still computes the rest.
inline constexpr double kDefaultBucketMb = 16;

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
  void average(const std::vector<at::Tensor>& tensors, const std::string& what, double bucket_mb = kDefaultBucketMb);
  double average(double value, const std::string& what);
  // Copies rank `root`'s values into every rank's tensors, in place (same packing as average).
  void broadcast(const std::vector<at::Tensor>& tensors, const std::string& what, int root = 0);
  // Rank `root`'s string on every rank.
  std::string broadcast(const std::string& value, const std::string& what, int root = 0);
  void barrier(const std::string& what);
  // Runs `lead_work` on rank 0 alone (it reads the files only rank 0 may have: checkpoints) and returns its
  // string on every rank. A mimic::Error of `lead_work` is rethrown on rank 0 and ends the others with "rank 0
  // could not start: <its message>", so that no rank waits for a peer that is gone.
  std::string from_lead(const std::string& what, const std::function<std::string()>& lead_work);

  // Runs `work` on this rank alone, then waits until every rank's `work` has ended. No collective runs meanwhile,
  // so the ranks may take different times, far longer than MIMIC_DIST_TIMEOUT (distill trains different layers on
  // each). Instead of a collective's timeout, a working rank beats through the store every second: a peer silent
  // for MIMIC_DIST_TIMEOUT, or whose `work` threw, ends the waiting ranks with an error naming it. An error of this
  // rank's `work` is told to the others, then rethrown here.
  void each_alone(const std::string& what, const std::function<void()>& work);

  // Averages gradients while backward still runs: a post hook on each parameter's gradient accumulator marks it
  // ready, and a bucket (packed as `average` packs, in reverse parameter order: backward produces the last layers'
  // gradients first) starts its asynchronous all-reduce as soon as all its parameters are ready, in bucket order
  // on every rank. `finish` waits for them and writes the means back. The synchronous `average` is the reference
  // it is tested against.
  class OverlappedAverage {
   public:
    OverlappedAverage(Group& group, const std::vector<at::Tensor>& params, double bucket_mb = kDefaultBucketMb);
    ~OverlappedAverage();
    OverlappedAverage(const OverlappedAverage&) = delete;
    OverlappedAverage& operator=(const OverlappedAverage&) = delete;
    // The next backward is the step's last micro-batch: its hooks launch the all-reduces. Earlier micro-batches
    // only accumulate (an all-reduce of a partial sum would be wasted).
    void arm();
    // Launches the buckets no hook completed (parameters without a gradient this step, left out as `average`
    // leaves them out), waits for all, divides by the ranks and copies the means into the gradients; disarms.
    // Returns how many buckets backward's hooks launched (the overlapped ones) and how many there were.
    struct Launched {
      int in_backward = 0, buckets = 0;
    };
    Launched finish(const std::string& what);

   private:
    struct State;
    std::unique_ptr<State> state_;
  };

 private:
  // What OverlappedAverage needs of the process group (overlapped_average.cpp): starts summing `flat` over the ranks
  // in place and returns what waits for the sum; and ends a failed collective naming the ranks that stopped answering.
  std::function<void()> start_sum(const at::Tensor& flat);
  [[noreturn]] void collective_failed(const std::string& what, const std::exception& e);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, size_ = 1;
};

// A group of this process alone, whatever the environment says: work that one rank does by itself in a
// distributed run (distill's layers) trains through it.
Group& single();

// The process's group, joined on first use from environment() (training calls it; a single process gets the
// group of one). Throws what the rendezvous throws; a later call tries again.
Group& world();

// Whether this build can form a group of several processes: false where the LibTorch it was built against ships no
// gloo headers (a pip torch); world() of more than one rank then refuses to start, saying so.
bool multi_process_supported();
// Fails with the one-line reason when !multi_process_supported(): world() of several ranks, and `mimic launch` of
// several ranks of mimic before it starts any (so that no rank fails first on something else, such as a GPU it lacks).
void require_multi_process();

}  // namespace mimic::distributed
