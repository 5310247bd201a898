#include "models/networks.h"

#include <torch/torch.h>

#include <cmath>

#include "core/error.h"

namespace mimic::models {

Conv1DImpl::Conv1DImpl(int64_t in, int64_t out) {
  weight = register_parameter("weight", torch::empty({in, out}));
  bias = register_parameter("bias", torch::zeros({out}));
  torch::nn::init::normal_(weight, 0.0, 0.02);
}

at::Tensor Conv1DImpl::forward(const at::Tensor& x) {
  auto shape = x.sizes().vec();
  shape.back() = weight.size(1);
  return torch::addmm(bias, x.reshape({-1, x.size(-1)}), weight).view(shape);
}

at::Tensor activate(const at::Tensor& x, Activation a) {
  switch (a) {
    case Activation::GeluTanh: {
      // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), as GPT-2's gelu_new
      const double k = std::sqrt(2.0 / M_PI);
      return 0.5 * x * (1.0 + torch::tanh(k * (x + 0.044715 * torch::pow(x, 3.0))));
    }
    case Activation::GeluExact: return torch::gelu(x);
    case Activation::Relu: return torch::relu(x);
  }
  return x;
}

// ------------------------------------------------------------------------------------------ shared
namespace {
void check_ids(const at::Tensor& ids, int64_t vocab) {
  MIMIC_CHECK(ids.dim() == 2, "input_ids must be [batch, time]");
  if (ids.numel() == 0) return;
  int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
  MIMIC_CHECK(lo >= 0 && hi < vocab, "token id ", lo < 0 ? lo : hi, " is outside the model's vocabulary of ", vocab,
              " (does the tokenizer belong to this model?)");
}
}  // namespace

void NetworkImpl::init_layers(int64_t n) {
  kernel_modules_ = register_module("kernels", torch::nn::ModuleList());
  for (int64_t i = 0; i < n; ++i) {
    auto k = std::make_shared<attention::SoftmaxAttention>();
    kernels_.push_back(k);
    kernel_modules_->push_back(k);
  }
  captures_.assign(static_cast<size_t>(n), nullptr);
}

void NetworkImpl::set_kernel(int64_t layer, attention::AttentionKernel kernel) {
  MIMIC_CHECK(layer >= 0 && layer < static_cast<int64_t>(kernels_.size()), "layer ", layer, " out of range");
  kernels_[layer] = kernel;
  // Replace the registered child so that the kernel's parameters appear as "kernels.<layer>.*".
  kernel_modules_ = replace_module("kernels", [&] {
    torch::nn::ModuleList list;
    for (auto& k : kernels_) list->push_back(k);
    return list;
  }());
}

attention::AttentionKernel NetworkImpl::kernel(int64_t layer) const { return kernels_.at(static_cast<size_t>(layer)); }

void NetworkImpl::set_capture(int64_t layer, attention::AttentionCapture* capture) {
  MIMIC_CHECK(layer >= 0 && layer < static_cast<int64_t>(captures_.size()), "layer ", layer, " out of range");
  captures_[layer] = capture;
}

at::Tensor NetworkImpl::forward_cached(const at::Tensor& ids, DecodeState& state) {
  MIMIC_CHECK(!decoding_, "forward_cached is not reentrant");
  struct Reset {
    DecodeState*& p;
    ~Reset() { p = nullptr; }
  } reset{decoding_};
  decoding_ = &state;
  ForwardInputs in;
  in.input_ids = ids;
  return forward(in).logits;
}

at::Tensor NetworkImpl::attend(int64_t layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                               const at::Tensor& key_padding_mask, double scale) {
  const auto& c = config();
  const int64_t b = q.size(0), t = q.size(1), h = c.n_head, dh = c.head_dim();
  auto split = [&](const at::Tensor& x) { return x.view({b, t, h, dh}).transpose(1, 2); };  // [B, H, T, dh]
  auto qh = split(q), kh = split(k), vh = split(v);
  attention::AttentionContext ctx;
  ctx.causal = causal;
  ctx.key_padding_mask = key_padding_mask;
  ctx.scale = scale;
  ctx.layer = layer;
  ctx.capture = captures_[layer];
  auto o = decoding_ ? kernels_[layer]->forward_cached(qh, kh, vh, ctx, *decoding_->layers.at(static_cast<size_t>(layer)))
                    : kernels_[layer]->forward(qh, kh, vh, ctx);
  if (auto* cap = captures_[layer]) {
    cap->q = qh.detach();
    cap->k = kh.detach();
    cap->v = vh.detach();
    cap->o = o.detach();
    cap->q_full = q.detach();
    cap->k_full = k.detach();
    cap->scale = scale;
    cap->causal = causal;
  }
  return o.transpose(1, 2).reshape({b, t, h * dh});
}

// ------------------------------------------------------------------------------------------ GPT-2
Gpt2Impl::Gpt2Impl(const ModelConfig& c) : c_(c) {
  wte = register_module("wte", torch::nn::Embedding(c.vocab_size, c.d_model));
  wpe = register_module("wpe", torch::nn::Embedding(c.max_positions, c.d_model));
  torch::nn::init::normal_(wte->weight, 0.0, 0.02);
  torch::nn::init::normal_(wpe->weight, 0.0, 0.01);
  auto h = register_module("h", torch::nn::ModuleList());
  auto ln = [&](int64_t d) { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(c.ln_eps)); };
  for (int64_t i = 0; i < c.n_layer; ++i) {
    auto block = std::make_shared<torch::nn::Module>();
    auto attn = std::make_shared<torch::nn::Module>();
    auto mlp = std::make_shared<torch::nn::Module>();
    Layer l;
    l.ln_1 = block->register_module("ln_1", ln(c.d_model));
    l.c_attn = attn->register_module("c_attn", Conv1D(c.d_model, 3 * c.d_model));
    l.attn_proj = attn->register_module("c_proj", Conv1D(c.d_model, c.d_model));
    l.ln_2 = block->register_module("ln_2", ln(c.d_model));
    l.c_fc = mlp->register_module("c_fc", Conv1D(c.d_model, c.d_ff));
    l.mlp_proj = mlp->register_module("c_proj", Conv1D(c.d_ff, c.d_model));
    // GPT-2's scaled init of the residual projections
    torch::NoGradGuard ng;
    l.attn_proj->weight.normal_(0.0, 0.02 / std::sqrt(2.0 * c.n_layer));
    l.mlp_proj->weight.normal_(0.0, 0.02 / std::sqrt(2.0 * c.n_layer));
    block->register_module("attn", attn);
    block->register_module("mlp", mlp);
    h->push_back(block);
    layers.push_back(l);
  }
  ln_f = register_module("ln_f", ln(c.d_model));
  init_layers(c.n_layer);
}

ForwardOutputs Gpt2Impl::forward(const ForwardInputs& in) {
  const auto& ids = in.input_ids;
  check_ids(ids, c_.vocab_size);
  const int64_t b = ids.size(0), t = ids.size(1);
  // Positions 0..T-1 as HF's forward does by default (offset by what incremental decoding has seen);
  // padding (right-padded batches) is masked out of the keys by the attention mask.
  const int64_t offset = decoding_ ? decoding_->position() : 0;
  MIMIC_CHECK(offset + t <= c_.max_positions, "sequence of ", offset + t, " tokens exceeds the model's context of ", c_.max_positions);
  auto positions = torch::arange(offset, offset + t, torch::kLong).unsqueeze(0).expand({b, t});
  at::Tensor pad = in.attention_mask.defined() ? in.attention_mask.to(torch::kBool) : at::Tensor();
  const double p = is_training() ? c_.dropout : 0.0;
  auto x = torch::dropout(wte->forward(ids) + wpe->forward(positions), p, is_training());
  for (int64_t i = 0; i < c_.n_layer; ++i) {
    auto& l = layers[static_cast<size_t>(i)];
    auto qkv = l.c_attn->forward(l.ln_1->forward(x)).split(c_.d_model, -1);
    double scale = c_.scale_attn_weights ? 1.0 / std::sqrt(static_cast<double>(c_.head_dim())) : 1.0;
    if (c_.scale_attn_by_layer_idx) scale /= static_cast<double>(i + 1);
    x = x + torch::dropout(l.attn_proj->forward(attend(i, qkv[0], qkv[1], qkv[2], /*causal=*/true, pad, scale)), p, is_training());
    x = x + torch::dropout(l.mlp_proj->forward(activate(l.c_fc->forward(l.ln_2->forward(x)), c_.activation)), p, is_training());
  }
  ForwardOutputs out;
  out.last_hidden_state = ln_f->forward(x);
  auto h = in.logits_positions.defined() ? out.last_hidden_state.index({in.logits_positions}) : out.last_hidden_state;
  out.logits = torch::matmul(h, wte->weight.t());
  return out;
}

// ------------------------------------------------------------------------------------------ BERT
BertImpl::BertImpl(const ModelConfig& c, Head head, bool with_pooler) : c_(c), head_(head) {
  auto ln = [&](int64_t d) { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(c.ln_eps)); };
  auto linear = [&](int64_t i, int64_t o) {
    torch::nn::Linear l(i, o);
    torch::NoGradGuard ng;
    l->weight.normal_(0.0, 0.02);
    l->bias.zero_();
    return l;
  };
  auto emb = std::make_shared<torch::nn::Module>();
  word = emb->register_module("word_embeddings", torch::nn::Embedding(c.vocab_size, c.d_model));
  position = emb->register_module("position_embeddings", torch::nn::Embedding(c.max_positions, c.d_model));
  token_type = emb->register_module("token_type_embeddings", torch::nn::Embedding(c.type_vocab_size, c.d_model));
  emb_ln = emb->register_module("LayerNorm", ln(c.d_model));
  for (auto* e : {&word, &position, &token_type}) torch::nn::init::normal_((*e)->weight, 0.0, 0.02);
  register_module("embeddings", emb);
  auto encoder = std::make_shared<torch::nn::Module>();
  auto list = encoder->register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    auto layer = std::make_shared<torch::nn::Module>();
    auto attention = std::make_shared<torch::nn::Module>();
    auto self = std::make_shared<torch::nn::Module>();
    auto attn_output = std::make_shared<torch::nn::Module>();
    auto intermediate = std::make_shared<torch::nn::Module>();
    auto output = std::make_shared<torch::nn::Module>();
    Layer l;
    l.query = self->register_module("query", linear(c.d_model, c.d_model));
    l.key = self->register_module("key", linear(c.d_model, c.d_model));
    l.value = self->register_module("value", linear(c.d_model, c.d_model));
    l.attn_out = attn_output->register_module("dense", linear(c.d_model, c.d_model));
    l.attn_ln = attn_output->register_module("LayerNorm", ln(c.d_model));
    l.intermediate = intermediate->register_module("dense", linear(c.d_model, c.d_ff));
    l.out = output->register_module("dense", linear(c.d_ff, c.d_model));
    l.out_ln = output->register_module("LayerNorm", ln(c.d_model));
    attention->register_module("self", self);
    attention->register_module("output", attn_output);
    layer->register_module("attention", attention);
    layer->register_module("intermediate", intermediate);
    layer->register_module("output", output);
    list->push_back(layer);
    layers.push_back(l);
  }
  register_module("encoder", encoder);
  if (with_pooler || head == Head::Cls || head == Head::Pretraining) {
    auto p = std::make_shared<torch::nn::Module>();
    pooler = p->register_module("dense", linear(c.d_model, c.d_model));
    register_module("pooler", p);
  }
  if (head == Head::Mlm || head == Head::Pretraining) {
    auto cls = std::make_shared<torch::nn::Module>();
    auto predictions = std::make_shared<torch::nn::Module>();
    auto transform = std::make_shared<torch::nn::Module>();
    mlm_dense = transform->register_module("dense", linear(c.d_model, c.d_model));
    mlm_ln = transform->register_module("LayerNorm", ln(c.d_model));
    predictions->register_module("transform", transform);
    mlm_bias = predictions->register_parameter("bias", torch::zeros({c.vocab_size}));
    cls->register_module("predictions", predictions);
    if (head == Head::Pretraining) {
      nsp = cls->register_module("seq_relationship", linear(c.d_model, 2));
    }
    register_module("cls", cls);
  }
  if (head == Head::Cls) classifier = register_module("classifier", linear(c.d_model, c.num_labels));
  init_layers(c.n_layer);
}

ForwardOutputs BertImpl::forward(const ForwardInputs& in) {
  const auto& ids = in.input_ids;
  check_ids(ids, c_.vocab_size);
  const int64_t b = ids.size(0), t = ids.size(1);
  MIMIC_CHECK(t <= c_.max_positions, "sequence of ", t, " tokens exceeds the model's context of ", c_.max_positions);
  auto types = in.token_type_ids.defined() ? in.token_type_ids : torch::zeros({b, t}, torch::kLong);
  auto pos = torch::arange(t, torch::kLong).unsqueeze(0).expand({b, t});
  const double p = is_training() ? c_.dropout : 0.0;
  auto x = torch::dropout(emb_ln->forward(word->forward(ids) + position->forward(pos) + token_type->forward(types)), p, is_training());
  at::Tensor pad = in.attention_mask.defined() ? in.attention_mask.to(torch::kBool) : at::Tensor();
  const double scale = 1.0 / std::sqrt(static_cast<double>(c_.head_dim()));
  for (int64_t i = 0; i < c_.n_layer; ++i) {
    auto& l = layers[static_cast<size_t>(i)];
    auto a = attend(i, l.query->forward(x), l.key->forward(x), l.value->forward(x), /*causal=*/false, pad, scale);
    x = l.attn_ln->forward(x + torch::dropout(l.attn_out->forward(a), p, is_training()));
    x = l.out_ln->forward(x + torch::dropout(l.out->forward(activate(l.intermediate->forward(x), c_.activation)), p, is_training()));
  }
  ForwardOutputs out;
  out.last_hidden_state = x;
  if (!pooler.is_empty()) out.pooled = torch::tanh(pooler->forward(x.select(1, 0)));
  if (head_ == Head::Mlm || head_ == Head::Pretraining) {
    auto h = in.logits_positions.defined() ? x.index({in.logits_positions}) : x;
    auto hdn = mlm_ln->forward(activate(mlm_dense->forward(h), c_.activation));
    out.logits = torch::matmul(hdn, word->weight.t()) + mlm_bias;
  } else if (head_ == Head::Cls) {
    out.logits = classifier->forward(out.pooled);
  }
  return out;
}

}  // namespace mimic::models
