#include "mimic/bench/attention_bench.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <sstream>

#include "mimic/attention/attention.h"
#include "mimic/attention/feature_map.h"
#include "mimic/attention/hybrid_attention.h"
#include "mimic/attention/hybrid_kernel.h"
#include "mimic/attention/kinds.h"
#include "mimic/attention/linear_attention.h"
#include "mimic/attention/sparse_cache.h"
#include "mimic/bench/measure.h"
#include "mimic/bench/text.h"
#include "mimic/core/error.h"
#include "mimic/core/progress.h"
#include "mimic/core/runtime.h"
#include "mimic/core/words.h"

namespace mimic::bench {

namespace {

using attention::AttentionContext;
using attention::FeatureMap;
using attention::Features;
using attention::HybridOptions;
using attention::HybridState;
using attention::LinearOptions;
using attention::LinearState;
using attention::Role;
using Clock = std::chrono::steady_clock;

constexpr double kMB = 1e6;

// Every tensor of the benchmark lives on the bench device (measure.h); random inputs are drawn on the CPU generator and
// moved, so that a seed times the same values on every device.
at::TensorOptions on_device() { return at::TensorOptions().device(bench_device()); }
torch::Tensor drawn(at::IntArrayRef shape) { return torch::randn(shape).to(bench_device()); }


// ---------------------------------------------------------------- the attention forms

struct Inputs {
  torch::Tensor q, k, v;  // [1, H, T, d], no grad
  torch::Tensor qg, kg, vg;  // the same values as leaves requiring grad
};

Inputs make_inputs(int64_t h, int64_t t, int64_t d) {
  Inputs in;
  in.q = drawn({1, h, t, d});
  in.k = drawn({1, h, t, d});
  in.v = drawn({1, h, t, d});
  in.qg = in.q.clone().requires_grad_(true);
  in.kg = in.k.clone().requires_grad_(true);
  in.vg = in.v.clone().requires_grad_(true);
  return in;
}

void clear_grads(std::vector<torch::Tensor> tensors) {
  for (auto& t : tensors)
    if (t.grad().defined()) t.mutable_grad() = torch::Tensor();
}

// The features the linear and hybrid forms consume, as their kernels compute them: the map on q·√scale and
// k·√scale (so that φ(q)·φ(k) sees q·k·scale). offset: the absolute position of the first token.
Features map_features(attention::FeatureMapImpl& map, const torch::Tensor& q, const torch::Tensor& k, double scale, int64_t offset) {
  const double s = std::sqrt(scale);
  map.begin_pass();
  return {map.forward(q * s, Role::Query, offset), map.forward(k * s, Role::Key, offset), map.log_space()};
}

// Everything the forms share, built once per run from the options.
struct Setup {
  int64_t h = 1, d = 0;  // heads, head_dim
  double scale = 0;
  FeatureMap map;
  attention::AttentionKernel softmax;
  AttentionContext ctx;          // causal, scale: the softmax kernel's call
  LinearOptions lopts;           // causal, chunk
  HybridOptions hopts;           // causal, window, chunk; window_weight filled per call from window_logit
  torch::Tensor window_logit;    // [H]: σ = sigmoid(logit) = 0.5, a leaf like the hybrid kernel's learned mix
  attention::AttentionKernel delta;  // the delta kind as a layer runs it (normalisation, β and α projections, chunked WY)
  int64_t cache = 0, cache_every = 1;  // the hyb+cache form's λ and selection interval (0: no such form)
  HybridOptions hybrid_options() const {
    auto o = hopts;
    o.window_weight = torch::sigmoid(window_logit);  // inside the call, so fwd+bwd reaches the logit
    return o;
  }
  HybridOptions cache_options() const {
    auto o = hybrid_options();
    o.cache = cache;
    o.cache_every = cache_every;
    return o;
  }
};

using Attend = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&)>;

// One form decoding at one context N: the state after N random tokens, and one step per new token.
class Decoder {
 public:
  virtual ~Decoder() = default;
  // New token i of a run (a run is tokens 0, 1, ... in order; token 0 starts again from the state after N tokens).
  virtual void step(size_t i) = 0;
  // Bytes of the state after the N tokens (what decoding at context N has to keep).
  virtual int64_t state_bytes() const = 0;
};

// Softmax at context n: a preallocated KV cache holding n random keys/values; each new token writes its k, v
// into the next slot and attends with one query over the n + i + 1 cached keys.
class SoftmaxDecoder : public Decoder {
 public:
  SoftmaxDecoder(const Setup& s, int64_t context, int64_t tokens) : s_(s), n_(context) {
    kc_ = drawn({1, s.h, context + tokens, s.d});
    vc_ = drawn({1, s.h, context + tokens, s.d});
    for (int64_t i = 0; i < tokens; ++i) {
      q_.push_back(drawn({1, s.h, 1, s.d}));
      k_.push_back(drawn({1, s.h, 1, s.d}));
      v_.push_back(drawn({1, s.h, 1, s.d}));
    }
  }
  void step(size_t i) override {
    const int64_t pos = n_ + static_cast<int64_t>(i);
    kc_.narrow(2, pos, 1).copy_(k_[i]);
    vc_.narrow(2, pos, 1).copy_(v_[i]);
    auto out = s_.softmax->forward(q_[i], kc_.narrow(2, 0, pos + 1), vc_.narrow(2, 0, pos + 1), s_.ctx);
  }
  // The n cached keys and values (the slots preallocated for the timed tokens are not part of context n).
  int64_t state_bytes() const override {
    return static_cast<int64_t>(kc_.narrow(2, 0, n_).nbytes() + vc_.narrow(2, 0, n_).nbytes());
  }

 private:
  const Setup& s_;
  int64_t n_;
  torch::Tensor kc_, vc_;  // [1, H, n + tokens, d]
  std::vector<torch::Tensor> q_, k_, v_;  // per new token: [1, H, 1, d]
};

// Linear at context n: the state after linear_chunked over n random tokens; each new token is mapped and fed
// to linear_step.
class LinearDecoder : public Decoder {
 public:
  LinearDecoder(const Setup& s, int64_t context, int64_t tokens) : s_(s), n_(context) {
    {
      auto in = make_inputs(s.h, context, s.d);
      attention::linear_chunked(map_features(*s.map, in.q, in.k, s.scale, 0), in.v, s.lopts, torch::Tensor(), &prefilled_);
    }
    MIMIC_CHECK(prefilled_.defined() && prefilled_.position == context, "bench: linear prefill left the state at position ",
                prefilled_.position, ", expected ", context);
    for (int64_t i = 0; i < tokens; ++i) {
      q_.push_back(drawn({1, s.h, 1, s.d}));
      k_.push_back(drawn({1, s.h, 1, s.d}));
      v_.push_back(drawn({1, s.h, s.d}));
    }
  }
  void step(size_t i) override {
    if (i == 0) state_ = prefilled_;  // linear_step replaces the state's tensors, it does not write into them
    auto f = map_features(*s_.map, q_[i], k_[i], s_.scale, n_ + static_cast<int64_t>(i));
    auto out = attention::linear_step(f.q.squeeze(2), f.k.squeeze(2), f.log_space, v_[i], s_.lopts, state_);
  }
  int64_t state_bytes() const override {
    int64_t n = 0;
    for (const auto* t : {&prefilled_.S, &prefilled_.z, &prefilled_.m}) n += static_cast<int64_t>(t->nbytes());
    return n;
  }

 private:
  const Setup& s_;
  int64_t n_;
  LinearState prefilled_, state_;
  std::vector<torch::Tensor> q_, k_, v_;  // per new token: q, k [1, H, 1, d], v [1, H, d]
};

// Hybrid at context n: the state after hybrid_chunked over n random tokens (the last w keys and values, and the
// linear state of every older key); each new token is a hybrid_step on it, as the hybrid kernel decodes. Both forms
// keep keys only where the map allows (HybridOptions::key_features), as the kernel does, and compute a key's features
// again when it leaves the window: the plain form counted the window's key features once, 98,820 bytes at the
// defaults where the kernel keeps 66,052 (helper-89's probe). With `cache` (the hyb+cache form), as the kernel
// decodes with LoLA's sparse cache: the prompt's n tokens run through hybrid_step one by one (a selection at every
// token), then each new token a hybrid_step on a copy of that state.
class HybridDecoder : public Decoder {
 public:
  HybridDecoder(const Setup& s, int64_t context, int64_t tokens, bool cache = false)
      : s_(s), n_(context), opts_(cache ? s.cache_options() : s.hybrid_options()) {
    {
      auto in = make_inputs(s.h, context, s.d);
      auto f = map_features(*s.map, in.q, in.k, s.scale, 0);
      if (s.map->of_key_alone())
        opts_.key_features = [&map = *s.map, root = std::sqrt(s.scale)](const at::Tensor& k) { return map.forward(k * root, Role::Key, 0); };
      if (!cache) {
        attention::hybrid_chunked(in.q, in.k, in.v, f, s.scale, opts_, torch::Tensor(), &prefilled_);
      } else {
        opts_.cache_every = 1;
        for (int64_t t = 0; t < context; ++t)
          attention::hybrid_step(in.q.narrow(2, t, 1), in.k.narrow(2, t, 1), in.v.narrow(2, t, 1),
                                 Features{f.q.narrow(2, t, 1), f.k.narrow(2, t, 1), f.log_space}, s.scale, opts_, prefilled_);
      }
    }
    MIMIC_CHECK(prefilled_.defined() && prefilled_.position == context, "bench: hybrid prefill left the state at position ",
                prefilled_.position, ", expected ", context);
    for (int64_t i = 0; i < tokens; ++i) {
      q_.push_back(drawn({1, s.h, 1, s.d}));
      k_.push_back(drawn({1, s.h, 1, s.d}));
      v_.push_back(drawn({1, s.h, 1, s.d}));
    }
  }
  void step(size_t i) override {
    if (i == 0) state_ = attention::hybrid_state_copy(prefilled_);  // hybrid_step writes the ring (and the cache) in place
    auto f = map_features(*s_.map, q_[i], k_[i], s_.scale, n_ + static_cast<int64_t>(i));
    auto out = attention::hybrid_step(q_[i], k_[i], v_[i], f, s_.scale, opts_, state_);
  }
  int64_t state_bytes() const override { return attention::hybrid_state_bytes(prefilled_); }

 private:
  const Setup& s_;
  int64_t n_;
  HybridOptions opts_;  // σ computed once: decoding runs without autograd
  HybridState prefilled_, state_;
  std::vector<torch::Tensor> q_, k_, v_;  // per new token: [1, H, 1, d]
};

struct CacheDecoder : HybridDecoder {
  CacheDecoder(const Setup& s, int64_t context, int64_t tokens) : HybridDecoder(s, context, tokens, /*cache=*/true) {}
};

// Delta at context n: the kernel's cache after its forward_cached over n random tokens (the chunked form), each new
// token a forward_cached step on a clone of it (the recurrent step), as a converted delta layer decodes.
class DeltaDecoder : public Decoder {
 public:
  DeltaDecoder(const Setup& s, int64_t context, int64_t tokens) : s_(s), prefilled_(s.delta->new_cache()) {
    {
      auto in = make_inputs(s.h, context, s.d);
      s.delta->forward_cached(in.q, in.k, in.v, s.ctx, *prefilled_);
    }
    MIMIC_CHECK(prefilled_->position == context, "bench: delta prefill left the state at position ", prefilled_->position,
                ", expected ", context);
    for (int64_t i = 0; i < tokens; ++i) {
      q_.push_back(drawn({1, s.h, 1, s.d}));
      k_.push_back(drawn({1, s.h, 1, s.d}));
      v_.push_back(drawn({1, s.h, 1, s.d}));
    }
  }
  void step(size_t i) override {
    if (i == 0) state_ = prefilled_->clone();
    auto out = s_.delta->forward_cached(q_[i], k_[i], v_[i], s_.ctx, *state_);
  }
  int64_t state_bytes() const override { return prefilled_->bytes(); }

 private:
  const Setup& s_;
  std::unique_ptr<attention::KernelCache> prefilled_, state_;
  std::vector<torch::Tensor> q_, k_, v_;  // per new token: [1, H, 1, d]
};

// One form of the benchmark: how it attends a whole sequence, and how it decodes.
struct Form {
  std::string name;
  Attend attend;                      // causal attention over q, k, v [1, H, T, d]
  std::vector<torch::Tensor> params;  // leaves its backward reaches besides q, k, v
  bool quadratic_memory = false;      // peak memory grows as T² (else as T): to predict a length that will not fit
  double speedup_target = 0;          // "fwd+bwd >= X times faster than the reference at 16K"; 0: no such target
  std::function<std::unique_ptr<Decoder>(int64_t context, int64_t tokens)> decoder;
};

template <typename D>
std::function<std::unique_ptr<Decoder>(int64_t, int64_t)> decoder_of(const Setup& s) {
  return [&s](int64_t context, int64_t tokens) -> std::unique_ptr<Decoder> { return std::make_unique<D>(s, context, tokens); };
}

// The forms, the reference (softmax) first. The targets' bounds: issue 18's performance targets.
std::vector<Form> make_forms(Setup& s) {
  std::vector<Form> forms;
  forms.push_back({"softmax",
                   [&s](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) { return s.softmax->forward(q, k, v, s.ctx); },
                   {}, true, 0, decoder_of<SoftmaxDecoder>(s)});
  std::vector<torch::Tensor> map_params = s.map->parameters();
  forms.push_back({"linear",
                   [&s](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
                     return attention::linear_chunked(map_features(*s.map, q, k, s.scale, 0), v, s.lopts, torch::Tensor());
                   },
                   map_params, false, 10, decoder_of<LinearDecoder>(s)});
  auto hybrid_params = map_params;
  hybrid_params.push_back(s.window_logit);
  forms.push_back({"hybrid",
                   [&s](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
                     return attention::hybrid_chunked(q, k, v, map_features(*s.map, q, k, s.scale, 0), s.scale, s.hybrid_options(),
                                                      torch::Tensor());
                   },
                   hybrid_params, false, 8, decoder_of<HybridDecoder>(s)});
  if (s.cache > 0)  // issue 34: LoLA's sparse cache beside the window (its whole-sequence form, then its decoding)
    forms.push_back({"hyb+cache",
                     [&s](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
                       return attention::hybrid_cache_chunked(q, k, v, map_features(*s.map, q, k, s.scale, 0), s.scale, s.cache_options(),
                                                              torch::Tensor());
                     },
                     hybrid_params, false, 0, decoder_of<CacheDecoder>(s)});
  // issue 34's target for the delta rule: its chunked fwd+bwd >= 5x softmax at 16K
  forms.push_back({"delta",
                   [&s](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) { return s.delta->forward(q, k, v, s.ctx); },
                   s.delta->parameters(), false, 5, decoder_of<DeltaDecoder>(s)});
  return forms;
}

// Measures one form at one length: forward (no autograd) and forward + backward of out.sum().
FormResult measure_form(int repeats, const Inputs& in, const Form& form) {
  FormResult r;
  auto fwd = measure(repeats, nullptr, [&] {
    torch::NoGradGuard no_grad;
    auto out = form.attend(in.q, in.k, in.v);
  });
  std::vector<torch::Tensor> leaves = {in.qg, in.kg, in.vg};
  leaves.insert(leaves.end(), form.params.begin(), form.params.end());
  auto fb = measure(
      repeats, [&] { clear_grads(leaves); },
      [&] {
        auto out = form.attend(in.qg, in.kg, in.vg);
        out.sum().backward();
      });
  clear_grads(leaves);
  r.measured = true;
  r.fwd_ms = fwd.ms;
  r.fwdbwd_ms = fb.ms;
  r.fwd_peak_mb = fwd.peak_bytes / kMB;
  r.fwdbwd_peak_mb = fb.peak_bytes / kMB;
  return r;
}


}  // namespace

std::vector<int64_t> bench_lengths(int64_t max_len) {
  std::vector<int64_t> out;
  for (int64_t t = 512; t <= 32768 && t <= max_len; t *= 2) out.push_back(t);
  return out;
}

int64_t bench_chunk(const AttentionBenchOptions& o) {
  const auto lengths = bench_lengths(o.max_len);
  return lengths.empty() ? o.chunk : std::min(o.chunk, lengths.back());
}

size_t form_index(const AttentionBenchResult& r, const std::string& name) {
  for (size_t i = 0; i < r.forms.size(); ++i)
    if (r.forms[i] == name) return i;
  fail("bench attention: no form '", name, "' in the result");
}

AttentionBenchResult run_attention_bench(const AttentionBenchOptions& o) {
  MIMIC_CHECK(o.max_len >= 512, "bench attention: --max-len must be at least 512 (the shortest length measured), got ", o.max_len);
  MIMIC_CHECK(o.repeats >= 1, "bench attention: --repeats must be at least 1, got ", o.repeats);
  MIMIC_CHECK(o.chunk >= 1, "bench attention: --chunk must be at least 1, got ", o.chunk);
  // the hybrid kind's own bound on w (HybridConfig), so that the bench measures only windows a model can have
  MIMIC_CHECK(o.window >= 1 && o.window <= attention::kMaxHybridWindow, "bench attention: --window must be in 1 ... ",
              attention::kMaxHybridWindow, ", got ", o.window);
  MIMIC_CHECK(o.head_dim >= 1, "bench attention: head_dim must be positive, got ", o.head_dim);
  MIMIC_CHECK(o.heads >= 1 && o.heads <= 256, "bench attention: --n-head must be in 1 ... 256, got ", o.heads);
  MIMIC_CHECK(o.cache >= 0 && o.cache <= attention::kMaxHybridWindow, "bench attention: --cache must be in 0 ... ",
              attention::kMaxHybridWindow, ", got ", o.cache);
  MIMIC_CHECK(o.cache_every >= 1, "bench attention: --cache-every must be at least 1, got ", o.cache_every);
  MIMIC_CHECK(o.decode_tokens >= 1, "bench attention: decode_tokens must be at least 1, got ", o.decode_tokens);
  for (auto c : o.decode_contexts) MIMIC_CHECK(c >= 1, "bench attention: decoding contexts must be positive, got ", c);
  // The decoding section holds every form's state at every context and prefills each at once: about 14 kB a head per
  // token of the longest context (0.46 GB a head at 32K, measured as peak RSS at 1 and 4 heads, 2026-12-06). At
  // --n-head 256 that is 119 GB, which the allocator or the OOM killer met minutes in (helper-89's probe): refused
  // before anything runs, as bench train refuses a length (on the CPU, whose free memory /proc/meminfo says).
  if (bench_device().is_cpu() && !o.decode_contexts.empty()) {
    const int64_t longest = *std::max_element(o.decode_contexts.begin(), o.decode_contexts.end());
    refuse_beyond_memory(14.2e3 * static_cast<double>(o.heads) * static_cast<double>(longest),
                         detail::concat("bench attention: decoding at contexts up to ", longest, " tokens with ", count_of(o.heads, "head"), " needs"),
                         " (0.46 GB a head at 32K)", "give fewer --n-head");
  }

  torch::NoGradGuard no_grad;  // set-up and decoding; the measuring turns autograd on for fwd+bwd
  AttentionBenchResult res;
  res.options = o;
  res.options.chunk = bench_chunk(o);
  res.threads = at::get_num_threads();
  res.device = device_label(bench_device());
  res.timing_method = strf("median of %d run%s after 1 warm-up; fwd = forward without autograd (inference), fwd+bwd = forward "
                           "with autograd + backward of out.sum() wrt q, k, v (and the feature map's parameters, the "
                           "hybrid's window weight, the delta rule's beta and alpha projections)",
                           o.repeats, o.repeats == 1 ? "" : "s");
  res.memory_method =
      bench_device().is_cpu()
          ? "peak of live LibTorch CPU tensor bytes allocated during the call, beyond those alive at its start (c10 allocator "
            "reports via a MemoryReportingInfoBase hook); inputs, BLAS workspaces and malloc overhead are not counted"
          : "peak of live bytes in LibTorch's CUDA caching allocator (blocks, rounded up) allocated during the call, beyond those "
            "alive at its start (MemoryReportingInfoBase hook); inputs and cuBLAS workspaces are not counted";

  Setup setup;
  setup.h = o.heads;
  setup.d = o.head_dim;
  setup.scale = 1.0 / std::sqrt(static_cast<double>(setup.d));
  attention::FeatureMapSpec spec;  // (brace-initialising the options with {} would make them JSON null, which is rejected)
  spec.name = o.feature_map;
  spec.n_head = setup.h;
  spec.head_dim = setup.d;
  setup.map = attention::make_feature_map(spec);
  res.feature_dim = setup.map->feature_dim();
  for (auto& p : setup.map->parameters()) p.requires_grad_(true);
  setup.map->to(bench_device());
  setup.softmax = attention::make_attention_kernel("softmax", nlohmann::json::object(), setup.h, setup.d);
  setup.softmax->to(bench_device());
  setup.ctx.causal = true;
  setup.ctx.scale = setup.scale;
  setup.lopts.causal = true;
  setup.lopts.chunk = res.options.chunk;
  setup.hopts.causal = true;
  setup.hopts.window = o.window;
  setup.hopts.chunk = res.options.chunk;
  setup.window_logit = torch::zeros({setup.h}, on_device()).requires_grad_(true);
  setup.cache = o.cache;
  setup.cache_every = o.cache_every;
  setup.delta = attention::make_attention_kernel("delta", {{"chunk", res.options.chunk}}, setup.h, setup.d);
  setup.delta->to(bench_device());
  std::vector<Form> forms = make_forms(setup);
  for (const auto& f : forms) res.forms.push_back(f.name);
  const size_t nf = forms.size();

  const auto lengths = bench_lengths(o.max_len);
  Progress progress("bench attention", static_cast<int64_t>(nf * lengths.size() + o.repeats + 1));
  if (!o.progress) progress.disable();

  // ---- forward and forward + backward
  std::vector<double> last_peak(nf, 0.0);  // per form, fwd+bwd MB at the previous length
  int64_t last_t = 0;
  for (int64_t t : lengths) {
    LengthResult lr;
    lr.length = t;
    lr.forms.resize(nf);
    auto in = make_inputs(setup.h, t, setup.d);
    const double avail = available_memory_bytes();
    const double r = last_t > 0 ? static_cast<double>(t) / static_cast<double>(last_t) : 1.0;
    for (size_t f = 0; f < nf; ++f) {
      FormResult& slot = lr.forms[f];
      const double predicted = last_t > 0 ? last_peak[f] * kMB * (forms[f].quadratic_memory ? r * r : r) : 0;
      if (avail > 0 && predicted > 0.8 * avail) {
        slot.skipped = strf("needs about %.1f GB (extrapolated from %s), %.1f GB available", predicted / 1e9,
                            length_name(last_t).c_str(), avail / 1e9);
      } else {
        try {
          torch::AutoGradMode grad_on(true);
          // The first measurements of a process pay one-time costs beyond one warm-up run (OpenMP's thread pool,
          // OpenBLAS's per-thread buffers, the heap's first growth): measured at 512 tokens with 3 repeats, softmax's
          // forward took 2.7 ms, with 9 repeats 0.7 ms — the "forward slower than forward + backward" anomaly. So
          // the first length is measured twice and its first result dropped.
          if (t == lengths.front()) measure_form(o.repeats, in, forms[f]);
          slot = measure_form(o.repeats, in, forms[f]);
          last_peak[f] = slot.fwdbwd_peak_mb;
        } catch (const c10::Error& e) {
          if (!is_out_of_memory(e)) throw;
          slot = FormResult{};
          slot.skipped = "out of memory";
        } catch (const std::bad_alloc&) {
          slot = FormResult{};
          slot.skipped = "out of memory";
        }
      }
      progress.advance(1, forms[f].name + " " + length_name(t));
    }
    last_t = t;
    res.lengths.push_back(lr);
  }

  // ---- recurrent decoding. Within each form the contexts are interleaved token by token (token i at every
  // context, then token i + 1, ...), so that changes in the machine's load affect every context alike. Reported
  // per context: the median of all single-token times (which a preempted token does not move; the target uses
  // it), and the median over the runs of a run's mean time per token.
  {
    const size_t nc = o.decode_contexts.size();
    const size_t nt = static_cast<size_t>(o.decode_tokens);
    std::vector<std::vector<std::unique_ptr<Decoder>>> dec(nf);
    for (size_t f = 0; f < nf; ++f)
      for (auto c : o.decode_contexts) dec[f].push_back(forms[f].decoder(c, o.decode_tokens));
    // the reference last: a softmax step over a long KV cache would evict the caches the next form's step uses
    std::vector<size_t> order;
    for (size_t f = 1; f < nf; ++f) order.push_back(f);
    order.push_back(0);
    std::vector<std::vector<std::vector<double>>> run(nf, std::vector<std::vector<double>>(nc)), tok = run;
    std::vector<std::vector<double>> sum(nf, std::vector<double>(nc));
    auto us = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); };
    for (int r = 0; r <= o.repeats; ++r) {  // r = 0: warm-up
      for (size_t f : order) {
        std::fill(sum[f].begin(), sum[f].end(), 0.0);
        for (size_t i = 0; i < nt; ++i)
          for (size_t c = 0; c < nc; ++c) {
            auto t0 = Clock::now();
            dec[f][c]->step(i);
            synchronize(bench_device());
            const double t = us(t0, Clock::now());
            sum[f][c] += t;
            if (r > 0) tok[f][c].push_back(t);
          }
        if (r > 0)
          for (size_t c = 0; c < nc; ++c) run[f][c].push_back(sum[f][c] / nt);
      }
      progress.advance(1, "decode run " + std::to_string(r));
    }
    for (size_t c = 0; c < nc; ++c) {
      DecodeResult dr;
      dr.context = o.decode_contexts[c];
      for (size_t f = 0; f < nf; ++f) dr.forms.push_back({median(tok[f][c]), median(run[f][c]), dec[f][c]->state_bytes()});
      res.decode.push_back(dr);
    }
  }
  progress.finish();

  // ---- targets
  auto find_length = [&](int64_t t) -> const LengthResult* {
    for (const auto& l : res.lengths)
      if (l.length == t) return &l;
    return nullptr;
  };
  const std::string& ref = forms[0].name;
  for (size_t f = 1; f < nf; ++f) {  // each form's fwd+bwd speed-up over the reference at 16K
    if (forms[f].speedup_target <= 0) continue;
    const std::string& name = forms[f].name;
    TargetResult tr{strf("%s fwd+bwd >= %gx faster than %s at 16K", name.c_str(), forms[f].speedup_target, ref.c_str()), "n/a", "", 0,
                    forms[f].speedup_target};
    const auto* l = find_length(16384);
    if (!l) {
      tr.detail = "16K not measured (--max-len " + std::to_string(o.max_len) + ")";
    } else if (!l->forms[0].measured || !l->forms[f].measured) {
      tr.detail = "16K: " + (l->forms[0].measured ? name + " " + l->forms[f].skipped : ref + " " + l->forms[0].skipped);
    } else {
      tr.value = ratio(l->forms[0].fwdbwd_ms, l->forms[f].fwdbwd_ms);
      tr.status = tr.value >= tr.limit ? "PASS" : "MISS";
      tr.detail = strf("%.1fx (%s %.1f ms, %s %.1f ms)", tr.value, ref.c_str(), l->forms[0].fwdbwd_ms, name.c_str(), l->forms[f].fwdbwd_ms);
    }
    res.targets.push_back(tr);
  }
  const size_t lin = form_index(res, "linear");  // the crossover and the flat decoding are linear attention's targets
  {
    TargetResult tr{"crossover <= 1K", "n/a", "", 0, 1024};
    // the smallest measured T from which on (at T and every longer measured T) linear fwd+bwd is faster
    int64_t crossover = 0;
    int64_t longest = 0;
    for (auto it = res.lengths.rbegin(); it != res.lengths.rend(); ++it) {
      const auto &s = it->forms[0], &n = it->forms[lin];
      if (!s.measured || !n.measured) continue;
      longest = std::max(longest, it->length);
      if (n.fwdbwd_ms < s.fwdbwd_ms) {
        crossover = it->length;
      } else {
        break;
      }
    }
    std::string timings;
    for (const auto& l : res.lengths) {
      const auto &s = l.forms[0], &n = l.forms[lin];
      if (s.measured && n.measured && l.length <= std::max<int64_t>(crossover, 1024))
        timings += strf("%s%s: softmax %.2f ms, linear %.2f ms", timings.empty() ? "" : "; ", length_name(l.length).c_str(),
                        s.fwdbwd_ms, n.fwdbwd_ms);
    }
    if (longest == 0) {
      tr.detail = "no length with both forms measured";
    } else if (crossover > 0) {
      tr.value = static_cast<double>(crossover);
      tr.status = crossover <= 1024 ? "PASS" : "MISS";
      tr.detail = "linear fwd+bwd faster from T = " + length_name(crossover) + " on" +
                  (crossover == res.lengths.front().length ? " (already at the shortest length measured)" : "") + " (" + timings + ")";
    } else if (longest < 1024) {
      tr.detail = "linear fwd+bwd not faster up to " + length_name(longest) + ", 1K not measured (" + timings + ")";
    } else {
      tr.status = "MISS";
      tr.detail = "linear fwd+bwd is not faster at the longest length measured, " + length_name(longest) + " (" + timings + ")";
    }
    res.targets.push_back(tr);
  }
  {
    TargetResult tr{"recurrent per-token time at 32K <= 1.2x of 1K", "n/a", "", 0, 1.2};
    const DecodeResult *a = nullptr, *b = nullptr;
    for (const auto& dr : res.decode) {
      if (dr.context == 1024) a = &dr;
      if (dr.context == 32768) b = &dr;
    }
    if (!a || !b) {
      tr.detail = "decoding at 1K and 32K not both measured";
    } else {
      const auto &la = a->forms[lin], &lb = b->forms[lin];
      tr.value = ratio(lb.us, la.us);
      tr.status = tr.value <= tr.limit ? "PASS" : "MISS";
      tr.detail = strf("%.2fx (median per token: linear 32K %.1f µs, 1K %.1f µs; mean per token: linear 32K %.1f µs, 1K %.1f µs; "
                       "softmax 32K %.1f µs, 1K %.1f µs)",
                       tr.value, lb.us, la.us, lb.mean_us, la.mean_us, b->forms[0].us, a->forms[0].us);
    }
    res.targets.push_back(tr);
  }
  return res;
}

}  // namespace mimic::bench
