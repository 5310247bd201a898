// Group::OverlappedAverage: the gradients' all-reduce overlapped with backward (group.h says how it works). It needs of
// the process group only an asynchronous sum and the failure report (Group::start_sum, Group::collective_failed), and
// shares the bucket packing with the synchronous average (group_detail.h).
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>

#include "mimic/core/error.h"
#include "mimic/distributed/group.h"
#include "mimic/distributed/group_detail.h"

namespace mimic::distributed {

using namespace detail;

struct Group::OverlappedAverage::State {
  Group& group;
  struct Bucket {
    std::vector<size_t> members;  // indices into params
    size_t pending = 0;           // members whose gradient is not final yet in this backward
    bool launched = false;
    std::vector<at::Tensor> grads;  // the gradients packed into `flat`, written back by finish
    at::Tensor flat;
    std::function<void()> wait;  // for the bucket's all-reduce (Group::start_sum); empty: none under way
  };
  std::vector<at::Tensor> params;
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of;
  std::vector<bool> ready;
  // A variable holds its gradient accumulator weakly: without these references a new accumulator, without the
  // hook, would be made for every backward.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  std::vector<uintptr_t> hooks;  // ours among each accumulator's post hooks
  bool armed = false;
  size_t next = 0;          // the next bucket to launch: every rank launches them in this order
  std::string launch_error;  // an all-reduce that could not start (a peer gone), reported by finish

  explicit State(Group& g) : group(g) {}

  void launch(Bucket& b) {
    torch::NoGradGuard no_grad;
    b.grads.clear();
    for (size_t i : b.members)
      if (params[i].grad().defined()) b.grads.push_back(params[i].grad());
    b.launched = true;
    if (b.grads.empty()) return;
    b.flat = pack(b.grads);
    try {
      b.wait = group.start_sum(b.flat);
    } catch (const std::exception& e) {
      if (launch_error.empty()) launch_error = first_line(e.what());
    }
  }

  // Launches the buckets that are complete, in bucket order: a later bucket that completes first waits for the
  // earlier ones, so that every rank issues the same collectives in the same order (Gloo pairs them by order).
  void launch_ready() {
    while (next < buckets.size() && buckets[next].pending == 0) launch(buckets[next++]);
  }

  void on_gradient(size_t i) {
    if (!armed || ready[i]) return;
    ready[i] = true;
    --buckets[bucket_of[i]].pending;
    launch_ready();
  }
};

Group::OverlappedAverage::OverlappedAverage(Group& group, const std::vector<at::Tensor>& params, double bucket_mb)
    : state_(std::make_unique<State>(group)) {
  auto& s = *state_;
  const int64_t cap = bucket_bytes(bucket_mb);
  if (group.size() == 1) return;
  // Backward reaches the last parameters first: buckets are filled from the end, so the first bucket is
  // complete (and on the wire) while the earlier layers' gradients are still being computed.
  s.params.assign(params.rbegin(), params.rend());
  s.bucket_of.resize(s.params.size());
  s.ready.assign(s.params.size(), false);
  int64_t bytes = 0;
  for (size_t i = 0; i < s.params.size(); ++i) {
    const auto& p = s.params[i];
    MIMIC_CHECK(p.is_leaf() && p.requires_grad(), "overlapped gradient averaging: parameter ", i,
                " is not a leaf that requires a gradient");
    if (s.buckets.empty() || bytes + static_cast<int64_t>(p.nbytes()) > cap ||
        s.params[s.buckets.back().members.front()].scalar_type() != p.scalar_type()) {
      s.buckets.emplace_back();
      bytes = 0;
    }
    s.buckets.back().members.push_back(i);
    s.bucket_of[i] = s.buckets.size() - 1;
    bytes += static_cast<int64_t>(p.nbytes());
  }
  for (auto& b : s.buckets) b.pending = b.members.size();
  for (size_t i = 0; i < s.params.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(s.params[i]);
    State* state = &s;
    s.hooks.push_back(acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [state, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          state->on_gradient(i);
          return outputs;
        })));
    s.accumulators.push_back(std::move(acc));
  }
}

Group::OverlappedAverage::~OverlappedAverage() {
  // The accumulators outlive this object when the parameters do: their hooks must not call into freed state.
  for (size_t i = 0; i < state_->accumulators.size(); ++i) state_->accumulators[i]->del_post_hook(state_->hooks[i]);
}

void Group::OverlappedAverage::arm() { state_->armed = state_->group.size() > 1; }

Group::OverlappedAverage::Launched Group::OverlappedAverage::finish(const std::string& what) {
  auto& s = *state_;
  Launched launched;
  if (s.group.size() == 1) return launched;
  torch::NoGradGuard no_grad;
  launched.in_backward = static_cast<int>(s.next);
  launched.buckets = static_cast<int>(s.buckets.size());
  // parameters that got no gradient in this backward never completed their bucket
  while (s.next < s.buckets.size()) s.launch(s.buckets[s.next++]);
  auto reset = [&] {
    for (auto& b : s.buckets) {
      b.pending = b.members.size();
      b.launched = false;
      b.grads.clear();
      b.flat = at::Tensor();
      b.wait = nullptr;
    }
    std::fill(s.ready.begin(), s.ready.end(), false);
    s.next = 0;
    s.armed = false;
  };
  try {
    if (!s.launch_error.empty()) throw std::runtime_error(s.launch_error);
    for (auto& b : s.buckets) {
      if (!b.wait) continue;
      b.wait();
      b.flat.div_(s.group.size());
      unpack(b.flat, b.grads);
    }
  } catch (const std::exception& e) {
    s.launch_error.clear();
    reset();
    s.group.collective_failed(what, e);
  }
  reset();
  return launched;
}

}  // namespace mimic::distributed
