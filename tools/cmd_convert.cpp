// mimic convert --model DIR --maps maps.safetensors --out DIR2 [--layers LIST] [--force] [--keep-softmax SPEC
// --placement probe|kl ...] — swap distilled linear attention into a softmax model and write a converted model
// directory; heads that keep softmax are chosen by measured effect (the probe) or by distill's KL.
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "cli.h"
#include "mimic/attention/kinds.h"
#include "mimic/core/words.h"
#include "mimic/convert/convert.h"
#include "mimic/convert/placement.h"
#include "mimic/core/error.h"
#include "mimic/data/corpus.h"
#include "mimic/io/output_lock.h"
#include "mimic/models/model.h"
#include "ranges.h"

namespace mimic::cli {
namespace {

struct ConvertArgs {
  Common common;
  convert::ConvertOptions o;
  std::string probe_weights, attention_options;
};

// The probe's curve: heads kept → copy gain (and its share of the teacher's), passkey trials ranked first, LM loss.
void print_probe_curve(const nlohmann::json& p) {
  const auto& cal = p.at("calibration");
  const double teacher_gain = p["teacher"]["copy_gain"].get<double>();
  const auto passkeys = cal["passkeys"].get<int64_t>();
  std::printf("  placement by probe: %s measured in %.0f s (%s of %lld tokens, %s of %lld, from %s; %s)\n",
              count_of(p["measured"].get<int64_t>(), "set").c_str(), p["seconds"].get<double>(),
              count_of(cal["copy_segments"].get<int64_t>(), "copy segment").c_str(), static_cast<long long>(cal["segment_len"].get<int64_t>()),
              count_of(cal.value("lm_windows", int64_t{0}), "LM window").c_str(), static_cast<long long>(cal.value("lm_len", int64_t{0})),
              cal["source"].get<std::string>().c_str(), count_of(passkeys, "passkey trial").c_str());
  // the share of the teacher's copy gain only where the score counts it (a teacher gain of 0.05 nats or more: a share
  // of a gain near 0 read -970%, the probe of 2026-12-01); the passkey's key gain beside the ranks, as the score reads it
  const bool share = teacher_gain >= convert::kProbeFloor;
  std::printf("  %5s  %-6s %10s %7s %9s %9s %9s %8s\n", "kept", "head", "copy gain", "share", "passkey", "key gain", "LM loss", "score");
  auto row = [&](const std::string& kept, const std::string& head, const nlohmann::json& m) {
    const double g = m["copy_gain"].get<double>();
    std::string pk = m.contains("passkey_ranked_first") ? std::to_string(m["passkey_ranked_first"].get<int64_t>()) + "/" + std::to_string(passkeys) : "-";
    char share_text[16] = "-";
    if (share) std::snprintf(share_text, sizeof share_text, "%.0f%%", 100 * g / teacher_gain);
    char key_text[24] = "-";
    if (m.contains("key_gain") && m["key_gain"].is_number()) std::snprintf(key_text, sizeof key_text, "%.3f", m["key_gain"].get<double>());
    std::printf("  %5s  %-6s %10.3f %7s %9s %9s %9.3f %8.3f\n", kept.c_str(), head.c_str(), g, share_text, pk.c_str(), key_text,
                m["lm_loss"].get<double>(), m["score"].get<double>());
  };
  row("0", "-", p["student"]);
  int64_t i = 0;
  for (const auto& s : p["steps"])
    row(std::to_string(++i), std::to_string(s["layer"].get<int64_t>()) + "." + std::to_string(s["head"].get<int64_t>()), s);
  row("all", "-", p["teacher"]);
  if (!p["reached"].get<bool>()) std::printf("  (every candidate kept: the copy-gain target was not reached)\n");
}

// The written directory is read back (every tensor checked) and run on a fixed probe: its outputs must be finite.
bool reloads_finite(const std::string& out) {
  auto model = models::load_model(out);
  auto s = model->summary();
  torch::NoGradGuard no_grad;
  const int64_t t = std::min<int64_t>(32, s.max_positions);
  auto ids = torch::arange(t, torch::kLong).remainder(s.vocab_size).unsqueeze(0);
  models::ForwardInputs in;
  in.input_ids = ids;
  auto a = model->forward(in).last_hidden_state;
  return a.isfinite().all().item<bool>();
}

// A head spec's form (auto:K, auto:P%, LAYER.HEAD,...) as the run reads it. The parser's words begin with the option,
// which CLI11 puts before a validator's message itself: said once.
CLI::Validator keep_spec_arg(const std::string& option) {
  return CLI::Validator(
      [option](std::string& s) -> std::string {
        try {
          convert::parse_keep_spec(s, option);
          return {};
        } catch (const Error& e) {
          std::string why = e.what();
          if (why.rfind(option, 0) == 0) why.erase(0, option.size());
          if (why.rfind(": ", 0) == 0 || why.rfind(" ", 0) == 0) why.erase(0, why[0] == ':' ? 2 : 1);
          return why;
        }
      },
      "SPEC");
}

void run(ConvertArgs& a) {
  start(a.common);
  a.o.device = a.common.on;
  refuse_out_over_inputs(a.o.out, {{"--model", a.o.model_dir}, {"--maps", a.o.maps}, {"--probe-data", a.o.placement.calibration.data}});
  // the folder locked before it is checked and held to the end: checked first and locked at the write, a report and an
  // export started together both passed the check and both wrote (the tenth probe)
  const auto lock = io::lock_output_dir(a.o.out);
  refuse_foreign_output(a.o.out, OutputKind::Model);
  auto& pl = a.o.placement;
  pl.calibration.seed = a.common.seed;
  pl.progress = !a.common.json;
  if (!a.probe_weights.empty()) pl.weights = convert::parse_probe_weights(a.probe_weights);
  if (!a.attention_options.empty())
    a.o.attention_options = attention::parse_spec_options(a.attention_options, "--attention-options " + a.attention_options);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = convert::convert(a.o);
  MIMIC_CHECK(reloads_finite(r.out), r.out, ": the converted model gives non-finite outputs");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json j = {{"out", r.out},         {"layers", r.layers},   {"attention", r.summary}, {"placement", r.placement},
                      {"teacher_checked", r.teacher_checked}, {"seconds", seconds}};
  if (!r.warning.empty()) j["warning"] = r.warning;
  // after the conversion: a probe that reads text refuses such a model first, in one line
  note_unreadable_tokenizer(a.o.model_dir, "the converted model");
  if (a.common.json) return print_json(j);
  if (!r.warning.empty()) std::fprintf(stderr, "mimic: warning: %s\n", r.warning.c_str());
  std::printf("converted %zu layer%s in %.1f s -> %s\n  attention: %s\n", r.layers.size(), r.layers.size() == 1 ? "" : "s", seconds,
              r.out.c_str(), r.summary.c_str());
  if (!r.placement.is_null()) {
    if (r.placement.value("placement", "") == "probe") print_probe_curve(r.placement);
    std::printf("  kept %s (%s%s):", r.placement.value("keeps", std::string("softmax")).c_str(), r.placement.at("rule").get<std::string>().c_str(),
                r.placement.contains("placement") ? (", placement " + r.placement["placement"].get<std::string>()).c_str() : "");
    for (const auto& h : r.placement.at("kept")) {
      // "-" where the student has no KL (a delta student's weights are no distribution), as distill's tables print it
      const auto& kl = h.at("kl");
      const double v = kl.is_number() ? kl.get<double>() : std::nan("");
      char cell[32] = "-";
      if (std::isfinite(v)) std::snprintf(cell, sizeof cell, "%.3f", v);
      std::printf(" %lld.%lld (KL %s)", static_cast<long long>(h.at("layer").get<int64_t>()), static_cast<long long>(h.at("head").get<int64_t>()), cell);
    }
    // a share the converted model reaches already keeps nothing: said (the line ended at its colon: helper-59)
    if (r.placement.at("kept").empty())
      std::printf(" none%s", r.placement.value("placement", "") == "probe" ? ": the converted model reaches the share without a softmax head" : "");
    std::printf("\n");
  }
}

}  // namespace

void register_convert(CLI::App& app) {
  auto a = std::make_shared<ConvertArgs>();
  auto* sub = app.add_subcommand("convert", "Swap distilled linear attention (from `mimic distill`) into a softmax model");
  sub->add_option("--model", a->o.model_dir, "The teacher: a model directory or embedded model name")->required()->transform(model_dir_arg());
  sub->add_option("--maps", a->o.maps, "Feature maps (and SLA gates) from `mimic distill` (maps.safetensors)")->required()->check(input_file_arg("the maps file distill wrote"));
  sub->add_option("--out", a->o.out, "The converted model directory to write")->required()->check(out_dir_arg());
  sub->add_option("--layers", a->o.layers, "Layers to convert, e.g. 0,2-3 (default: every layer the maps hold; the rest keep softmax)")->transform(range::index_list());
  sub->add_flag("--force", a->o.force, "Accept maps distilled from another model than --model");
  sub->add_option("--attention-options", a->attention_options,
                  "Options merged into the maps' attention options, key=value[,...]: e.g. cache=64 on hybrid maps (LoLA's sparse cache, "
                  "training-free: docs/attention.md); not those that shape the trained tensors (feature_map, map_options, gates)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            try {
              attention::parse_spec_options(s, s);
              return {};
            } catch (const Error& e) {
              return e.what();
            }
          },
          "KEY=VALUE,..."));
  auto& pl = a->o.placement;
  sub->add_option("--keep-softmax", pl.keep_softmax,
                  "Heads that keep softmax: auto:K (K heads ranked by --placement), auto:P% (heads until the probe's copy gain reaches P% "
                  "of the teacher's) or LAYER.HEAD,... (docs/convert.md, placement)")
      ->transform(range::non_empty())
      // the spec's own form while parsing, before the model and maps load (auto:0 was refused only after them); its
      // message names the option already, and is a usage error (exit 2; it was 1: the probe of 2026-12-02)
      ->check(keep_spec_arg("--keep-softmax"));
  sub->add_option("--cache-heads", pl.cache_heads,
                  "Heads that get the hybrid's sparse cache (--attention-options cache=N), every other head none: the same forms as "
                  "--keep-softmax, ranked as it ranks them (docs/convert.md, placement); a constant state with recall where it is measured")
      ->transform(range::non_empty())
      ->check(keep_spec_arg("--cache-heads"))
      ->excludes("--keep-softmax");
  sub->add_option("--placement", pl.rule,
                  "How auto:K ranks heads: probe (measured effect on a calibration set of the training split, greedy; default for "
                  "causal LMs) or kl (highest held-out KL of distill; default otherwise)")
      ->check(CLI::IsMember({"probe", "kl"}));
  sub->add_option("--probe-data", pl.calibration.data, "Probe: calibration text, its train split only: a corpus (" + data::lm_corpus_choices() + ") or a UTF-8 text file or folder (its first 90%: docs/data.md)")
      ->capture_default_str()
      ->check(text_data_arg());
  sub->add_option("--probe-segments", pl.calibration.segments, "Probe: copy segments (each run doubled)")
      ->capture_default_str()->transform(range::count(1));
  sub->add_option("--probe-segment-len", pl.calibration.segment_len,
                  "Probe: tokens per copy segment, at most half the context (default: min(128, context / 2))")
      ->transform(range::tokens(2));
  sub->add_option("--probe-lm-windows", pl.calibration.lm_windows,
                  "Probe: prose windows whose second halves give the LM loss (0: the copy segments' first copies instead)")
      ->capture_default_str()->transform(range::count(0));
  sub->add_option("--probe-lm-len", pl.calibration.lm_len, "Probe: tokens per LM window (default: min(512, context))")
      ->transform(range::tokens(4));
  sub->add_option("--probe-passkeys", pl.calibration.passkeys, "Probe: passkey trials (0: the score leaves passkey out)")
      ->capture_default_str()->transform(range::count(0));
  sub->add_option("--probe-passkey-len", pl.calibration.passkey_len, "Probe: tokens per passkey prompt (default: min(256, context))")
      ->transform(range::tokens(32));
  sub->add_option("--probe-leaders", pl.leaders, "Probe: heads of the screen each greedy step measures again")
      ->capture_default_str()->transform(range::count(1));
  sub->add_option("--probe-weights", a->probe_weights,
                  "Probe: the score's weights, copy=1,passkey=1,lm=1 (copy and passkey as shares of the teacher's, lm in nats at long positions)")
      ->transform(range::non_empty());
  add_common_options(*sub, a->common, Devices::Any);
  sub->callback([a, sub]() {
    // what ranks the heads for --keep-softmax auto:K / auto:P% means nothing without it (ignored without a word before)
    const auto& pl = a->o.placement;
    const bool ranked = pl.spec().rfind("auto:", 0) == 0;
    for (const CLI::Option* opt : sub->get_options()) {
      const std::string name = opt->get_name();
      if (opt->count() == 0 || (name != "--placement" && name.rfind("--probe-", 0) != 0)) continue;
      MIMIC_USAGE_CHECK(ranked, name, " shapes how --keep-softmax (or --cache-heads) auto:K ranks the heads: give ", pl.option(),
                        " auto:K (or auto:P%), or leave ", name, " out");
      MIMIC_USAGE_CHECK(name == "--placement" || pl.rule != "kl", name, " sets the probe's calibration, which --placement kl does not run");
    }
    // the probe's weights, read here as the run reads them (a mistyped term exited 1 once the model had loaded)
    if (!a->probe_weights.empty()) usage_checked([&] { return convert::parse_probe_weights(a->probe_weights); });
    // as convert::convert says once the model has loaded (exit 1 before: the thirteenth probe)
    MIMIC_USAGE_CHECK(!(ranked && pl.spec().back() == '%' && pl.rule == "kl"), pl.option(), " ", pl.spec(),
                      ": auto:P% is a share of the teacher's copy gain, which only --placement probe measures");
    run(*a);
  });
}

}  // namespace mimic::cli
