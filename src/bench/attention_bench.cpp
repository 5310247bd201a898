#include "mimic/bench/attention_bench.h"

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>

#include "mimic/attention/attention.h"
#include "mimic/attention/kinds.h"
#include "mimic/attention/feature_map.h"
#include "mimic/attention/linear_attention.h"
#include "mimic/bench/measure.h"
#include "mimic/core/error.h"
#include "mimic/core/progress.h"

namespace mimic::bench {

namespace {

using attention::AttentionContext;
using attention::FeatureMap;
using attention::Features;
using attention::LinearOptions;
using attention::LinearState;
using attention::Role;
using Clock = std::chrono::steady_clock;

constexpr double kMB = 1e6;

std::string strf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

// "512", "1K", "16K"
std::string length_name(int64_t t) { return t % 1024 == 0 ? std::to_string(t / 1024) + "K" : std::to_string(t); }

// ---------------------------------------------------------------- the two attention forms

struct Inputs {
  torch::Tensor q, k, v;  // [1, 1, T, d], no grad
  torch::Tensor qg, kg, vg;  // the same values as leaves requiring grad
};

Inputs make_inputs(int64_t t, int64_t d) {
  Inputs in;
  in.q = torch::randn({1, 1, t, d});
  in.k = torch::randn({1, 1, t, d});
  in.v = torch::randn({1, 1, t, d});
  in.qg = in.q.clone().requires_grad_(true);
  in.kg = in.k.clone().requires_grad_(true);
  in.vg = in.v.clone().requires_grad_(true);
  return in;
}

void clear_grads(std::vector<torch::Tensor> tensors) {
  for (auto& t : tensors)
    if (t.grad().defined()) t.mutable_grad() = torch::Tensor();
}

// Causal chunked linear attention: features from the map on q·√scale and k·√scale, then linear_chunked.
torch::Tensor linear_forward(attention::FeatureMapImpl& map, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             double scale, const LinearOptions& opts) {
  const double s = std::sqrt(scale);
  map.begin_pass();
  Features f{map.forward(q * s, Role::Query, 0), map.forward(k * s, Role::Key, 0), map.log_space()};
  return attention::linear_chunked(f, v, opts, torch::Tensor());
}

// Measures one form at one length: forward (no autograd) and forward + backward of out.sum().
FormResult measure_form(int repeats, const Inputs& in, const std::vector<torch::Tensor>& params,
                        const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&)>& attend) {
  FormResult r;
  auto fwd = measure(repeats, nullptr, [&] {
    torch::NoGradGuard no_grad;
    auto out = attend(in.q, in.k, in.v);
  });
  std::vector<torch::Tensor> leaves = {in.qg, in.kg, in.vg};
  leaves.insert(leaves.end(), params.begin(), params.end());
  auto fb = measure(
      repeats, [&] { clear_grads(leaves); },
      [&] {
        auto out = attend(in.qg, in.kg, in.vg);
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

// ---------------------------------------------------------------- decoding

// Softmax decoding at context n: a preallocated KV cache holding n random keys/values; each new token
// writes its k, v into the next slot and attends with one query over the n + i + 1 cached keys.
struct SoftmaxDecoder {
  torch::Tensor kc, vc;  // [1, 1, n + tokens, d]
  std::vector<torch::Tensor> q, k, v;  // per new token: [1, 1, 1, d]
  int64_t n = 0;
  SoftmaxDecoder(int64_t context, int64_t tokens, int64_t d) : n(context) {
    kc = torch::randn({1, 1, context + tokens, d});
    vc = torch::randn({1, 1, context + tokens, d});
    for (int64_t i = 0; i < tokens; ++i) {
      q.push_back(torch::randn({1, 1, 1, d}));
      k.push_back(torch::randn({1, 1, 1, d}));
      v.push_back(torch::randn({1, 1, 1, d}));
    }
  }
  // New token i of a run (a run is tokens 0, 1, ... in order; token 0 starts again at context n).
  void step(size_t i, attention::AttentionKernelImpl& sm, const AttentionContext& ctx) {
    const int64_t pos = n + static_cast<int64_t>(i);
    kc.narrow(2, pos, 1).copy_(k[i]);
    vc.narrow(2, pos, 1).copy_(v[i]);
    auto out = sm.forward(q[i], kc.narrow(2, 0, pos + 1), vc.narrow(2, 0, pos + 1), ctx);
  }
};

// Linear decoding at context n: the state after linear_chunked over n random tokens; each new token is
// mapped (q·√scale, k·√scale through the feature map) and fed to linear_step. Every run starts from the
// same prefilled state.
struct LinearDecoder {
  LinearState prefilled;
  std::vector<torch::Tensor> q, k, v;  // per new token: q, k [1, 1, 1, d], v [1, 1, d]
  int64_t n = 0;
  LinearDecoder(attention::FeatureMapImpl& map, int64_t context, int64_t tokens, int64_t d, double scale, const LinearOptions& opts)
      : n(context) {
    {
      auto in = make_inputs(context, d);
      const double s = std::sqrt(scale);
      map.begin_pass();
      Features f{map.forward(in.q * s, Role::Query, 0), map.forward(in.k * s, Role::Key, 0), map.log_space()};
      attention::linear_chunked(f, in.v, opts, torch::Tensor(), &prefilled);
    }
    MIMIC_CHECK(prefilled.defined() && prefilled.position == context, "bench: linear prefill left the state at position ",
                prefilled.position, ", expected ", context);
    for (int64_t i = 0; i < tokens; ++i) {
      q.push_back(torch::randn({1, 1, 1, d}));
      k.push_back(torch::randn({1, 1, 1, d}));
      v.push_back(torch::randn({1, 1, d}));
    }
  }
  LinearState state;
  // New token i of a run (a run is tokens 0, 1, ... in order; token 0 starts again from the prefilled state).
  void step(size_t i, attention::FeatureMapImpl& map, double scale, const LinearOptions& opts) {
    if (i == 0) state = prefilled;  // linear_step replaces the state's tensors, it does not write into them
    const double s = std::sqrt(scale);
    const int64_t pos = n + static_cast<int64_t>(i);
    map.begin_pass();
    auto fq = map.forward(q[i] * s, Role::Query, pos).squeeze(2);
    auto fk = map.forward(k[i] * s, Role::Key, pos).squeeze(2);
    auto out = attention::linear_step(fq, fk, map.log_space(), v[i], opts, state);
  }
};

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

}  // namespace

std::vector<int64_t> bench_lengths(int64_t max_len) {
  std::vector<int64_t> out;
  for (int64_t t = 512; t <= 32768 && t <= max_len; t *= 2) out.push_back(t);
  return out;
}

AttentionBenchResult run_attention_bench(const AttentionBenchOptions& o) {
  MIMIC_CHECK(o.max_len >= 512, "bench attention: --max-len must be at least 512 (the shortest length measured), got ", o.max_len);
  MIMIC_CHECK(o.repeats >= 1, "bench attention: --repeats must be at least 1, got ", o.repeats);
  MIMIC_CHECK(o.chunk >= 1, "bench attention: --chunk must be at least 1, got ", o.chunk);
  MIMIC_CHECK(o.head_dim >= 1, "bench attention: head_dim must be positive, got ", o.head_dim);
  MIMIC_CHECK(o.decode_tokens >= 1, "bench attention: decode_tokens must be at least 1, got ", o.decode_tokens);
  for (auto c : o.decode_contexts) MIMIC_CHECK(c >= 1, "bench attention: decoding contexts must be positive, got ", c);

  torch::NoGradGuard no_grad;  // set-up and decoding; measure_form turns autograd on for fwd+bwd
  AttentionBenchResult res;
  res.options = o;
  res.threads = at::get_num_threads();
  res.timing_method = strf("median of %d run%s after 1 warm-up; fwd = forward without autograd (inference), fwd+bwd = forward "
                           "with autograd + backward of out.sum() wrt q, k, v (and the feature map's parameters)",
                           o.repeats, o.repeats == 1 ? "" : "s");
  res.memory_method =
      "peak of live LibTorch CPU tensor bytes allocated during the call, beyond those alive at its start (c10 allocator "
      "reports via a MemoryReportingInfoBase hook); inputs, BLAS workspaces and malloc overhead are not counted";

  const int64_t d = o.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  attention::FeatureMapSpec spec;  // (brace-initialising the options with {} would make them JSON null, which is rejected)
  spec.name = o.feature_map;
  spec.n_head = 1;
  spec.head_dim = d;
  FeatureMap map = attention::make_feature_map(spec);
  res.feature_dim = map->feature_dim();
  std::vector<torch::Tensor> params = map->parameters();
  for (auto& p : params) p.requires_grad_(true);
  auto softmax_kernel = attention::make_attention_kernel("softmax", nlohmann::json::object(), 1, d);
  auto& softmax = *softmax_kernel;
  AttentionContext ctx;
  ctx.causal = true;
  ctx.scale = scale;
  LinearOptions lopts;
  lopts.causal = true;
  lopts.chunk = o.chunk;

  const auto lengths = bench_lengths(o.max_len);
  Progress progress("bench attention", static_cast<int64_t>(2 * lengths.size() + o.repeats + 1));

  // ---- forward and forward + backward
  double last_softmax_peak = 0, last_linear_peak = 0;
  int64_t last_t = 0;
  for (int64_t t : lengths) {
    LengthResult lr;
    lr.length = t;
    auto in = make_inputs(t, d);
    const double avail = available_memory_bytes();
    auto run_form = [&](FormResult& slot, double& last_peak, double growth, const char* name,
                        const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&)>& f,
                        const std::vector<torch::Tensor>& form_params) {
      const double predicted = last_t > 0 ? last_peak * kMB * growth : 0;
      if (avail > 0 && predicted > 0.8 * avail) {
        slot.skipped = strf("needs about %.1f GB (extrapolated from %s), %.1f GB available", predicted / 1e9,
                            length_name(last_t).c_str(), avail / 1e9);
      } else {
        try {
          torch::AutoGradMode grad_on(true);
          slot = measure_form(o.repeats, in, form_params, f);
          last_peak = slot.fwdbwd_peak_mb;
        } catch (const c10::Error& e) {
          if (!is_out_of_memory(e)) throw;
          slot = FormResult{};
          slot.skipped = "out of memory";
        } catch (const std::bad_alloc&) {
          slot = FormResult{};
          slot.skipped = "out of memory";
        }
      }
      progress.advance(1, std::string(name) + " " + length_name(t));
    };
    const double r = last_t > 0 ? static_cast<double>(t) / static_cast<double>(last_t) : 1.0;
    run_form(lr.softmax, last_softmax_peak, r * r, "softmax",
             [&](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) { return softmax.forward(q, k, v, ctx); }, {});
    run_form(lr.linear, last_linear_peak, r, "linear",
             [&](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
               return linear_forward(*map, q, k, v, scale, lopts);
             },
             params);
    last_t = t;
    res.lengths.push_back(lr);
  }

  // ---- recurrent decoding. Within each form the contexts are interleaved token by token (token i at every
  // context, then token i + 1, ...), so that changes in the machine's load affect every context alike. Reported
  // per context: the median of all single-token times (which a preempted token does not move; the target uses
  // it), and the median over the runs of a run's mean time per token.
  {
    std::vector<SoftmaxDecoder> sdec;
    std::vector<LinearDecoder> ldec;
    for (auto c : o.decode_contexts) {
      sdec.emplace_back(c, o.decode_tokens, d);
      ldec.emplace_back(*map, c, o.decode_tokens, d, scale, lopts);
    }
    const size_t nc = o.decode_contexts.size();
    const size_t nt = static_cast<size_t>(o.decode_tokens);
    std::vector<std::vector<double>> s_run(nc), l_run(nc), s_tok(nc), l_tok(nc);
    std::vector<double> s_sum(nc), l_sum(nc);
    auto us = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); };
    for (int r = 0; r <= o.repeats; ++r) {  // r = 0: warm-up
      std::fill(s_sum.begin(), s_sum.end(), 0.0);
      std::fill(l_sum.begin(), l_sum.end(), 0.0);
      // linear first, then softmax: a softmax step over a long KV cache would evict the caches the next step uses
      for (size_t i = 0; i < nt; ++i)
        for (size_t c = 0; c < nc; ++c) {
          auto t0 = Clock::now();
          ldec[c].step(i, *map, scale, lopts);
          const double t = us(t0, Clock::now());
          l_sum[c] += t;
          if (r > 0) l_tok[c].push_back(t);
        }
      for (size_t i = 0; i < nt; ++i)
        for (size_t c = 0; c < nc; ++c) {
          auto t0 = Clock::now();
          sdec[c].step(i, softmax, ctx);
          const double t = us(t0, Clock::now());
          s_sum[c] += t;
          if (r > 0) s_tok[c].push_back(t);
        }
      if (r > 0)
        for (size_t c = 0; c < nc; ++c) {
          s_run[c].push_back(s_sum[c] / nt);
          l_run[c].push_back(l_sum[c] / nt);
        }
      progress.advance(1, "decode run " + std::to_string(r));
    }
    for (size_t c = 0; c < nc; ++c)
      res.decode.push_back({o.decode_contexts[c], median(s_tok[c]), median(l_tok[c]), median(s_run[c]), median(l_run[c])});
  }
  progress.finish();

  // ---- targets
  auto find_length = [&](int64_t t) -> const LengthResult* {
    for (const auto& l : res.lengths)
      if (l.length == t) return &l;
    return nullptr;
  };
  {
    TargetResult tr{"linear fwd+bwd >= 10x faster than softmax at 16K", "n/a", "", 0, 10};
    const auto* l = find_length(16384);
    if (!l) {
      tr.detail = "16K not measured (--max-len " + std::to_string(o.max_len) + ")";
    } else if (!l->softmax.measured || !l->linear.measured) {
      tr.detail = "16K: " + (l->softmax.measured ? "linear " + l->linear.skipped : "softmax " + l->softmax.skipped);
    } else {
      tr.value = ratio(l->softmax.fwdbwd_ms, l->linear.fwdbwd_ms);
      tr.status = tr.value >= tr.limit ? "PASS" : "MISS";
      tr.detail = strf("%.1fx (softmax %.1f ms, linear %.1f ms)", tr.value, l->softmax.fwdbwd_ms, l->linear.fwdbwd_ms);
    }
    res.targets.push_back(tr);
  }
  {
    TargetResult tr{"crossover <= 1K", "n/a", "", 0, 1024};
    // the smallest measured T from which on (at T and every longer measured T) linear fwd+bwd is faster
    int64_t crossover = 0;
    int64_t longest = 0;
    for (auto it = res.lengths.rbegin(); it != res.lengths.rend(); ++it) {
      if (!it->softmax.measured || !it->linear.measured) continue;
      longest = std::max(longest, it->length);
      if (it->linear.fwdbwd_ms < it->softmax.fwdbwd_ms) {
        crossover = it->length;
      } else {
        break;
      }
    }
    std::string timings;
    for (const auto& l : res.lengths)
      if (l.softmax.measured && l.linear.measured && l.length <= std::max<int64_t>(crossover, 1024))
        timings += strf("%s%s: softmax %.2f ms, linear %.2f ms", timings.empty() ? "" : "; ", length_name(l.length).c_str(),
                        l.softmax.fwdbwd_ms, l.linear.fwdbwd_ms);
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
      tr.value = ratio(b->linear_us, a->linear_us);
      tr.status = tr.value <= tr.limit ? "PASS" : "MISS";
      tr.detail = strf("%.2fx (median per token: linear 32K %.1f us, 1K %.1f us; mean per token: linear 32K %.1f us, 1K %.1f us; "
                       "softmax 32K %.1f us, 1K %.1f us)",
                       tr.value, b->linear_us, a->linear_us, b->linear_mean_us, a->linear_mean_us, b->softmax_us, a->softmax_us);
    }
    res.targets.push_back(tr);
  }
  return res;
}

nlohmann::json to_json(const AttentionBenchResult& r) {
  const auto& o = r.options;
  nlohmann::json j;
  j["benchmark"] = "attention";
  j["config"] = {{"heads", 1},
                 {"batch", 1},
                 {"head_dim", o.head_dim},
                 {"feature_map", o.feature_map},
                 {"feature_dim", r.feature_dim},
                 {"dtype", "float32"},
                 {"threads", r.threads},
                 {"repeats", o.repeats},
                 {"chunk", o.chunk},
                 {"max_len", o.max_len},
                 {"decode_tokens", o.decode_tokens},
                 {"scale", 1.0 / std::sqrt(static_cast<double>(o.head_dim))}};
  j["timing"] = r.timing_method;
  j["memory"] = r.memory_method;
  auto form = [](const FormResult& f) {
    if (!f.measured) return nlohmann::json{{"measured", false}, {"skipped", f.skipped}};
    return nlohmann::json{{"measured", true},           {"fwd_ms", f.fwd_ms},
                          {"fwdbwd_ms", f.fwdbwd_ms},   {"fwd_peak_mb", f.fwd_peak_mb},
                          {"fwdbwd_peak_mb", f.fwdbwd_peak_mb}};
  };
  j["lengths"] = nlohmann::json::array();
  for (const auto& l : r.lengths) {
    nlohmann::json e = {{"T", l.length}, {"softmax", form(l.softmax)}, {"linear", form(l.linear)}};
    const bool both = l.softmax.measured && l.linear.measured;
    e["ratio_fwd"] = both ? nlohmann::json(ratio(l.softmax.fwd_ms, l.linear.fwd_ms)) : nlohmann::json(nullptr);
    e["ratio_fwdbwd"] = both ? nlohmann::json(ratio(l.softmax.fwdbwd_ms, l.linear.fwdbwd_ms)) : nlohmann::json(nullptr);
    j["lengths"].push_back(e);
  }
  j["decode"] = nlohmann::json::array();
  for (const auto& dr : r.decode)
    j["decode"].push_back({{"context", dr.context},
                           {"softmax_us", dr.softmax_us},
                           {"linear_us", dr.linear_us},
                           {"softmax_mean_us", dr.softmax_mean_us},
                           {"linear_mean_us", dr.linear_mean_us},
                           {"ratio", ratio(dr.softmax_us, dr.linear_us)}});
  j["targets"] = nlohmann::json::array();
  for (const auto& t : r.targets)
    j["targets"].push_back({{"name", t.name}, {"status", t.status}, {"value", t.value}, {"limit", t.limit}, {"detail", t.detail}});
  return j;
}

std::string format_report(const AttentionBenchResult& r) {
  const auto& o = r.options;
  std::ostringstream os;
  os << strf("attention benchmark: 1 head, head_dim %lld, batch 1, fp32, %d thread%s; linear = causal chunked (chunk %lld) with "
             "%s features (F = %lld); softmax = causal\n",
             static_cast<long long>(o.head_dim), r.threads, r.threads == 1 ? "" : "s", static_cast<long long>(o.chunk),
             o.feature_map.c_str(), static_cast<long long>(r.feature_dim));
  os << "time:   " << r.timing_method << "\n";
  os << "memory: " << r.memory_method << "; MB = 10^6 bytes\n\n";

  auto ms = [](double v) { return strf("%10.2f", v); };
  auto mb = [](double v) { return strf("%9.1f", v); };
  auto rt = [](double a, double b) { return strf("%6.1fx", ratio(a, b)); };
  os << "forward and forward+backward (ms), peak memory (MB)\n";
  os << strf("%6s | %10s %10s %7s | %10s %10s %7s | %9s %9s | %9s %9s\n", "T", "softmax", "linear", "ratio", "softmax", "linear",
             "ratio", "softmax", "linear", "softmax", "linear");
  os << strf("%6s | %29s | %29s | %19s | %19s\n", "", "fwd ms", "fwd+bwd ms", "fwd MB", "fwd+bwd MB");
  for (const auto& l : r.lengths) {
    const auto &s = l.softmax, &n = l.linear;
    const std::string na10 = strf("%10s", "-"), na9 = strf("%9s", "-"), na7 = strf("%7s", "-");
    const bool both = s.measured && n.measured;
    os << strf("%6s | ", length_name(l.length).c_str()) << (s.measured ? ms(s.fwd_ms) : na10) << " "
       << (n.measured ? ms(n.fwd_ms) : na10) << " " << (both ? rt(s.fwd_ms, n.fwd_ms) : na7) << " | "
       << (s.measured ? ms(s.fwdbwd_ms) : na10) << " " << (n.measured ? ms(n.fwdbwd_ms) : na10) << " "
       << (both ? rt(s.fwdbwd_ms, n.fwdbwd_ms) : na7) << " | " << (s.measured ? mb(s.fwd_peak_mb) : na9) << " "
       << (n.measured ? mb(n.fwd_peak_mb) : na9) << " | " << (s.measured ? mb(s.fwdbwd_peak_mb) : na9) << " "
       << (n.measured ? mb(n.fwdbwd_peak_mb) : na9) << "\n";
    if (!s.measured) os << "         softmax " << length_name(l.length) << " skipped: " << s.skipped << "\n";
    if (!n.measured) os << "         linear " << length_name(l.length) << " skipped: " << n.skipped << "\n";
  }

  os << strf("\nrecurrent decoding, time per token (µs): median of the %lld tokens x %d run%s (after 1 warm-up run), and "
             "median over the runs of a run's mean\n",
             static_cast<long long>(o.decode_tokens), o.repeats, o.repeats == 1 ? "" : "s");
  os << "softmax: one query against a preallocated KV cache of N keys; linear: feature map + linear_step on the state "
        "after N tokens; contexts interleaved token by token\n";
  os << strf("%8s | %10s %10s %7s | %10s %10s\n", "context", "softmax", "linear", "ratio", "softmax", "linear");
  os << strf("%8s | %29s | %21s\n", "", "median per token", "mean per token");
  for (const auto& dr : r.decode)
    os << strf("%8s | %10.1f %10.1f %6.1fx | %10.1f %10.1f\n", length_name(dr.context).c_str(), dr.softmax_us, dr.linear_us,
               ratio(dr.softmax_us, dr.linear_us), dr.softmax_mean_us, dr.linear_mean_us);

  os << "\ntargets\n";
  for (const auto& t : r.targets) os << strf("  %-4s  ", t.status.c_str()) << t.name << ": " << t.detail << "\n";
  return os.str();
}

}  // namespace mimic::bench
