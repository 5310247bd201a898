#include "mimic/train/lm.h"

#include <torch/torch.h>

#include "mimic/core/error.h"
#include "mimic/data/batches.h"
#include "mimic/models/model.h"

namespace mimic::train {

at::Tensor causal_lm_loss(models::Model& model, const data::LmBatch& b) {
  auto logits = model.forward({b.input_ids, b.attention_mask, {}, {}}).logits;
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), b.labels.reshape({-1}),
                                              torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
}

}  // namespace mimic::train
