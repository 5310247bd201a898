// Language modelling on packed token blocks: the causal-LM loss and the fixed validation slice that
// pretrain and finetune share.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

namespace mimic::models { class Model; }
namespace mimic::data {
class TokenCache;
struct LmBatch;
}  // namespace mimic::data

namespace mimic::train {

// Mean next-token cross-entropy of a packed batch (labels of -100 are ignored).
at::Tensor causal_lm_loss(models::Model& model, const data::LmBatch& batch);

// Mean of `loss` over a fixed slice of `cache`: the first n batches of blocks of seq_len tokens, batch_size
// at a time, in the order of a fixed shuffle (seed 12345) — the same blocks at every call.
// n = min(max_batches, blocks / batch_size); a cache too small for one batch is an error.
double fixed_slice_mean(const data::TokenCache& cache, int64_t seq_len, int64_t batch_size, int64_t max_batches,
                        const std::function<double(const data::LmBatch&)>& loss);

}  // namespace mimic::train
