#include "mimic/finetune/lora.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "mimic/core/error.h"
#include "mimic/models/family.h"

namespace mimic::finetune {

struct LoraModel::Adapter {
  std::string name;                 // the projection's module name, e.g. "h.0.attn.c_attn"
  at::Tensor* weight = nullptr;     // the module's weight member: what its forward multiplies with
  at::Tensor base;                  // the registered weight parameter
  bool conv1d = false;              // GPT-2 Conv1D: weight stored [in, out]
  std::vector<std::string> slots;   // blocks of the output with their own (A, B): {"q", "k", "v"} or {""}
  std::vector<at::Tensor> a, b;     // per slot: A [r, in], B [out / slots, r]

  // scale·B·A in the weight's own layout.
  at::Tensor delta(double scale) const {
    std::vector<at::Tensor> blocks;
    for (size_t i = 0; i < a.size(); ++i) blocks.push_back(torch::matmul(b[i], a[i]));
    auto d = blocks.size() == 1 ? blocks[0] : torch::cat(blocks, 0);  // [out, in]
    return (conv1d ? d.t() : d) * scale;
  }
  std::string key(const char* which, size_t slot) const {
    return name + "." + which + (slots[slot].empty() ? "" : "." + slots[slot]);
  }
};

LoraModel::LoraModel(std::unique_ptr<models::Model> base, const LoraOptions& o, uint64_t seed) : base_(std::move(base)) {
  MIMIC_CHECK(o.rank > 0, "LoRA rank must be positive (got ", o.rank, ")");
  MIMIC_CHECK(o.alpha >= 0, "LoRA alpha must not be negative (got ", o.alpha, ")");
  scale_ = o.scale();
  auto gen = at::detail::createCPUGenerator(seed);
  // The projections to adapt come from the model's family (Family::lora_targets).
  auto& net = base_->module();
  auto targets = base_->summary().family->lora_targets(net);
  // A rank is at most each adapted block's smaller side; the message names the model's largest rank (it named one
  // projection's fused q, k, v block's sides, "c_attn (192 -> 192)", as though the rank were a size: helper-55's probe).
  auto sides = [](const models::LoraTarget& t) {
    const int64_t in = t.transposed ? t.weight->size(0) : t.weight->size(1);
    const int64_t out = (t.transposed ? t.weight->size(1) : t.weight->size(0)) / static_cast<int64_t>(t.slots.size());
    return std::pair<int64_t, int64_t>{in, out};
  };
  for (const auto& t : targets) {
    const auto [in, out] = sides(t);
    if (o.rank <= std::min(in, out)) continue;
    int64_t largest = std::numeric_limits<int64_t>::max();
    for (const auto& u : targets) largest = std::min(largest, std::min(sides(u).first, sides(u).second));
    const std::string blocks = t.slots.size() > 1 ? std::to_string(t.slots.size()) + " blocks, each " : "";
    fail("LoRA rank ", o.rank, " is larger than ", t.name, " (", blocks, in, " -> ", out, "): this model takes ranks up to ", largest);
  }
  for (auto& target : targets) {
    const auto [in, out] = sides(target);  // before the slots move into the adapter
    const std::string& name = target.name;
    at::Tensor* weight = target.weight;
    const bool conv1d = target.transposed;
    auto ad = std::make_unique<Adapter>();
    ad->name = name;
    ad->weight = weight;
    ad->base = *weight;
    ad->conv1d = conv1d;
    ad->slots = std::move(target.slots);
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));  // Kaiming-uniform with a = sqrt(5)
    for (size_t i = 0; i < ad->slots.size(); ++i) {
      // drawn on the CPU generator whatever the device, so that a seed gives the same start everywhere
      ad->a.push_back(at::empty({o.rank, in}).uniform_(-bound, bound, gen).to(weight->device()).set_requires_grad(true));
      ad->b.push_back(torch::zeros({out, o.rank}, torch::dtype(torch::kFloat).device(weight->device())).set_requires_grad(true));
    }
    adapters_.push_back(std::move(ad));
  }
  // The adapted projections' weights and biases stay as loaded.
  for (auto& p : net.named_parameters())
    if (adapts(p.key())) p.value().set_requires_grad(false);
}

LoraModel::~LoraModel() {
  // Give the projections their parameters back (the base model may outlive this wrapper via release_merged).
  for (auto& ad : adapters_) *ad->weight = ad->base;
}

std::vector<std::pair<std::string, at::Tensor>> LoraModel::lora_parameters() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& ad : adapters_)
    for (size_t i = 0; i < ad->slots.size(); ++i) {
      out.emplace_back(ad->key("lora_A", i), ad->a[i]);
      out.emplace_back(ad->key("lora_B", i), ad->b[i]);
    }
  return out;
}

bool LoraModel::adapts(const std::string& name) const {
  for (const auto& ad : adapters_)
    if (name == ad->name + ".weight" || name == ad->name + ".bias") return true;
  return false;
}

void LoraModel::apply() {
  for (auto& ad : adapters_) *ad->weight = ad->base + ad->delta(scale_);
}

models::ForwardOutputs LoraModel::forward(const models::ForwardInputs& in) {
  apply();
  return base_->forward(in);
}

at::Tensor LoraModel::forward_cached(const at::Tensor&, models::DecodeState&) {
  fail("incremental decoding of a model with LoRA adapters: merge them first (finetune's exported models are merged)");
}

void LoraModel::with_merged(const std::function<void()>& fn) const {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> saved;
  for (const auto& ad : adapters_) {
    saved.push_back(ad->base.clone());
    ad->base.add_(ad->delta(scale_));
  }
  auto restore = [&] {
    for (size_t i = 0; i < adapters_.size(); ++i) adapters_[i]->base.copy_(saved[i]);
  };
  try {
    fn();
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

std::vector<std::pair<std::string, at::Tensor>> LoraModel::state_dict() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  with_merged([&] {
    for (auto& [name, t] : base_->state_dict()) out.emplace_back(name, t.clone());
  });
  return out;
}

void LoraModel::save(const std::string& dir, const models::SaveOptions& options) const {
  with_merged([&] { base_->save(dir, options); });
}

void LoraModel::merge() {
  torch::NoGradGuard no_grad;
  for (auto& ad : adapters_) {
    ad->base.add_(ad->delta(scale_));
    *ad->weight = ad->base;
  }
  adapters_.clear();
}

std::unique_ptr<models::Model> LoraModel::release_merged() {
  merge();
  return std::move(base_);
}

}  // namespace mimic::finetune
