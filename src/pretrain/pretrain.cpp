#include "mimic/pretrain/pretrain.h"

#include <torch/torch.h>

#include <optional>
#include <sstream>

#include "mimic/attention/kinds.h"
#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/core/paths.h"
#include "mimic/core/precision.h"
#include "mimic/core/words.h"
#include "mimic/data/batches.h"
#include "mimic/data/corpus.h"
#include "mimic/data/lm_source.h"
#include "mimic/data/recall_tasks.h"
#include "mimic/data/token_cache.h"
#include "mimic/distributed/environment.h"
#include "mimic/io/output_lock.h"
#include "mimic/models/config.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"
#include "mimic/models/tokenizer.h"
#include "mimic/train/lm.h"

namespace mimic::pretrain {

// sin/cos of position / 10000^(2i/d) in the even/odd columns (Vaswani et al. 2017), scaled to the given RMS.
static at::Tensor sinusoidal_table(int64_t positions, int64_t d, double rms) {
  auto pos = torch::arange(positions, torch::kDouble).unsqueeze(1);
  auto i = torch::arange(0, d, 2, torch::kDouble);
  auto angle = pos / torch::pow(10000.0, i / static_cast<double>(d));
  auto t = torch::zeros({positions, d}, torch::kDouble);
  t.slice(1, 0, d, 2).copy_(torch::sin(angle));
  t.slice(1, 1, d, 2).copy_(torch::cos(angle).slice(1, 0, d / 2));
  return (t * (rms * std::sqrt(2.0))).to(torch::kFloat);  // sin and cos have an RMS of 1/sqrt(2)
}

namespace {

std::string rng_to_string(const std::mt19937_64& rng) {
  std::ostringstream os;
  os << rng;
  return os.str();
}
void rng_from_string(std::mt19937_64& rng, const std::string& s) {
  std::istringstream is(s);
  is >> rng;
}

// Turns a packed block into BERT's [CLS] block [SEP] with MLM corruption.
struct MlmBatcher {
  const text::Tokenizer& tok;
  data::MlmMasking masking;
  std::mt19937_64 rng;

  data::LmBatch make(const data::LmBatch& packed) {
    const int64_t b = packed.input_ids.size(0);
    auto cls = torch::full({b, 1}, tok.cls_id(), torch::kLong);
    auto sep = torch::full({b, 1}, tok.sep_id(), torch::kLong);
    auto ids = torch::cat({cls, packed.input_ids, sep}, 1).contiguous();
    // never mask [CLS], [SEP] (incl. the document separators inside blocks) or [PAD]
    auto special = ids.eq(tok.cls_id()) | ids.eq(tok.sep_id()) | ids.eq(tok.pad_id());
    at::Tensor labels;
    data::mask_tokens(ids, labels, special, masking, rng);
    return {ids, labels, torch::ones_like(ids)};
  }
};

}  // namespace

void check_options(const PretrainOptions& o) {
  const auto& family = models::family(o.arch);
  MIMIC_CHECK(o.position_init == "normal" || o.position_init == "sinusoidal", "--position-init must be normal or sinusoidal, got '",
              o.position_init, "'");
  MIMIC_CHECK(o.position_scale > 0 && o.position_scale <= 10, "--position-scale must lie in (0, 10], got ", o.position_scale);
  MIMIC_CHECK(o.position_scale == 0.02 || o.position_init == "sinusoidal", "--position-scale sets the sinusoidal table's size: it needs --position-init sinusoidal");
  MIMIC_CHECK(o.position_init == "normal" || o.init.empty(),
              "--position-init sets up a fresh model's position table; --init continues a trained one");
  MIMIC_CHECK(o.position_init == "normal" || !family.position_table().empty(), "--position-init sinusoidal sets a learned position table; a ",
              family.display_name, " model has rotary positions instead");
  if (data::is_recall_task(o.corpus)) {
    MIMIC_CHECK(family.causal, "a recall task (", o.corpus, ") trains a causal LM: use a causal --arch (", models::causal_family_names(), ")");
    MIMIC_CHECK(o.init.empty(), "--init continues a prose model; a recall task trains a fresh one (give --config)");
  }
  // a BERT block is [CLS], the text's tokens, [SEP]: --seq-len 2 left no token (and was named as a batch size not
  // positive: helper-56's probe)
  MIMIC_CHECK(family.causal || o.seq_len == 0 || o.seq_len >= 3, "--seq-len ", o.seq_len, ": a ", family.display_name,
              " block is [CLS], the text's tokens and [SEP]: give at least 3");
}

train::TrainResult pretrain(const PretrainOptions& o) {
  // The family decides the objective: a causal family pretrains as a causal LM, a bidirectional one as a masked LM
  // ([CLS] block [SEP]).
  check_options(o);
  const auto& family = models::family(o.arch);
  const bool causal = family.causal;
  // A recall task replaces the corpus: its own vocabulary and sequence length, no tokenizer.
  const bool recall = data::is_recall_task(o.corpus);
  data::RecallTaskSpec task_spec;
  std::unique_ptr<text::Tokenizer> tok;
  std::string tok_dir;
  if (recall) {
    task_spec = data::RecallTaskSpec::parse(o.corpus);
  } else {
    MIMIC_CHECK(!o.init.empty() || !family.tokenizer_asset.empty(), "pretrain --arch ", o.arch, " on prose needs a tokenizer, and mimic fetches none for ",
                family.display_name, " models: train it on a recall task (mqar, ar: their own vocabulary), or --init from a model folder");
    tok_dir = o.init.empty() ? asset_path(family.tokenizer_asset) : o.init;
    tok = models::load_tokenizer(tok_dir);
  }

  torch::manual_seed(o.seed);
  std::unique_ptr<models::Model> model;
  if (o.init.empty()) {
    nlohmann::json config = o.config;
    MIMIC_CHECK(config.is_object(), o.config_source, " must hold a JSON object (HF config.json keys), got ", config.dump().substr(0, 60));
    // What pretrain sets itself: a different value in --config was replaced without a word (the probes of 2026-11-27:
    // vocab_size, model_type; of 2026-11-29: eos/bos_token_id 13 and architectures ["GPT2Model"] saved as 50256 and
    // the LM head), so a value given must be the one pretrain would set.
    auto set = [&](const char* key, const nlohmann::json& value, const std::string& whose) {
      MIMIC_CHECK(!config.contains(key) || config[key] == value, o.config_source, ": ", key, " ", config.value(key, nlohmann::json()).dump(),
                  " differs from ", whose, " ", value.is_string() ? value.get<std::string>() : value.dump(), ", which pretrain sets: leave ", key, " out");
      config[key] = value;
    };
    set("model_type", o.arch, "--arch");
    set("vocab_size", recall ? task_spec.vocab : tok->vocab_size(), recall ? "the task's" : "the tokenizer's");
    set("architectures", nlohmann::json::array({family.pretrain_architecture}), "the objective's");
    // the networks initialise with a standard deviation of 0.02 (GPT-2's and BERT's): another value was kept in
    // config.json and not used, and -1 or "x" were accepted (the eighth probe of 2026-11-29)
    set("initializer_range", 0.02, "the initialisation's");
    if (!causal) set("pad_token_id", tok->pad_id(), "the tokenizer's");
    if (causal && !recall) {
      // the token every training document opens with where the tokenizer opens a text (Mistral's <s>), else GPT-2's
      // custom: its end-of-text token begins the next text too
      const auto start = tok->document_start();
      if (start.empty()) set("bos_token_id", tok->eos_id(), "the tokenizer's end-of-text id");
      else set("bos_token_id", start.front(), "the token every training document opens with");
      set("eos_token_id", tok->eos_id(), "the tokenizer's end-of-text id");
    }
    // a key misspelt (n_iner, rope_thetha) trained a model of the family's default without a word (the probe of 2026-12-02)
    models::refuse_misspelt_keys(config, models::parse_config(config, o.config_source), o.config_source);
    model = models::create_model(config.dump(), tok_dir, /*fp16_storage=*/!recall, o.config_source);
  } else {
    model = models::load_model(o.init);
    const auto s = model->summary();
    MIMIC_CHECK(s.family == &family && s.head == (causal ? "lm" : "mlm"), "--init ", o.init, " is a ", s.model_type, " model with head '",
                s.head, "'; pretrain --arch ", o.arch, " continues only a ", family.display_name, causal ? " LM" : " masked-LM", " model");
  }
  if (o.position_init == "sinusoidal") {
    torch::NoGradGuard no_grad;
    auto table = model->module().named_parameters()[family.position_table()];
    table.copy_(sinusoidal_table(table.size(0), table.size(1), o.position_scale).to(table.dtype()));
  }
  const auto summary = model->summary();
  const int64_t ctx = summary.max_positions;
  // named by the family's own key and where it was read (the tenth probe: the prose case named neither)
  // (a window shorter than that key caps it: then the note says so, as context_words does)
  const std::string context_from = " (" + (summary.context_note.empty() ? family.context_key : summary.context_note) + " in " +
                                   (o.init.empty() ? o.config_source : o.init + "/config.json") + ")";
  // unless given, as long as the context allows, up to 256 (a config of a shorter context was refused the default:
  // helper-56's probe of 2026-12-04)
  const int64_t seq_len = o.seq_len > 0 ? o.seq_len : recall ? task_spec.seq_len : std::min<int64_t>(256, ctx);
  MIMIC_CHECK(seq_len <= ctx, recall ? "the task's seq_len " : "--seq-len ", seq_len, " exceeds the model's context of ", ctx, context_from,
              recall ? ": give a shorter task or a longer context" : "");
  // (check_options saw a given --seq-len hold [CLS] and [SEP]; the default is the context's, which may not)
  MIMIC_CHECK(causal || seq_len >= 3, "a ", family.display_name, " block is [CLS], the text's tokens and [SEP]: the model's context of ", ctx,
              context_from, " holds no token between them");
  if (o.attention != "softmax") {
    MIMIC_CHECK(o.init.empty(), "--attention trains a fresh model with that attention; to convert a trained one use distill + convert");
    for (int64_t l = 0; l < summary.n_layer; ++l)
      model->set_attention_kernel(l, attention::kernel_from_spec(o.attention, summary.n_head, summary.head_dim));
    model->provenance() = {{"pretrained", {{"attention", o.attention}, {"data", o.corpus}}}};
  }

  // initialised on the CPU (a seed gives the same start on any device), then moved once
  if (!o.device.is_cpu()) model->module().to(o.device);

  // BERT's blocks leave room for [CLS] and [SEP] (check_options saw --seq-len hold them).
  const int64_t block = causal ? seq_len : seq_len - 2;
  // Data parallelism: every rank draws the global batches of --batch-size × ranks rows (and their masks) and
  // trains on its share.
  const auto& env = distributed::environment();
  // (a recall task trains a fresh model, made of the task's vocabulary above: it fits)
  auto source = data::open_lm_source(o.corpus, {tok.get(), summary.vocab_size, "the new model"}, block, o.batch_size * env.world_size,
                                     o.seed, o.copy);
  data::MlmMasking masking;
  if (!causal) {
    masking.mask_id = tok->mask_id();
    masking.vocab_size = tok->vocab_size();
  }
  std::optional<MlmBatcher> mlm;
  if (!causal) mlm.emplace(MlmBatcher{*tok, masking, std::mt19937_64(o.seed + 1)});

  auto loss_of = [&](const data::LmBatch& raw, std::mt19937_64* eval_rng) {
    data::LmBatch b = raw;
    if (!causal) {
      if (eval_rng) {
        MlmBatcher fixed{*tok, masking, *eval_rng};
        b = fixed.make(raw);
        *eval_rng = fixed.rng;
      } else {
        b = mlm->make(raw);
      }
    }
    b = data::to_device(data::rows_of(b, env.rank, env.world_size), o.device);
    if (causal) return train::causal_lm_loss(*model, b);
    // Masked LM: the head runs only where a label exists (the same loss, ~7x less head compute).
    auto scored = b.labels.ne(-100);
    auto logits = float_or_wider(model->forward({b.input_ids, b.attention_mask, {}, scored}).logits);  // as lm_head_loss's
    return torch::nn::functional::cross_entropy(logits, b.labels.index({scored}));
  };

  train::TrainTask task;
  for (const auto& p : model->module().named_parameters()) task.params.emplace_back(p.key(), p.value());
  task.micro_batch_loss = [&]() { return loss_of(source->next(), nullptr); };
  task.evaluate = [&]() {
    // The same validation batches every time (BERT: the same masks too).
    std::mt19937_64 rng(777);
    return source->validation_mean(o.eval_batches, [&](const data::LmBatch& b) { return loss_of(b, &rng).item<double>(); });
  };
  task.set_training = [&](bool on) { model->module().train(on); };
  task.data_state = [&]() {
    auto j = source->position();
    if (mlm) j["mlm_rng"] = rng_to_string(mlm->rng);
    return j;
  };
  task.restore_data_state = [&](const nlohmann::json& j) {
    source->seek(j);
    if (mlm) rng_from_string(mlm->rng, json_string(j, "mlm_rng", "the data position"));
  };
  // float32, as trained: a model continued from half-precision weights (--init of an embedded model, stored F16)
  // kept their storage type on save
  task.export_model = [&](const std::string& dir) { model->save(dir, models::SaveOptions{io::DType::F32, {}}); };
  task.out_is_model = true;  // one run's result per folder
  task.data_parallel = true;

  train::TrainOptions t = o.train;
  t.tokens_per_micro_batch = o.batch_size * seq_len;
  t.fingerprint = {{"arch", o.arch},         {"config", o.config},         {"corpus", data::data_identity(o.corpus)},
                   {"seq_len", seq_len},   {"batch_size", o.batch_size}, {"seed", o.seed},
                   {"steps", t.steps},       {"lr", t.lr},                 {"warmup", t.warmup},
                   {"grad_accum", t.grad_accum}};
  // the document start is no target since 2026-12-02 (data::PackedBatches): a run begun before compared its losses
  // with a best validation loss that counted it, lower, so it is not resumed (helper-38's review)
  if (tok && !tok->document_start().empty()) t.fingerprint["document_start_target"] = false;
  if (!o.init.empty()) {
    t.fingerprint["init"] = models::model_digest(*model);
    // and what else makes it compute (finetune's model_network and model_attention): a resume, or a rank, with the
    // same weights under another config trained another network, exit 0 (the fifth probe of 2026-11-27)
    t.fingerprint["init_network"] = models::network_description(o.init);
    t.fingerprint["init_attention"] = models::attention_digest(*model);
  }
  if (const auto d = source->data_digest(); !d.empty()) t.fingerprint["data_digest"] = d;  // the text, not only its name
  t.fingerprint["eval_batches"] = o.eval_batches;  // what an evaluation averages (finetune's has it too)
  if (o.position_init != "normal") t.fingerprint["position_init"] = o.position_init;  // absent: older runs still resume
  t.fingerprint_defaults["position_init"] = "normal";
  if (o.position_scale != 0.02) t.fingerprint["position_scale"] = o.position_scale;
  if (o.copy.fraction > 0) {
    t.fingerprint["copy"] = {{"fraction", o.copy.fraction}, {"min_span", o.copy.min_span}, {"max_span", o.copy.max_span}};
    if (o.copy.copies != 1) t.fingerprint["copy"]["copies"] = o.copy.copies;  // absent for K = 1: older runs still resume
    if (o.copy.random_fraction > 0)  // likewise absent without random spans
      t.fingerprint["copy"]["random"] = {{"fraction", o.copy.random_fraction}, {"vocab", o.copy.random_vocab}};
  }
  if (o.attention != "softmax") {
    // what the spec resolves to, every option filled in, not its words: a default that changed between the run and
    // its resume (the hybrid's map, hedgehog until 2026-12-03) resumed the same words into another model without a
    // word (helper-47's review). Runs begun before this note are refused once, naming the difference.
    const auto& k = model->attention_kernel(0);
    t.fingerprint["attention"] = {{"kind", k->kind()}, {"options", k->config_json()}};
  }
  // the optimizer's settings, each absent at the command's default so that older runs still resume
  if (t.adam.weight_decay != kPretrainWeightDecay) t.fingerprint["weight_decay"] = t.adam.weight_decay;
  if (t.min_lr_ratio != train::TrainOptions{}.min_lr_ratio) t.fingerprint["min_lr_ratio"] = t.min_lr_ratio;
  // the values of those left out at their default, which a refused resume names ("the default 0.1 then, 0.05 now")
  t.fingerprint_defaults.update({{"position_scale", PretrainOptions{}.position_scale},
                                 {"attention", "softmax"},
                                 {"weight_decay", kPretrainWeightDecay},
                                 {"min_lr_ratio", train::TrainOptions{}.min_lr_ratio}});
  // Held until the model is promoted and scored: no other run may write this directory meanwhile.
  const auto lock = train::lock_run_output(t.out_dir);
  // said as the run begins, as finetune says it (helper-68's probe: after it)
  if (const auto n = clamped_note("--eval-batches", o.eval_batches, source->validation_batches(o.eval_batches), "the validation split holds"); !n.empty())
    t.start_notes.push_back(n);
  auto result = train::train(task, t);
  result.validation_batches = source->validation_batches(o.eval_batches);
  // The output directory itself becomes a model directory (the best checkpoint by validation loss).
  if (train::writes_outputs()) train::promote_best(t.out_dir);
  return result;
}

}  // namespace mimic::pretrain
