// Language modelling: the causal-LM loss that pretrain and finetune share (their batches: data/lm_source.h).
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

}  // namespace mimic::train
