// The arithmetic a training or evaluation step runs in: fp32 (every tensor float, the default) or bf16 mixed
// precision — LibTorch's autocast on the model's device, which runs the matrix products (linear layers, attention's
// q·kᵀ and state products, einsum's bmm) in bfloat16 and keeps the operations autocast lists as precision-sensitive
// in float — on CUDA exponentials, logarithms, softmax, cumulative sums, norms; LibTorch's CPU autocast lists far fewer
// (it leaves a log-softmax, an exp or a sum of bf16 tensors in bf16). What stays fp32 whatever the autocast lists
// say: the parameters and AdamW's moments (the optimizer never sees bf16; autocast casts a weight for each use and
// its gradient comes back as float), the LM-head loss (train::lm_head_loss turns autocast off inside: its logits and
// their softmax are float), every other loss or score summed over the vocabulary or over tokens (its logits widened
// first: float_or_wider), linear attention's decay, its decayed carry between chunks and its decoding state
// (linear_attention.cpp), the sparse cache's state carried from selection to selection (sparse_cache.cpp), the
// performer map's log-features and hedgehog_softmax's log-softmax (maps/), the hybrid's combination of its parts
// (hybrid_attention.cpp), and the metrics distill and report compute outside the steps. The validation passes of
// training, and eval's and generate's whole forward passes, LM head included, run under autocast. bf16 needs no
// loss scaling: it has float's exponent range.
#pragma once
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>

namespace at {
class Tensor;
}

namespace mimic {

enum class Precision { Fp32, Bf16 };

// "fp32" / "bf16" → Precision; anything else is a mimic::Error naming the choices.
Precision parse_precision(const std::string& name);
const char* precision_name(Precision p);
// A mimic::Error unless `device` can run p: bf16 (autocast) runs on a CUDA device or the CPU, not on the checked CPU.
// The commands check it before any work; AutocastGuard again.
void check_precision_on(Precision p, const c10::Device& device);

// Autocast to bf16 on `device`'s type for the guard's lifetime when p is Bf16 (nothing for Fp32); restores the
// previous state on destruction and, leaving the outermost guard, clears autocast's cache of cast weights — a cast
// kept past the step would feed the next forward the weights before the optimizer's update. A CUDA or CPU device
// (LibTorch's CPU autocast serves the tests of a machine without a GPU); any other is a mimic::Error.
class AutocastGuard {
 public:
  AutocastGuard(Precision p, const c10::Device& device);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType type_ = c10::DeviceType::CPU;
  bool was_enabled_ = false;
  int dtype_before_ = 0;  // the ScalarType autocast used before, as an int (no ATen header here)
};

// `t` in float when it is a 16-bit floating type (a bf16 forward's logits), else `t` itself (float, double: the same
// tensor, so fp32 results stay bit for bit). For what is summed or normalised over many terms — a log-softmax over the
// vocabulary, a loss, an NLL total — whose last bit in bf16 is coarse (1 at 128–256, 16 at 2,048–4,096), and which
// CPU autocast, unlike CUDA's, leaves in bf16.
at::Tensor float_or_wider(const at::Tensor& t);
// The type float_or_wider gives a tensor of type t: what a running sum, a state or a decay's powers are kept in.
c10::ScalarType float_or_wider(c10::ScalarType t);

// Autocast off on every device for its lifetime (restored after): for operations that must run in float inside a
// bf16 step — the LM-head loss — whatever autocast would do with their matrix products.
class AutocastOff {
 public:
  AutocastOff();
  ~AutocastOff();
  AutocastOff(const AutocastOff&) = delete;
  AutocastOff& operator=(const AutocastOff&) = delete;

 private:
  bool cpu_ = false;
  bool cuda_ = false;
};

}  // namespace mimic
