// mimic distill --record FILE.h5 --feature-map NAME --out maps.safetensors — train linear-attention feature
// maps (and SLA gates) to mimic a recorded softmax teacher, layer by layer; or --eval-only: the fidelity of
// given maps (or an untrained map) on the record's held-out samples. docs/distill.md.
#include <cmath>
#include <filesystem>
#include <cstdio>

#include "mimic/attention/distillable.h"
#include "mimic/attention/feature_map.h"
#include "mimic/attention/kinds.h"
#include "cli.h"
#include "mimic/core/json_keys.h"
#include "mimic/core/error.h"
#include "mimic/core/mean.h"
#include "mimic/core/words.h"
#include "mimic/distill/distill.h"
#include "mimic/train/trainer.h"
#include "ranges.h"

namespace mimic::cli {
namespace {

struct DistillArgs {
  Common common;
  distill::DistillOptions o;
  std::string map_options = "{}";
};

void print_table(const distill::DistillResult& r, bool eval_only) {
  std::printf("%-6s %7s %9s %9s %9s %9s %9s %9s\n", "layer", "epochs", "CE", "KL", "KL before", "H(soft)", "H(lin)", "spearman");
  DefinedMean kl, kl0, ce, hs, hl, rho;  // over the layers that have each (a layer without a Spearman made the row's "-")
  bool undefined = false;
  for (const auto& l : r.layers) {
    const auto& a = l.after.mean;
    std::printf("%-6lld %7lld %s %s %s %s %s %s\n", static_cast<long long>(l.layer), static_cast<long long>(l.epochs_run),
                metric_cell(a.ce).c_str(), metric_cell(a.kl).c_str(), metric_cell(l.before.mean.kl).c_str(),
                metric_cell(a.entropy_softmax).c_str(), metric_cell(a.entropy_linear).c_str(), metric_cell(a.spearman).c_str());
    undefined = undefined || !std::isfinite(a.kl);
    kl.add(a.kl);
    kl0.add(l.before.mean.kl);
    ce.add(a.ce);
    hs.add(a.entropy_softmax);
    hl.add(a.entropy_linear);
    rho.add(a.spearman);
  }
  if (!r.layers.empty())
    std::printf("%-6s %7s %s %s %s %s %s %s\n", "mean", "", metric_cell(ce.value()).c_str(), metric_cell(kl.value()).c_str(),
                metric_cell(kl0.value()).c_str(), metric_cell(hs.value()).c_str(), metric_cell(hl.value()).c_str(),
                metric_cell(rho.value()).c_str());
  if (undefined)
    std::printf("(-: undefined for a student whose weights are no distribution, such as delta's; its validation loss per layer is in --json)\n");
  for (const auto& l : r.layers)
    if (l.trained && l.best_epoch == 0)
      std::printf("layer %lld: no epoch improved on the untrained map (validation loss %.4g at the start), so it is kept (a smaller --lr may help)\n",
                  static_cast<long long>(l.layer), l.best_val_loss);
  // samples the maps also trained on are not held out (--val-fraction 0, a 1-sample record): they were called so, and
  // the table read as generalisation (helper-57's probe of 2026-12-04)
  const std::string scored = r.held_out() ? count_of(r.val_samples, "held-out sample")
                                          : count_of(r.val_samples, "sample") + ", the training samples themselves";
  std::printf("%s on %s (%lld for training), %.1f s%s\n", eval_only ? "evaluated" : "distilled", scored.c_str(),
              static_cast<long long>(r.train_samples), r.seconds, r.resumed ? ", resumed from a checkpoint" : "");
  if (!r.held_out())
    std::printf("(nothing is held out%s: the metrics above measure the fit to the training samples, not how the maps generalise)\n",
                r.samples == 1 ? " of a record of one sample" : " at --val-fraction 0");
  else if (r.val_samples < 8)
    std::printf("(the metrics above rest on %s: record more samples, or raise --val-fraction, before reading "
                "differences between layers or maps into them)\n",
                count_of(r.val_samples, "held-out sample").c_str());
}

void run(DistillArgs& a) {
  start(a.common);
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"--record", a.o.record}, {"--model", a.o.model_dir}, {"--data", a.o.data}, {"--maps", a.o.maps}};
  refuse_out_over_inputs(a.o.out, inputs);
  // and the checkpoint folder beside it, which a run writes into and --fresh empties (the probe of 2026-11-27: a
  // teacher exported as OUT.ckpt was deleted by `distill --fresh`)
  if (!a.o.out.empty()) refuse_out_over_inputs(a.o.out + ".ckpt", inputs, "the checkpoint folder " + a.o.out + ".ckpt of --out " + a.o.out);
  refuse_foreign_file(a.o.out, "a distill output (feature maps)",
                      [](const auto& md) { return md.count("format") && md.at("format") == "mimic-distill-1"; });
  a.o.seed = a.common.seed;
  a.o.device = a.common.on;
  a.o.note = print_note;
  a.o.progress = !a.common.json;
  auto r = distill::distill(a.o);
  if (!train::writes_outputs()) return;  // rank 0 prints the run's result
  if (a.common.json) return print_json(r.to_json());
  if (!a.o.eval_only) std::printf("%s: %s, %zu layers\n", r.out.c_str(), r.student.c_str(), r.layers.size());
  print_table(r, a.o.eval_only);
}

}  // namespace

void register_distill(CLI::App& app) {
  auto a = std::make_shared<DistillArgs>();
  std::string maps;
  for (const auto& m : attention::feature_maps()) maps += (maps.empty() ? "" : ", ") + m.name;
  auto* sub = app.add_subcommand("distill", "Train linear-attention feature maps / SLA gates to mimic a recorded softmax teacher");
  sub->add_option("--record", a->o.record, "Attention record of the teacher (mimic record)")->check(input_file_arg("the .h5 file record wrote"));
  sub->add_option("--model", a->o.model_dir, "Online mode (no record file): the softmax teacher, run here")->transform(model_dir_arg());
  sub->add_option("--data", a->o.data, "Online mode: the samples record would take (with --split): corpus all|sotu|moby-dick, classification data set spam|sotu-era (its texts), your own text (a UTF-8 file or a folder of .txt files), or a recall task mqar[:...] / ar[:...]")->check(data_arg());
  sub->add_option("--split", a->o.split, "Online mode: split of a corpus")->capture_default_str()->check(split_arg());
  sub->add_option("--samples", a->o.samples, "Online mode: samples to take from --data (0: every sample it gives; half record's default, as a layer's q, k, v, o are held in memory in float32)")->capture_default_str()->transform(range::count(0));
  sub->add_option("--seq-len", a->o.seq_len, "Online mode: tokens per sample (default: min(256, the model's context))")->transform(range::tokens(2));
  sub->add_option("--attention", a->o.attention,
                  "The student's attention kind and options: linear, hybrid[:window=W,mix=learned|fixed,window_weight=S,affine=true,cache=N] "
                  "(sliding-window softmax + linear; its map defaults to the normalised hedgehog_softmax, as the shared denominator "
                  "wants), or delta (the gated delta rule, no feature map; with --loss mse); docs/attention.md")
      ->capture_default_str()
      ->check(attention_spec_arg(/*student=*/true));
  sub->add_option("--feature-map", a->o.feature_map, "Feature map (default: the kind's, hedgehog for linear, hedgehog_softmax for hybrid): " + maps)
      ->check(feature_map_arg());
  sub->add_option("--map-options", a->map_options, "Feature-map options as a JSON object")->capture_default_str();
  sub->add_flag("--sla", a->o.sla, "Add SLA head gates (they read the full Q and K)");
  sub->add_option("--train", a->o.train, "What to train: maps, gates or both (default: maps; both with --sla)")
      ->check(CLI::IsMember({"maps", "gates", "both"}));
  sub->add_option("--loss", a->o.loss, "ce (Hedgehog Eq. 3), mse (per-head outputs) or ce+mse")
      ->capture_default_str()
      ->check(CLI::IsMember({"ce", "mse", "ce+mse"}));
  sub->add_option("--ce-weight", a->o.ce_weight, "Weight of ce in ce+mse")->capture_default_str()->transform(range::real(0, 1000));
  sub->add_option("--mse-weight", a->o.mse_weight, "Weight of mse in ce+mse")->capture_default_str()->transform(range::real(0, 1000));
  sub->add_option("--epochs", a->o.epochs, "Epochs per layer (0: none, the maps are written as initialised)")
      ->capture_default_str()
      ->transform(range::integer(0, 1000000));
  sub->add_option("--lr", a->o.lr, "AdamW learning rate")->capture_default_str()->transform(range::learning_rate());
  sub->add_option("--weight-decay", a->o.weight_decay, "AdamW weight decay")->capture_default_str()->transform(range::weight_decay());
  sub->add_option("--batch-size", a->o.batch_size, "Samples per step")->capture_default_str()->transform(range::batch());
  sub->add_option("--val-fraction", a->o.val_fraction, "Fraction of the recorded samples held out for validation and metrics (0: none, validate on the training samples)")
      ->capture_default_str()
      ->transform(range::real(0, 1, false, /*open_high=*/true));
  sub->add_option("--patience", a->o.patience, "Stop a layer after this many epochs without a better validation loss (0: never)")
      ->capture_default_str()
      ->transform(range::integer(0, 1000000));
  sub->add_option("--layers", a->o.layers, "Layers: all (recorded), or a list like 0,2,4-5")->capture_default_str()->transform(range::index_list());
  auto* out = sub->add_option("--out", a->o.out, "Output maps (.safetensors); a checkpoint OUT.ckpt beside it makes reruns resume. REQUIRED unless --eval-only")->check(out_file_arg());
  sub->add_flag("--fresh", a->o.fresh, "Start over, ignoring a checkpoint beside --out");
  // --eval-only writes nothing: an --out beside it was ignored without a word (the probe of 2026-11-27)
  sub->add_flag("--eval-only", a->o.eval_only, "Only evaluate --maps (or the untrained --feature-map) on the held-out samples; writes nothing")
      ->excludes(out);
  sub->add_option("--maps", a->o.maps, "With --eval-only: a mimic distill output to evaluate")->check(input_file_arg("the maps file distill wrote"));
  sub->add_option("--stop-after-epochs", a->o.stop_after_epochs, "Testing: stop as if interrupted after N epochs (of each rank)")->group("")->transform(range::integer(0, 1000000));
  add_precision_option(*sub, a->o.precision, a->common);
  add_common_options(*sub, a->common, Devices::Any);
  a->common.ranks = true;  // data-parallel (docs/distributed.md)
  sub->callback([a, sub]() {
    // options that mean nothing in this run were ignored without a word (the probe of 2026-11-27)
    auto given = [&](const char* name) { return sub->get_option(name)->count() > 0; };
    if (a->o.eval_only)
      for (const char* name : {"--epochs", "--lr", "--weight-decay", "--patience", "--train", "--fresh"})
        MIMIC_USAGE_CHECK(!given(name), name, " shapes training, which --eval-only does not run: leave it out");
    if (!a->o.record.empty())
      for (const char* name : {"--data", "--split", "--samples", "--seq-len"})
        MIMIC_USAGE_CHECK(!given(name), name, " chooses what online mode (--model, --data) runs the teacher on; a record holds its samples "
                    "already: leave it out");
    if (a->o.epochs == 0 && !a->o.eval_only)
      for (const char* name : {"--lr", "--weight-decay", "--patience"})
        MIMIC_USAGE_CHECK(!given(name), name, " shapes training, which --epochs 0 does not run (the maps are written as initialised): "
                    "leave it out");
    MIMIC_USAGE_CHECK(a->o.maps.empty() || a->o.eval_only, "--maps is for --eval-only (distill trains maps of its own otherwise): "
                      "add --eval-only, or leave --maps out");
    // json_parse: one line naming the problem, and a key given twice refused (the probe of 2026-11-27: the map was
    // built with the first value and the maps file recorded the last)
    a->o.map_options = usage_checked([&] { return json_parse(a->map_options, "--map-options"); });
    MIMIC_USAGE_CHECK(a->o.map_options.is_object(), "--map-options must be a JSON object {\"key\": value, ...}, got ", a->map_options);
    // an unknown key or a bad value is a usage error like the JSON's own (it exited 1 from the run: the sixteenth probe of
    // 2026-11-30); the same dry build the run makes before it reads a file
    if (a->o.maps.empty())
      usage_checked([&] {
        const auto own = distill::default_feature_map(a->o.attention);
        MIMIC_CHECK(!own.empty() || a->o.feature_map.empty(), "--attention ", a->o.attention, " runs no feature map: leave --feature-map out");
        MIMIC_CHECK(!own.empty() || a->o.map_options.empty(), "--attention ", a->o.attention, " runs no feature map: leave --map-options out");
        if (!own.empty()) attention::make_feature_map({a->o.feature_map.empty() ? own : a->o.feature_map, 1, 2, a->o.map_options});
        return 0;
      });
    // while parsing, not after the record is opened (distill::student_spec says the same for library callers)
    MIMIC_USAGE_CHECK(a->o.sla || a->o.train.empty() || a->o.train == "maps", "--train ", a->o.train, " needs SLA gates (--sla)");
    for (const char* name : {"--ce-weight", "--mse-weight"})
      MIMIC_USAGE_CHECK(!given(name) || a->o.loss == "ce+mse", name, " weighs the terms of --loss ce+mse; with --loss ", a->o.loss,
                  " there is one term: leave it out");
    // What the line alone decides, decided while parsing (each exited 1 from the run: the probe of 2026-12-02)
    MIMIC_USAGE_CHECK(!a->o.record.empty() || !a->o.model_dir.empty(), "give --record FILE.h5 (or --model DIR --data ... for the online mode)");
    MIMIC_USAGE_CHECK(a->o.eval_only || !a->o.out.empty(), "give --out FILE.safetensors for the maps (or --eval-only to write nothing)");
    MIMIC_USAGE_CHECK(a->o.record.empty() || a->o.model_dir.empty(), "give either --record or --model, not both");
    MIMIC_USAGE_CHECK(a->o.model_dir.empty() || !a->o.data.empty(),
                      "the online mode (--model) needs --data: a corpus, a text file or folder, a classification set or a recall task");
    if (a->o.loss != "mse" && !a->o.eval_only && a->o.epochs > 0) {
      // A kind whose weights are no distribution (delta) has no ce loss to train on (--eval-only shows its metrics
      // with the ce ones left blank; --epochs 0 writes the untrained maps, computing no loss). A spec the dry build cannot make alone (one
      // that needs the layer's sizes) is left to the run, which says what it lacks.
      std::shared_ptr<attention::DistillableKernel> student;
      try {
        student = attention::as_distillable(attention::kernel_from_spec(a->o.attention, 1, 2), "a distillation student");
      } catch (const Error&) {
      }
      MIMIC_USAGE_CHECK(!student || student->weights_are_distribution(), "--attention ", a->o.attention,
                        " gives weights that are no distribution: the ", a->o.loss, " loss is undefined for it; use --loss mse");
    }
    run(*a);
  });
}

}  // namespace mimic::cli
