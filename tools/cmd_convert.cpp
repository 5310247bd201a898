// mimic convert --model DIR --maps maps.safetensors --out DIR2 [--layers LIST] [--force] — swap distilled linear
// attention into a softmax model and write a converted model directory.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>

#include "cli.h"
#include "mimic/convert/convert.h"
#include "mimic/core/error.h"
#include "mimic/models/model.h"

namespace mimic::cli {
namespace {

struct ConvertArgs {
  Common common;
  convert::ConvertOptions o;
};

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

void run(ConvertArgs& a) {
  start(a.common);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = convert::convert(a.o);
  MIMIC_CHECK(reloads_finite(r.out), r.out, ": the converted model gives non-finite outputs");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json j = {{"out", r.out},         {"layers", r.layers},   {"attention", r.summary}, {"placement", r.placement},
                      {"teacher_checked", r.teacher_checked}, {"seconds", seconds}};
  if (!r.warning.empty()) j["warning"] = r.warning;
  if (a.common.json) return print_json(j);
  if (!r.warning.empty()) std::fprintf(stderr, "mimic: warning: %s\n", r.warning.c_str());
  std::printf("converted %zu layer%s in %.1f s -> %s\n  attention: %s\n", r.layers.size(), r.layers.size() == 1 ? "" : "s", seconds,
              r.out.c_str(), r.summary.c_str());
  if (!r.placement.is_null()) {
    std::printf("  kept softmax (%s):", r.placement.at("rule").get<std::string>().c_str());
    for (const auto& h : r.placement.at("kept"))
      std::printf(" %lld.%lld (KL %.3f)", static_cast<long long>(h.at("layer").get<int64_t>()),
                  static_cast<long long>(h.at("head").get<int64_t>()), h.at("kl").get<double>());
    std::printf("\n");
  }
}

}  // namespace

void register_convert(CLI::App& app) {
  auto a = std::make_shared<ConvertArgs>();
  auto* sub = app.add_subcommand("convert", "Swap distilled linear attention (from `mimic distill`) into a softmax model");
  sub->add_option("--model", a->o.model_dir, "The teacher: a model directory or embedded model name")->required()->transform(model_dir_arg());
  sub->add_option("--maps", a->o.maps, "Feature maps (and SLA gates) from `mimic distill` (maps.safetensors)")->required()->check(path_arg());
  sub->add_option("--out", a->o.out, "The converted model directory to write")->required()->check(out_path_arg());
  sub->add_option("--layers", a->o.layers, "Layers to convert, e.g. 0,2-3 (default: every layer the maps hold; the rest keep softmax)");
  sub->add_flag("--force", a->o.force, "Accept maps distilled from another model than --model");
  sub->add_option("--keep-softmax", a->o.keep_softmax,
                  "Heads that keep softmax: auto:K (the K heads with the highest held-out KL of distill) or LAYER.HEAD,... "
                  "(docs/attention.md, placement)");
  add_common_options(*sub, a->common);
  sub->callback([a]() { run(*a); });
}

}  // namespace mimic::cli
