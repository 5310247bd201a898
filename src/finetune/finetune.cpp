#include "mimic/finetune/finetune.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "mimic/attention/attention.h"
#include "mimic/core/checked_device.h"
#include "mimic/core/error.h"
#include "mimic/core/paths.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"
#include "mimic/train/trainer.h"

namespace mimic::finetune {

TrainSet train_set_from_name(const std::string& name) {
  if (name == "all") return TrainSet::All;
  if (name == "attention") return TrainSet::Attention;
  if (name == "feature-maps") return TrainSet::FeatureMaps;
  fail("unknown --train '", name, "' (all, attention or feature-maps)");
}

const char* train_set_name(TrainSet s) {
  switch (s) {
    case TrainSet::All: return "all";
    case TrainSet::Attention: return "attention";
    case TrainSet::FeatureMaps: return "feature-maps";
  }
  return "?";
}

Preset preset(const std::string& name) {
  if (name == "gpt2") return {6e-4, 0.01, 0.1, 0.0};
  if (name == "bert") return {1e-5, 0.0, 0.0, 0.0};
  if (name == "kd") return {3e-4, 0.01, 0.1, 0.5};
  fail("unknown preset '", name, "' (gpt2, bert or kd)");
}

bool is_kernel_parameter(const std::string& n) { return n.rfind("kernels.", 0) == 0; }

bool is_classifier_head(const std::string& n) { return n.rfind("classifier.", 0) == 0 || n.rfind("pooler.", 0) == 0; }

namespace {

// --freeze-kept-heads: masks the gradient of every block of a kept head (models::Family::head_slices) and puts the
// blocks back after each step (weight decay moves them otherwise).
void freeze_kept_heads(Prepared& p, const FinetuneOptions& o) {
  MIMIC_CHECK(o.lora.rank == 0, kFreezeKeptHeadsWithLora);
  auto& model = *p.model;
  const auto s = model.summary();
  std::vector<std::pair<int64_t, int64_t>> kept;
  bool converted = false;
  // what the note names: the layers left softmax whole, and the heads a converted layer kept
  std::vector<int64_t> whole;
  std::string heads_kept;
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const auto heads = model.attention_kernel(l)->softmax_heads(s.n_head);
    converted = converted || static_cast<int64_t>(heads.size()) < s.n_head;
    for (auto h : heads) kept.emplace_back(l, h);
    if (static_cast<int64_t>(heads.size()) == s.n_head) whole.push_back(l);
    else
      for (auto h : heads) heads_kept += (heads_kept.empty() ? "" : ",") + std::to_string(l) + "." + std::to_string(h);
  }
  MIMIC_CHECK(converted, o.model_dir, ": every head runs softmax; --freeze-kept-heads keeps the heads a conversion kept (convert a model first)");
  // an all-converted model was told its kept heads "do not train with --train all (the kernels alone)" (helper-59)
  MIMIC_CHECK(!kept.empty(), o.model_dir, ": no head runs softmax (every layer converted, no head kept): --freeze-kept-heads has nothing to "
              "keep; leave it out");
  auto params = model.module().named_parameters();
  std::map<std::string, at::Tensor> masks;  // 1 where the parameter trains, 0 in a kept head's block
  for (const auto& [l, h] : kept) {
    for (const auto& slice : s.family->head_slices({s.d_model, s.n_head, s.n_kv_head, s.head_dim, s.qkv_bias}, l, h)) {
      auto* param = params.find(slice.name);
      MIMIC_CHECK(param != nullptr, "--freeze-kept-heads: the model has no parameter ", slice.name);
      auto& mask = masks[slice.name];
      if (!mask.defined()) mask = torch::ones_like(*param);
      mask.narrow(slice.dim, slice.start, slice.length).zero_();
    }
  }
  std::vector<std::tuple<at::Tensor, at::Tensor, at::Tensor>> frozen;  // parameter, mask, value as loaded
  for (const auto& entry : masks) {
    auto param = params[entry.first];
    const at::Tensor mask = entry.second;
    if (!param.requires_grad()) continue;  // not trained in this run: nothing to freeze
    param.register_hook([mask](const at::Tensor& grad) { return grad * mask; });
    frozen.emplace_back(param, mask.to(torch::kBool), param.detach().clone());
  }
  // a flag that holds nothing was reported as taking effect (and entered the fingerprint: helper-55's probe)
  MIMIC_CHECK(!frozen.empty(), "--freeze-kept-heads: the kept heads' projections do not train with --train ", train_set_name(o.effective_train_set()),
              " (the kernels alone): they stay as loaded without it; leave it out");
  p.frozen_heads = static_cast<int64_t>(kept.size());
  // every head that computes softmax stays as loaded, a layer the conversion left whole too: said, with the heads,
  // since "kept heads frozen" alone read as the conversion's kept heads only (helper-59's probe of 2026-12-04)
  if (o.note && train::writes_outputs()) {
    std::string what;
    if (!whole.empty()) {
      std::string layers;
      for (auto l : whole) layers += (layers.empty() ? "" : ",") + std::to_string(l);
      what = "every head of layer" + std::string(whole.size() > 1 ? "s " : " ") + layers + " (not converted)";
    }
    if (!heads_kept.empty()) what += (what.empty() ? "" : " and ") + heads_kept + " (kept by the conversion)";
    o.note(detail::concat("--freeze-kept-heads: ", kept.size(), " softmax head", kept.size() == 1 ? "" : "s", " stay as loaded: ", what));
  }
  p.after_step = [frozen]() {
    torch::NoGradGuard no_grad;
    for (const auto& [param, trains, loaded] : frozen) param.copy_(torch::where(trains, param, loaded));
  };
}

}  // namespace

std::string freeze_embeddings_refusal(const FinetuneOptions& o, bool holds_nothing) {
  if (!o.freeze_embeddings || (o.effective_train_set() == TrainSet::All && !holds_nothing)) return "";
  return std::string("--freeze-embeddings: the embeddings do not train with --train ") + train_set_name(o.effective_train_set()) +
         (o.lora.rank > 0 ? " + LoRA" : "") + ": they stay as loaded without it; leave it out";
}

Prepared prepare(std::unique_ptr<models::Model> model, const FinetuneOptions& o) {
  if (const auto refusal = freeze_embeddings_refusal(o); !refusal.empty()) fail(refusal);
  Prepared p;
  LoraModel* lora = nullptr;
  if (o.lora.rank > 0) {
    auto wrapped = std::make_unique<LoraModel>(std::move(model), o.lora, o.seed + 1);
    lora = wrapped.get();
    p.model = std::move(wrapped);
  } else {
    p.model = std::move(model);
  }
  const TrainSet set = o.effective_train_set();
  const models::Family& family = *p.model->summary().family;
  int64_t embeddings = 0, embeddings_held = 0, kernel_tensors = 0;
  bool head = false;
  for (const auto& param : p.model->module().named_parameters()) {
    const auto& name = param.key();
    if (is_kernel_parameter(name)) ++kernel_tensors;
    bool train = is_classifier_head(name) || set == TrainSet::All ||
                 (set == TrainSet::Attention && (family.is_attention_projection(name) || is_kernel_parameter(name))) ||
                 (set == TrainSet::FeatureMaps && is_kernel_parameter(name));
    if (lora && lora->adapts(name)) train = false;
    if (o.freeze_embeddings && family.is_embedding(name)) {
      embeddings_held += train;
      train = false;
      ++embeddings;
    }
    param.value().set_requires_grad(train);
    head = head || (train && is_classifier_head(name));
    if (train)
      p.trainable.emplace_back(name, param.value());
    else
      ++p.frozen;
  }
  MIMIC_CHECK(!o.freeze_embeddings || embeddings > 0, o.model_dir, ": no embedding tensors to freeze");
  // with LoRA (or --train attention|feature-maps) the embeddings do not train: the flag held nothing, yet was reported
  // as "embeddings frozen" and entered the fingerprint (helper-55's probe of 2026-12-04)
  if (const auto refusal = freeze_embeddings_refusal(o, embeddings_held == 0); !refusal.empty()) fail(refusal);
  // A classifier's head trains whatever --train says: on a model without kernels, --train feature-maps trained the
  // head alone without a word (the fourth probe of 2026-11-27)
  MIMIC_CHECK(set != TrainSet::FeatureMaps || kernel_tensors > 0 || lora, o.model_dir, ": nothing to train with --train feature-maps "
              "(the model has no linear-attention kernels: convert it first, or use --train all|attention)");
  if (o.freeze_kept_heads) freeze_kept_heads(p, o);
  p.save.dtype = o.export_dtype;
  if (lora)
    for (auto& t : lora->lora_parameters()) p.trainable.push_back(t);
  // Converted models keep their history in mimic.json: this run joins it.
  p.trainable_described = describe_trainable(o, kernel_tensors > 0, head);
  for (const auto& t : p.trainable) p.trainable_parameters += t.second.numel();
  nlohmann::json run = {{"from", o.model_dir}, {"train", p.trainable_described}, {"steps", o.train.steps}, {"lr", o.train.lr}};
  p.model->provenance()["finetuning"].push_back(run);
  MIMIC_CHECK(!p.trainable.empty(), o.model_dir, ": nothing to train with --train ", train_set_name(set));
  return p;
}

void bind(train::TrainTask& task, Prepared& p) {
  task.params = p.trainable;
  task.after_step = p.after_step;
  task.set_training = [&p](bool on) { p.model->module().train(on); };
  task.export_model = [&p](const std::string& dir) { p.model->save(dir, p.save); };
  task.out_is_model = true;  // one run's result per folder
}

Teacher load_teacher(const FinetuneOptions& o, models::Model& student, const std::string& what_it_means) {
  if (o.teacher_dir.empty()) return {};
  // Built without touching the run's random numbers: a module's default initialisation (overwritten by the weights)
  // draws from the global generator that dropout then draws from, so a classifier trained beside a teacher was
  // another model than the same seed's without one (helper-55's probe of 2026-12-04).
  auto generator = at::detail::getDefaultCPUGenerator();
  const auto random_state = generator.get_state();
  Teacher teacher{models::load_model(o.teacher_dir, o.device), ""};
  generator.set_state(random_state);
  auto& m = *teacher.model;
  const auto t = m.summary(), s = student.summary();
  MIMIC_CHECK(t.family == s.family && t.vocab_size == s.vocab_size, "teacher ", o.teacher_dir, " (", t.model_type,
              ", vocabulary ", t.vocab_size, ") does not match the model (", s.model_type, ", vocabulary ", s.vocab_size, ")");
  m.module().eval();
  teacher.digest = models::model_digest(m);
  // A converted model's teacher is known by its digest (mimic.json): another --teacher is allowed — a larger model of
  // the same tokenizer is a teacher too — but said at once, as a mix-up costs a whole run without a sign (helper-50's
  // probe of 2026-12-04: a second pretrain of the same shape trained without a word).
  if (o.note && train::writes_outputs())
    if (const auto other = models::other_teacher(models::conversion_teachers(student), o.model_dir, m, teacher.digest, o.teacher_dir); !other.empty())
      o.note(other + ": " + what_it_means);
  return teacher;
}

nlohmann::json fingerprint(const FinetuneOptions& o) {
  const auto& t = o.train;
  nlohmann::json j = {{"model", path_identity(o.model_dir)},     {"seed", o.seed},
                      {"steps", t.steps},         {"lr", t.lr},
                      {"warmup", t.warmup},       {"grad_accum", t.grad_accum},
                      {"weight_decay", t.adam.weight_decay}, {"min_lr_ratio", t.min_lr_ratio},
                      {"train", train_set_name(o.effective_train_set())}};
  // A frozen run's checkpoint holds parameters and optimizer moments of the trainable tensors only and
  // never resumes an unfrozen run.
  if (o.freeze_embeddings) j["freeze_embeddings"] = true;
  // a run resumes where its random generators are: a GPU run's dropout draws from the GPU's generator
  if (!computes_on_cpu(o.device)) j["device"] = c10::DeviceTypeName(o.device.type(), /*lower_case=*/true);
  if (o.freeze_kept_heads) j["freeze_kept_heads"] = true;
  if (o.lora.rank > 0) j["lora"] = {{"rank", o.lora.rank}, {"scale", o.lora.scale()}};
  // the exported weights' storage (absent at the default F32: older runs still resume): a finished run rerun with
  // another --dtype said "model written" over weights still in the old type (the probe of 2026-11-27)
  if (o.export_dtype != std::optional<io::DType>(io::DType::F32))
    j["dtype"] = o.export_dtype ? std::string(io::dtype_name(*o.export_dtype)) : std::string("as loaded");
  return j;
}

nlohmann::json fingerprint_defaults() {
  return {{"freeze_embeddings", false}, {"freeze_kept_heads", false}, {"device", "cpu"}, {"dtype", io::dtype_name(io::DType::F32)}};
}

void add_weight_digests(nlohmann::json& fp, models::Model& model, const Teacher& teacher, bool distils, const std::string& model_dir,
                        const std::string& teacher_dir) {
  fp["model_digest"] = models::model_digest(model);
  fp["model_network"] = models::network_description(model_dir);
  fp["model_attention"] = models::attention_digest(model);
  if (teacher.model && distils) {
    fp["teacher_digest"] = teacher.digest;
    // its config too: a rope_theta edit changes the teacher's logits, not its weights (the tenth probe)
    fp["teacher_network"] = models::network_description(teacher_dir);
  }
}

std::string describe_trainable(const FinetuneOptions& o, bool has_kernels, bool head) {
  std::ostringstream os;
  // LoRA's default set on a model without kernels holds nothing besides LoRA: "feature-maps + LoRA" claimed maps
  // that are not there (helper-74's probe of 2026-12-06)
  const bool lora_alone = o.lora.rank > 0 && !has_kernels && o.effective_train_set() == TrainSet::FeatureMaps;
  if (!lora_alone) os << train_set_name(o.effective_train_set()) << (o.lora.rank > 0 ? " + " : "");
  if (o.lora.rank > 0) os << "LoRA r=" << o.lora.rank << " scale=" << o.lora.scale();
  if (head && o.effective_train_set() != TrainSet::All) os << " + the classifier head";
  if (o.freeze_embeddings) os << ", embeddings frozen";
  if (o.freeze_kept_heads) os << ", kept heads frozen";
  return os.str();
}

}  // namespace mimic::finetune
