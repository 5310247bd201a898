// `mimic bench attention`'s result as JSON and as the plain-text report (tables and targets); the measurement
// itself is in attention_bench.cpp.
#include <sstream>

#include "mimic/bench/attention_bench.h"
#include "mimic/bench/text.h"

namespace mimic::bench {

nlohmann::json to_json(const AttentionBenchResult& r) {
  const auto& o = r.options;
  const size_t nf = r.forms.size();
  nlohmann::json j;
  j["benchmark"] = "attention";
  j["config"] = {{"heads", o.heads},
                 {"batch", 1},
                 {"head_dim", o.head_dim},
                 {"feature_map", o.feature_map},
                 {"feature_dim", r.feature_dim},
                 {"window", o.window},
                 {"cache", o.cache},
                 {"cache_every", o.cache_every},
                 {"forms", r.forms},
                 {"dtype", "float32"},
                 {"threads", r.threads},
                 {"device", r.device},
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
  // reference time / the form's, null unless both were measured
  auto speedup = [](const FormResult& ref, const FormResult& f, double FormResult::*ms) {
    return ref.measured && f.measured ? nlohmann::json(ratio(ref.*ms, f.*ms)) : nlohmann::json(nullptr);
  };
  j["lengths"] = nlohmann::json::array();
  for (const auto& l : r.lengths) {
    nlohmann::json e = {{"T", l.length}};
    for (size_t f = 0; f < nf; ++f) {
      e[r.forms[f]] = form(l.forms[f]);
      if (f == 0) continue;
      e[r.forms[f]]["ratio_fwd"] = speedup(l.forms[0], l.forms[f], &FormResult::fwd_ms);
      e[r.forms[f]]["ratio_fwdbwd"] = speedup(l.forms[0], l.forms[f], &FormResult::fwdbwd_ms);
      if (r.forms[f] == "linear") {  // the top-level ratios predate the hybrid form: they stay linear's
        e["ratio_fwd"] = e["linear"]["ratio_fwd"];
        e["ratio_fwdbwd"] = e["linear"]["ratio_fwdbwd"];
      }
    }
    j["lengths"].push_back(e);
  }
  j["decode"] = nlohmann::json::array();
  for (const auto& dr : r.decode) {
    nlohmann::json e = {{"context", dr.context}};
    for (size_t f = 0; f < nf; ++f) {
      const auto& name = r.forms[f];
      e[name + "_us"] = dr.forms[f].us;
      e[name + "_mean_us"] = dr.forms[f].mean_us;
      e[name + "_state_bytes"] = dr.forms[f].state_bytes;
      if (f == 0) continue;
      e[name + "_ratio"] = ratio(dr.forms[0].us, dr.forms[f].us);
      if (name == "linear") e["ratio"] = e["linear_ratio"];  // predates the hybrid form: stays linear's
    }
    j["decode"].push_back(e);
  }
  j["targets"] = nlohmann::json::array();
  for (const auto& t : r.targets)
    j["targets"].push_back({{"name", t.name}, {"status", t.status}, {"value", t.value}, {"limit", t.limit}, {"detail", t.detail}});
  return j;
}

std::string format_report(const AttentionBenchResult& r) {
  const auto& o = r.options;
  const size_t nf = r.forms.size();
  std::ostringstream os;
  os << strf("attention benchmark on %s: %lld head%s, head_dim %lld, batch 1, fp32, %d CPU thread%s; softmax = causal; linear = causal chunked "
             "(chunk %lld) with %s features (F = %lld); hybrid = causal softmax over a window of %lld keys + that linear "
             "attention over older keys; delta = the delta kind (gated delta rule, chunked WY form) as a layer runs it\n",
             r.device.c_str(), static_cast<long long>(o.heads), o.heads == 1 ? "" : "s", static_cast<long long>(o.head_dim), r.threads, r.threads == 1 ? "" : "s", static_cast<long long>(o.chunk),
             o.feature_map.c_str(), static_cast<long long>(r.feature_dim), static_cast<long long>(o.window));
  if (o.cache > 0)
    os << strf("hyb+cache = that hybrid with LoLA's sparse cache of %lld keys (the keys the linear state would return worst, chosen "
               "by self-recall error; a selection every %lld positions in fwd and fwd+bwd, every token in decoding)\n",
               static_cast<long long>(o.cache), static_cast<long long>(o.cache_every));
  os << "time:   " << r.timing_method << "\n";
  os << "memory: " << r.memory_method << "; MB = 10^6 bytes\n\n";

  // Column groups, one column per form: a value (width 10, or 9 for MB and 12 for bytes) and, with ratios,
  // after every form but the reference its speed-up over the reference (width 7).
  const std::string na7 = strf("%7s", "-");
  auto group_width = [&](int w, bool ratios) { return static_cast<int>(nf) * (w + 1) - 1 + (ratios ? static_cast<int>(nf - 1) * 8 : 0); };
  auto names = [&](int w, bool ratios) {
    std::string out;
    for (size_t f = 0; f < nf; ++f) {
      out += strf(f ? " %*s" : "%*s", w, r.forms[f].c_str());
      if (ratios && f > 0) out += strf(" %7s", "ratio");
    }
    return out;
  };
  // vals[f] formatted at width w, "-" where !have[f]; with ratios, ref / vals[f].
  auto cells = [&](const std::vector<double>& vals, const std::vector<bool>& have, int w, const char* fmt, bool ratios) {
    std::string out;
    for (size_t f = 0; f < nf; ++f) {
      if (f) out += " ";
      out += have[f] ? strf(fmt, w, vals[f]) : strf("%*s", w, "-");
      if (ratios && f > 0) out += " " + (have[0] && have[f] ? strf("%6.1fx", ratio(vals[0], vals[f])) : na7);
    }
    return out;
  };
  auto of = [&](const LengthResult& l, double FormResult::*field) {
    std::vector<double> v;
    for (const auto& f : l.forms) v.push_back(f.*field);
    return v;
  };
  auto measured = [&](const LengthResult& l) {
    std::vector<bool> v;
    for (const auto& f : l.forms) v.push_back(f.measured);
    return v;
  };

  const int tw = group_width(10, true), mw = group_width(9, false);
  os << "forward and forward+backward time (ms); ratio = softmax's time / the form's\n";
  os << strf("%6s | ", "T") << names(10, true) << " | " << names(10, true) << "\n";
  os << strf("%6s | %*s | %*s\n", "", tw, "fwd ms", tw, "fwd+bwd ms");
  for (const auto& l : r.lengths) {
    const auto have = measured(l);
    os << strf("%6s | ", length_name(l.length).c_str()) << cells(of(l, &FormResult::fwd_ms), have, 10, "%*.2f", true) << " | "
       << cells(of(l, &FormResult::fwdbwd_ms), have, 10, "%*.2f", true) << "\n";
    for (size_t f = 0; f < nf; ++f)
      if (!l.forms[f].measured) os << "         " << r.forms[f] << " " << length_name(l.length) << " skipped: " << l.forms[f].skipped << "\n";
  }
  os << "\npeak memory (MB)\n";
  os << strf("%6s | ", "T") << names(9, false) << " | " << names(9, false) << "\n";
  os << strf("%6s | %*s | %*s\n", "", mw, "fwd MB", mw, "fwd+bwd MB");
  for (const auto& l : r.lengths) {
    const auto have = measured(l);
    os << strf("%6s | ", length_name(l.length).c_str()) << cells(of(l, &FormResult::fwd_peak_mb), have, 9, "%*.1f", false) << " | "
       << cells(of(l, &FormResult::fwdbwd_peak_mb), have, 9, "%*.1f", false) << "\n";
  }

  os << strf("\nrecurrent decoding, time per token (µs): median of the %lld tokens x %d run%s (after 1 warm-up run), and "
             "median over the runs of a run's mean; state = what decoding at that context keeps (bytes)\n",
             static_cast<long long>(o.decode_tokens), o.repeats, o.repeats == 1 ? "" : "s");
  os << "softmax: one query against a preallocated KV cache of N keys; linear: feature map + linear_step on the state "
        "after N tokens; hybrid: a hybrid_step (the recurrent form) on the state after N tokens (the window's last keys + the "
        "linear state); delta: the kind's recurrent step on its [d, d] state after N tokens; contexts interleaved token by token\n";
  const std::vector<bool> all(nf, true);
  auto dec = [&](const DecodeResult& dr, double DecodeForm::*field) {
    std::vector<double> v;
    for (const auto& f : dr.forms) v.push_back(f.*field);
    return v;
  };
  os << strf("%8s | ", "context") << names(10, true) << " | " << names(10, false) << " | " << names(12, false) << "\n";
  os << strf("%8s | %*s | %*s | %*s\n", "", tw, "median per token", group_width(10, false), "mean per token", group_width(12, false),
             "state bytes");
  for (const auto& dr : r.decode) {
    std::string bytes;
    for (size_t f = 0; f < nf; ++f) bytes += strf(f ? " %12lld" : "%12lld", static_cast<long long>(dr.forms[f].state_bytes));
    os << strf("%8s | ", length_name(dr.context).c_str()) << cells(dec(dr, &DecodeForm::us), all, 10, "%*.1f", true) << " | "
       << cells(dec(dr, &DecodeForm::mean_us), all, 10, "%*.1f", false) << " | " << bytes << "\n";
  }

  os << "\ntargets\n";
  for (const auto& t : r.targets) os << strf("  %-4s  ", t.status.c_str()) << t.name << ": " << t.detail << "\n";
  return os.str();
}

}  // namespace mimic::bench
