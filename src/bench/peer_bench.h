// `mimic bench peer`: mimic's side of the comparison with the same steps written in PyTorch
// (bench/peer/peer.py, run by bench/peer/run.sh; docs/peer.md).
//
// Two steps, timed as one update each (forward, loss, backward, AdamW, zero_grad), median of repeats after a
// warm-up step:
//   distill  the Hedgehog distillation step of one layer of gpt2-mini's shapes (8 heads, head_dim 24): the
//            linear kernel with the hedgehog map (feature_dim 2·24, mimic's default) scores the teacher's q, k,
//            v in its quadratic form, the CE loss against softmax's weights (distill_loss), AdamW at distill's
//            default rate 1e-2;
//   train    the converted-model training step: a GPT-2 at gpt2-mini's widths with hedgehog linear attention
//            (chunked form) in every layer, the next-token loss, AdamW at 1e-3 (bench train's step).
//
// Why a subcommand of its own and not a mode of `bench train` or of `distill`: the two sides must start from
// the same numbers, so this command writes everything a step reads (teacher q, k, v, the map's weights, the
// model's weights, token ids and labels) to one safetensors file, with the shapes and hyper-parameters in its
// metadata, and then times its steps on exactly those tensors; the PyTorch side reads the file (no pickles).
// distill reads record files and trains for epochs, bench train times a grid of lengths and kinds: neither
// has a place for a shared-input file, and both would time more than one step.
//
// Both sides report the loss of every step (the warm-up first): equal losses on the first step show the same
// forward pass, on the second the same backward pass and AdamW update; run.sh fails when they differ.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mimic::analysis { struct TeacherBatch; }
namespace mimic::attention { class DistillableKernel; }

namespace mimic::bench {

// The distillation loss of a student on a teacher batch. The bench takes it as an argument because the
// distill room, where distill_loss lives, is not one of the core rooms a benchmark may include
// (CMakeLists.txt); the CLI passes distill::distill_loss with the CE loss.
using DistillLossFn = std::function<at::Tensor(attention::DistillableKernel& student, const analysis::TeacherBatch& batch)>;

struct PeerBenchOptions {
  std::string inputs;  // the safetensors file this run writes (complete or not at all) and the PyTorch side reads
  int64_t distill_batch = 8, distill_length = 256;  // distill's default batch; sequences of 256 tokens
  int64_t train_batch = 4, train_length = 256;
  int repeats = 5;  // timed steps (median) after one warm-up step
  uint64_t seed = 0;
  DistillLossFn distill_loss;
};

struct PeerStep {
  std::string name;  // "distill" | "train"
  double step_ms = 0, peak_mb = 0;
  std::vector<double> losses;  // the warm-up step's, then each timed step's
};

struct PeerBenchResult {
  PeerBenchOptions options;
  int threads = 0;
  nlohmann::json config;       // what the inputs file's metadata holds (shapes, hyper-parameters)
  std::vector<PeerStep> steps;  // distill, train
};

PeerBenchResult run_peer_bench(const PeerBenchOptions& options);
nlohmann::json to_json(const PeerBenchResult& result);
std::string format_report(const PeerBenchResult& result);

}  // namespace mimic::bench
