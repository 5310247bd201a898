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

double fixed_slice_mean(const data::TokenCache& cache, int64_t seq_len, int64_t batch_size, int64_t max_batches,
                        const std::function<double(const data::LmBatch&)>& loss) {
  data::PackedBatches slice(cache, seq_len, batch_size, /*seed=*/12345);
  const int64_t n = std::min<int64_t>(max_batches, slice.blocks_per_epoch() / batch_size);
  MIMIC_CHECK(n > 0, "the validation split is too small for one batch of ", batch_size, " x ", seq_len, " tokens");
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += loss(slice.next());
  return sum / static_cast<double>(n);
}

}  // namespace mimic::train
