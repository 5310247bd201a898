#include "train/lm.h"

#include <torch/torch.h>

#include "core/error.h"
#include "data/batches.h"
#include "models/model.h"

namespace mimic::train {

at::Tensor causal_lm_loss(models::Model& model, const data::LmBatch& b) {
  auto logits = model.forward({b.input_ids, b.attention_mask, {}, {}}).logits;
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), b.labels.reshape({-1}),
                                              torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
}

}  // namespace mimic::train
