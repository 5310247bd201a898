#include "mimic/distill/distill.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>

#include "mimic/attention/attention.h"
#include "mimic/attention/distillable.h"
#include "mimic/attention/feature_map.h"
#include "mimic/attention/kinds.h"
#include "mimic/core/checked_device.h"
#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/core/layers.h"
#include "mimic/core/words.h"
#include "mimic/distributed/environment.h"
#include "mimic/distributed/group.h"
#include "mimic/distill/checkpoint.h"
#include "mimic/distill/maps_file.h"
#include "mimic/distill/sources.h"
#include "mimic/distill/student.h"
#include "mimic/data/batches.h"
#include "mimic/io/atomic_file.h"
#include "mimic/io/safetensors.h"
#include "mimic/models/model.h"
#include "mimic/record/record.h"
#include "mimic/train/optimizer.h"
#include "mimic/train/stop_signal.h"
#include "mimic/train/trainer.h"

namespace fs = std::filesystem;

namespace mimic::distill {

using analysis::LayerMetrics;
using analysis::MetricsAccumulator;
using attention::DistillableKernel;

nlohmann::json DistillResult::to_json() const {
  nlohmann::json ls = nlohmann::json::array();
  for (const auto& l : layers) ls.push_back(layer_json(l));
  return {{"out", out},         {"layers", ls},           {"resumed", resumed},       {"interrupted", interrupted},
          {"seconds", seconds}, {"train_samples", train_samples}, {"val_samples", val_samples}, {"held_out", held_out()}};
}


namespace {

struct Split {
  int64_t train_begin = 0, train_count = 0, val_begin = 0, val_count = 0;
};

Split split_samples(int64_t n, double fraction) {
  MIMIC_CHECK(fraction >= 0 && fraction < 1, "--val-fraction must be in [0, 1), got ", fraction);
  Split s;
  int64_t val = fraction > 0 ? std::max<int64_t>(1, static_cast<int64_t>(std::llround(fraction * static_cast<double>(n)))) : 0;
  if (val >= n) val = n - 1;
  s.train_count = n - val;
  s.val_begin = s.train_count;
  s.val_count = val;
  if (val == 0) {  // nothing held out: validate on the training samples
    s.val_begin = 0;
    s.val_count = n;
  }
  return s;
}

LayerMetrics evaluate(DistillableKernel& student, Source& src, int64_t layer, const Split& sp, int64_t batch) {
  student.eval();
  MetricsAccumulator acc(layer, src.n_head());
  for (int64_t b = 0; b < sp.val_count; b += batch) acc.add(student, src.batch(layer, sp.val_begin + b, std::min(batch, sp.val_count - b)));
  return acc.result();
}

double validation_loss(DistillableKernel& student, Source& src, int64_t layer, const Split& sp, int64_t batch, const LossSpec& loss) {
  torch::NoGradGuard no_grad;
  student.eval();
  double sum = 0;
  for (int64_t b = 0; b < sp.val_count; b += batch) {
    const int64_t n = std::min(batch, sp.val_count - b);
    sum += distill_loss(student, src.batch(layer, sp.val_begin + b, n), loss).total.item<double>() * static_cast<double>(n);
  }
  return sum / static_cast<double>(sp.val_count);
}

// ---------------------------------------------------------------- output

void write_output(const std::string& path, const DistillOptions& o, const StudentSpec& spec, const Source& src,
                  const std::vector<LayerResult>& layers, const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  nlohmann::json metrics = nlohmann::json::array();
  std::vector<int64_t> ids;
  for (const auto& r : layers) {
    metrics.push_back(layer_json(r));
    ids.push_back(r.layer);
  }
  io::SaveOptions so;
  so.metadata = {{"format", "mimic-distill-1"},
                 {"kind", spec.kind},
                 {"attention", spec.options.dump()},
                 {"feature_map", spec.options.value("feature_map", std::string())},
                 {"map_options", (o.map_options.is_null() ? nlohmann::json::object() : o.map_options).dump()},
                 {"sla", o.sla ? "1" : "0"},
                 {"layers", nlohmann::json(ids).dump()},
                 {"n_head", std::to_string(src.n_head())},
                 {"head_dim", std::to_string(src.head_dim())},
                 {"source", src.model()},
                 {"model_digest", src.model_digest()},
                 {"record", o.record},
                 // the text the teacher read, from a record too (it was empty: helper-60's probe of 2026-12-04)
                 {"data", src.data()},
                 {"loss", o.loss},
                 {"settings", nlohmann::json({{"epochs", o.epochs},
                                              {"lr", o.lr},
                                              {"weight_decay", o.weight_decay},
                                              {"batch_size", o.batch_size},
                                              {"val_fraction", o.val_fraction},
                                              {"patience", o.patience},
                                              {"ce_weight", o.ce_weight},
                                              {"mse_weight", o.mse_weight},
                                              {"train", o.train.empty() ? (o.sla ? "both" : "maps") : o.train},
                                              {"seed", o.seed}})
                                  .dump()},
                 {"metrics", metrics.dump()}};
  io::save_safetensors(path, tensors, so);
}

std::vector<int64_t> chosen_layer_list(const DistillOptions& o, const Source& src);  // --layers among the recorded

std::vector<int64_t> chosen_layers(const DistillOptions& o, const Source& src) {
  auto chosen = chosen_layer_list(o, src);
  // a converted model's layer computes its student's attention, not softmax: maps distilled from it learn to copy a
  // copy (helper-57's probe of 2026-12-04: a record of a converted model, and the online mode's --model, were taken
  // as a teacher's without a word). Its softmax layers are still a teacher's (a conversion continued layer by layer).
  for (auto l : chosen)
    if (const auto c = src.converted(l); !c.empty())
      fail(src.describe(), ": layer ", l, " computes converted attention (", c,
           "), not softmax: distill learns from a softmax teacher's attention; ",
           o.record.empty() ? "give the softmax model it was converted from" : "record the softmax model it was converted from",
           " (or choose its softmax layers with --layers)");
  return chosen;
}

std::vector<int64_t> chosen_layer_list(const DistillOptions& o, const Source& src) {
  auto recorded = src.layers();
  if (o.layers.empty() || o.layers == "all") return recorded;
  const int64_t top = *std::max_element(recorded.begin(), recorded.end()) + 1;
  // its errors name --layers already ("--layers: --layers '…'" was the message: the seventh probe of 2026-11-29)
  const std::vector<int64_t> want = parse_layers(o.layers, std::max<int64_t>(top, 1 << 20));
  std::string recorded_s;
  for (auto l : recorded) recorded_s += (recorded_s.empty() ? "" : ",") + std::to_string(l);
  for (auto l : want)
    MIMIC_CHECK(std::find(recorded.begin(), recorded.end(), l) != recorded.end(), "--layers: layer ", l, " is not in ",
                src.describe(), " (recorded layers: ", recorded_s, ")");
  return want;
}

// ---------------------------------------------------------------- one layer

// What every layer's distillation shares.
struct Job {
  const DistillOptions& o;
  const StudentSpec& spec;
  Source& src;
  const Split& sp;
  const LossSpec& loss;
  const nlohmann::json& fingerprint;
  const CheckpointFolder& folder;
  int64_t n_batches = 0;
  bool progress = true;
};

struct LayerRun {
  LayerResult result;
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // the student's parameters and buffers, unprefixed
  bool resumed = false;  // found its folder from an earlier run
  bool stopped = false;  // interrupted by stop_after_epochs
};

// Distills one layer in its own folder OUT.ckpt/layer_XX (before.json, the training engine's checkpoint, best/),
// resuming from what is there: a layer whose training had ended gives the same result again at the cost of one
// evaluation. `epochs_this_run` counts the epochs this process trained (for stop_after_epochs).
LayerRun distill_layer(const Job& j, int64_t layer, int64_t& epochs_this_run) {
  const auto& o = j.o;
  Source* src = &j.src;
  const auto& sp = j.sp;
  const int64_t n_batches = j.n_batches;
  LayerRun run;
  auto student = make_student(j.spec, src->n_head(), src->head_dim(), o.seed, layer, o.device);
  auto params = trainable(*student, j.spec);
  LayerResult& r = run.result;
  r.layer = layer;
  r.trained = !params.empty() && o.epochs > 0;
  const std::string dir = j.folder.layer_dir(layer), before_path = dir + "/before.json";
  if (fs::exists(before_path)) {
    run.resumed = true;
    r.before = in_file(before_path, [&] { return LayerMetrics::from_json(json_parse(io::read_text_file(before_path), "the file")); });
  } else {
    r.before = evaluate(*student, *src, layer, sp, o.batch_size);
    fs::create_directories(dir);
    io::write_text_atomically(before_path, r.before.to_json().dump());
  }
  if (r.trained) {
    // One epoch = every training batch once, in an order shuffled per (seed, layer, epoch).
    int64_t position = 0, order_epoch = -1;
    std::vector<int64_t> order;
    train::TrainTask task;
    task.params = params;
    // A layer is this process's own, also in a distributed run: the ranks split the layers, not the batches.
    task.rank_local = true;
    task.micro_batch_loss = [&]() {
      const int64_t epoch = position / n_batches;
      if (epoch != order_epoch) {
        order = data::shuffled_order(n_batches, o.seed * 1000003ull + static_cast<uint64_t>(layer), epoch);
        order_epoch = epoch;
      }
      const int64_t bi = order[static_cast<size_t>(position % n_batches)];
      ++position;
      auto batch = src->batch(layer, sp.train_begin + bi * o.batch_size, std::min(o.batch_size, sp.train_count - bi * o.batch_size));
      return distill_loss(*student, batch, j.loss).total;
    };
    task.evaluate = [&]() {
      const double val = validation_loss(*student, *src, layer, sp, o.batch_size, j.loss);
      MIMIC_CHECK(std::isfinite(val), "distill: layer ", layer, ": the validation loss is not finite ",
                  position == 0 ? std::string("for the untrained map (its features overflow on this record)")
                                : "after epoch " + std::to_string(position / n_batches) + " (try a smaller --lr)");
      return val;
    };
    task.set_training = [&](bool on) { student->train(on); };
    task.data_state = [&]() { return nlohmann::json{{"position", position}}; };
    task.restore_data_state = [&](const nlohmann::json& js) { position = json_int(js, "position", "the data position", 0); };
    task.export_model = [&](const std::string& d) {
      fs::create_directories(d);
      io::save_safetensors(d + "/kernel.safetensors", snapshot(*student));
    };
    task.is_export_file = is_layer_export_file;
    // Hedgehog's distillation: AdamW at a constant rate, no clipping, validation after every epoch, the
    // best epoch kept — the untrained map (epoch 0) included: at too high a rate a map can end worse than it
    // started (t2r at lr 1e-2 on gpt2-mini: KL 1.63 → 5.07), and then the start is what we return.
    train::TrainOptions t;
    t.steps = o.epochs * n_batches;
    t.warmup = 0;
    t.min_lr_ratio = 1.0;
    t.lr = o.lr;
    t.adam = {o.lr, 0.9, 0.999, 1e-8, o.weight_decay};
    t.grad_clip = 0;
    t.eval_every = t.checkpoint_every = t.log_every = n_batches;
    t.patience = o.patience;
    t.eval_at_start = true;
    t.precision = o.precision;
    t.out_dir = dir;
    t.progress = j.progress;
    t.label = layer_prefix(layer);
    t.fingerprint = j.fingerprint;
    t.fingerprint["layer"] = layer;
    t.command = kLayerRunCommand;
    // a stop inside a layer names it: the checkpoint's path (OUT.ckpt/layer_NN) alone left the reader to decode it
    t.stop_context = "in layer " + std::to_string(layer);
    t.signal_after_step = o.signal_after_step;
    if (o.stop_after_epochs > 0) t.stop_after = (o.stop_after_epochs - epochs_this_run) * n_batches;
    const auto tr = train::train(task, t);
    epochs_this_run += (tr.steps - tr.resumed_from) / n_batches;
    if (tr.resumed_from > 0) run.resumed = true;
    if (tr.stopped) {
      run.stopped = true;
      return run;
    }
    auto best = io::SafeTensorsFile::open(dir + "/best/kernel.safetensors");
    std::vector<std::pair<std::string, at::Tensor>> state;
    for (const auto& n : best.names()) state.emplace_back(n, best.load(n));
    set_state(*student, state);
    r.epochs_run = tr.steps / n_batches;
    r.steps = tr.steps;
    r.best_epoch = tr.best_step / n_batches;
    r.best_val_loss = tr.best_eval;
  }
  r.after = r.trained ? evaluate(*student, *src, layer, sp, o.batch_size) : r.before;
  run.tensors = snapshot(*student);
  return run;
}

// ---------------------------------------------------------------- evaluation only

DistillResult eval_only(const DistillOptions& o, Source& src) {
  DistillResult res;
  const auto t0 = std::chrono::steady_clock::now();
  auto sp = split_samples(src.samples(), o.val_fraction);
  res.train_samples = sp.train_count;
  res.val_samples = sp.val_count;
  res.samples = src.samples();
  auto layers = chosen_layers(o, src);
  StudentSpec spec;
  std::optional<DistilledMaps> maps;
  if (!o.maps.empty()) {
    maps = DistilledMaps::open(o.maps);
    spec.kind = maps->kind();
    spec.options = maps->attention();
    // a --feature-map other than the file's was ignored without a word, the table naming no map (helper-57's probe)
    const std::string held = spec.options.is_object() ? spec.options.value("feature_map", std::string()) : std::string();
    MIMIC_CHECK(o.feature_map.empty() || o.feature_map == held, "--feature-map ", o.feature_map, ": ", o.maps, " holds ",
                held.empty() ? spec.kind : held, " maps, which --eval-only scores: leave --feature-map out (it names the untrained map scored without --maps)");
    MIMIC_CHECK(maps->n_head() == src.n_head() && maps->head_dim() == src.head_dim(), o.maps, ": maps for ", maps->n_head(),
                " heads of ", maps->head_dim(), " dimensions, the record has ", src.n_head(), " of ", src.head_dim());
    maps->check_teacher(src.model_digest(), o.record.empty() ? o.model_dir : "the teacher of " + o.record,
                        "--eval-only scores maps on the record (or model) of the teacher they were distilled from");
  } else {
    spec = student_spec(o, src.n_head(), src.head_dim());
  }
  for (auto layer : layers) {
    auto student = make_student(spec, src.n_head(), src.head_dim(), o.seed, layer, o.device);
    if (maps) maps->load_into(*student, layer);
    LayerResult r;
    r.layer = layer;
    r.after = r.before = evaluate(*student, src, layer, sp, o.batch_size);
    res.layers.push_back(r);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace

// ---------------------------------------------------------------- training

DistillResult distill(const DistillOptions& o) {
  MIMIC_CHECK(o.batch_size >= 1, "--batch-size must be >= 1, got ", o.batch_size);
  MIMIC_CHECK(o.epochs >= 0, "--epochs must be >= 0, got ", o.epochs);
  MIMIC_CHECK(o.lr > 0, "--lr must be > 0, got ", o.lr);
  MIMIC_CHECK(o.patience >= 0, "--patience must be >= 0, got ", o.patience);
  MIMIC_CHECK(o.ce_weight >= 0 && o.mse_weight >= 0, "--ce-weight and --mse-weight must be >= 0");
  const LossSpec loss{parse_loss(o.loss), o.ce_weight, o.mse_weight};
  if (!o.eval_only) MIMIC_CHECK(!o.out.empty(), "distill: --out FILE.safetensors is required");
  MIMIC_CHECK(o.maps.empty() || o.eval_only, "--maps is for --eval-only");
  // the map must exist before any file is read (a clear error for a typo)
  if (o.maps.empty()) {
    const auto map = o.feature_map.empty() ? default_feature_map(o.attention) : o.feature_map;
    if (!map.empty()) attention::make_feature_map({map, 1, 2, o.map_options.is_null() ? nlohmann::json::object() : o.map_options});
  }
  auto src = open_source(o);
  // online: the data may give fewer samples than asked — said before the work, not after it (helper-68's probe), and
  // after the checks that may refuse the run (a note above a one-line refusal made it two lines)
  auto note_samples = [&] {
    if (!o.note || !train::writes_outputs()) return;
    if (const auto n = src->note(); !n.empty()) o.note(n);
    if (o.record.empty())
      if (const auto n = clamped_note("--samples", o.samples, src->samples(), "what --data gives at this --seq-len"); !n.empty()) o.note(n);
  };
  if (o.eval_only) {
    MIMIC_CHECK(!distributed::environment().distributed(), "distill --eval-only runs as one process (WORLD_SIZE=",
                distributed::environment().world_size, "): run it without mimic launch");
    note_samples();
    return eval_only(o, *src);
  }

  const auto t0 = std::chrono::steady_clock::now();
  const auto spec = student_spec(o, src->n_head(), src->head_dim());
  const auto layers = chosen_layers(o, *src);
  const auto sp = split_samples(src->samples(), o.val_fraction);
  const int64_t n_batches = (sp.train_count + o.batch_size - 1) / o.batch_size;
  nlohmann::json fingerprint = {{"source", src->identity()},   {"attention", spec.options},
                                {"train_maps", spec.train_maps}, {"train_gates", spec.train_gates},
                                {"loss", o.loss},               {"ce_weight", o.ce_weight},
                                {"mse_weight", o.mse_weight},   {"epochs", o.epochs},
                                {"lr", o.lr},                   {"weight_decay", o.weight_decay},
                                {"batch_size", o.batch_size},   {"val_fraction", o.val_fraction},
                                {"patience", o.patience},       {"layers", layers},
                                {"seed", o.seed}};
  if (spec.kind != "linear") fingerprint["kind"] = spec.kind;  // absent for linear: older checkpoints still resume
  if (!computes_on_cpu(o.device)) fingerprint["device"] = c10::DeviceTypeName(o.device.type(), /*lower_case=*/true);
  // The untrained map competes as epoch 0 (eval_at_start below): a checkpoint written before it did is not
  // resumed into a run that would treat its layers differently (rerun with --fresh).
  fingerprint["start_competes"] = true;
  // a bf16 run is another run (absent for fp32: older checkpoints still resume), as train() has it for finetune
  if (o.precision != Precision::Fp32) fingerprint["precision"] = precision_name(o.precision);
  // what those left out are (a refused resume names the value: "precision ("bf16" then, the default "fp32" now)")
  const nlohmann::json fingerprint_defaults = {{"kind", "linear"}, {"device", "cpu"}, {"precision", precision_name(Precision::Fp32)}};
  CheckpointFolder folder(o.out);
  // Distributed: the ranks split the layers (each layer trains on its own, on the whole data), rank 0 alone
  // holds OUT.ckpt's lock and done.safetensors, gathers the other ranks' layers and writes OUT.
  auto& group = distributed::world();
  const bool lead = group.lead();
  Done done;
  DistillResult res;
  res.out = o.out;
  // what the student runs, for the summary line: its feature map, or the kind when it runs none (delta)
  res.student = spec.options.contains("feature_map") ? spec.options["feature_map"].get<std::string>() : spec.kind;
  res.train_samples = sp.train_count;
  res.val_samples = sp.val_count;
  res.samples = src->samples();
  // the ranks split the layers: each must distil them as rank 0 does (the probe of 2026-11-27: other --epochs or
  // --record per rank wrote mixed maps with exit 0, another --feature-map hung until the timeout)
  if (group.size() > 1) {
    // and what rank 0 alone writes where (another rank's --out was ignored, leaving its layer folder behind: the
    // fourth probe of 2026-11-27)
    auto settings = fingerprint;
    settings.update({{"out", o.out}, {"fresh", o.fresh}});
    // --json (no progress) decides what rank 0 alone prints: another rank's was dropped without a word (the
    // eleventh probe of 2026-11-30; finetune compared it already)
    settings["json"] = !o.progress;
    train::check_same_settings(group, settings, fingerprint_defaults);
  }
  const auto start = json_parse(group.from_lead("receiving rank 0's distillation state", [&] {
    done = folder.open(o.fresh, fingerprint, fingerprint_defaults);
    res.resumed = folder.resumed();
    std::vector<int64_t> finished;
    for (const auto& r : done.layers) finished.push_back(r.layer);
    return nlohmann::json{{"finished", finished}, {"resumed", res.resumed}}.dump();
  }), "rank 0's distillation state");
  const auto finished = json_key(start, "finished", "rank 0's distillation state").get<std::vector<int64_t>>();
  res.resumed = json_bool(start, "resumed", "rank 0's distillation state");
  note_samples();
  // The i-th chosen layer is rank (i mod WORLD_SIZE)'s: the layers of one model cost the same, so this is balanced
  // to within one layer, and fixed, so that a rerun gives each rank the layers whose folders it wrote.
  auto owner = [&](size_t i) { return static_cast<int>(i % static_cast<size_t>(group.size())); };
  auto is_finished = [&](int64_t l) { return std::find(finished.begin(), finished.end(), l) != finished.end(); };
  const Job job{o, spec, *src, sp, loss, fingerprint, folder, n_batches, o.progress && lead};
  std::map<int64_t, LayerRun> runs;  // this rank's layers, until rank 0 has them
  bool interrupted = false;
  int64_t epochs_this_run = 0;
  group.each_alone("distilling the layers", [&] {
    // One process: SIGINT or SIGTERM stops the run where nothing is lost — inside a layer, its trainer after the
    // step under way (a checkpoint in the layer's folder); between layers, here, after the layer is recorded. A
    // stop between layers ended the process at once and without a word (helper-63's probe of 2026-12-05).
    train::StopOnSignal stop(!distributed::environment().launched(), "\nmimic: stopping after this step or layer, with a checkpoint (the same signal again stops at once)\n");
    int64_t layers_this_run = 0;
    auto honour_stop = [&](const std::string& where, const std::string& then) {
      if (const int sig = stop.requested(); sig != 0)
        throw Error(detail::concat("stopped by ", train::stop_signal_name(sig), " ", where, ": ", done.layers.size(), " of ", layers.size(),
                                   " layers are distilled, in ", folder.dir(), "; the same command ", then),
                    train::stopped_status(sig));
    };
    for (size_t i = 0; i < layers.size(); ++i) {
      if (owner(i) != group.rank() || is_finished(layers[i])) continue;
      honour_stop("before layer " + std::to_string(layers[i]), "continues the run");
      auto run = distill_layer(job, layers[i], epochs_this_run);
      res.resumed = res.resumed || run.resumed;
      if (run.stopped) {
        interrupted = true;
        return;
      }
      if (group.size() > 1) {
        runs[layers[i]] = std::move(run);
      } else {
        // one process: recorded at once, so that a rerun skips the layer without a look into its folder
        done.add(run.result, run.tensors);
        folder.save(done);
        if (o.signal_after_layers == ++layers_this_run) std::raise(SIGINT);
      }
    }
    honour_stop("after the last layer", "writes " + o.out);
  });
  if (group.size() > 1) {
    // a rank interrupted for a test stops them all before the gathering (its layers would be missing)
    interrupted = group.average(interrupted ? 1.0 : 0.0, "asking whether a rank was interrupted") > 0;
    for (size_t i = 0; i < layers.size() && !interrupted; ++i) {
      if (is_finished(layers[i])) continue;
      const int64_t layer = layers[i];
      const std::string what = "gathering layer " + std::to_string(layer) + " from rank " + std::to_string(owner(i));
      const bool mine = owner(i) == group.rank();
      const auto result = json_parse(group.broadcast(mine ? layer_json(runs.at(layer).result).dump() : std::string(), what, owner(i)), what);
      // the other ranks receive into an untrained student's tensors: the same names and shapes
      auto tensors = mine ? runs.at(layer).tensors : snapshot(*make_student(spec, src->n_head(), src->head_dim(), o.seed, layer, o.device));
      std::vector<at::Tensor> values;
      for (const auto& [n, x] : tensors) values.push_back(x);
      group.broadcast(values, what, owner(i));
      done.add(layer_from_json(result), tensors);
    }
    if (lead && !interrupted) folder.save(done);
  }
  if (interrupted) {
    res.interrupted = true;
    res.layers = done.layers;
    return res;
  }
  // layers in the order asked
  std::vector<LayerResult> ordered;
  for (auto l : layers)
    for (const auto& r : done.layers)
      if (r.layer == l) ordered.push_back(r);
  if (lead) write_output(o.out, o, spec, *src, ordered, done.tensors);
  res.layers = ordered;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace mimic::distill
