// Language modelling: the causal-LM loss that pretrain and finetune share (their batches: data/lm_source.h).
#pragma once
#include <ATen/core/Tensor.h>

namespace mimic::models { class Model; }
namespace mimic::data { struct LmBatch; }

namespace mimic::train {

// Mean next-token cross-entropy of a packed batch (labels of -100 are ignored).
at::Tensor causal_lm_loss(models::Model& model, const data::LmBatch& batch);

}  // namespace mimic::train
