#include "mimic/finetune/classify.h"

#include <torch/torch.h>

#include <filesystem>
#include <optional>
#include <set>

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/core/precision.h"
#include "mimic/core/runtime.h"
#include "mimic/core/words.h"
#include "mimic/data/batches.h"
#include "mimic/data/classification.h"
#include "mimic/data/corpus.h"
#include "mimic/distributed/environment.h"
#include "mimic/io/output_lock.h"
#include "mimic/models/config.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"
#include "mimic/models/tokenizer.h"

namespace mimic::finetune {

namespace {

// The sequence length and batch size of a classification run or evaluation. [CLS] and [SEP] take two
// tokens, so a length below 3 leaves no text (and 0 made encode() write through ids.back() of an empty vector:
// heap corruption); a batch of 0 never advanced evaluate_classifier's loop.
void check_sizes(int64_t seq_len, int64_t batch_size) {
  MIMIC_CHECK(seq_len == 0 || seq_len >= 3, "--seq-len must be at least 3 for classification ([CLS] token [SEP]), got ", seq_len);
  MIMIC_CHECK(batch_size >= 1, "--batch-size must be at least 1, got ", batch_size);
}

}  // namespace

int64_t example_length(int64_t seq_len, int64_t context) {
  const int64_t n = seq_len != 0 ? seq_len : std::min<int64_t>(128, context);
  models::check_seq_len(n, context, /*context_note=*/"", 3, "[CLS] token [SEP]");  // BERT's context is its config's
  return n;
}

namespace {

struct Batch {
  models::ForwardInputs in;
  at::Tensor labels;
};

// Built on the CPU, then moved to `device` once; padded to the longest row, or to `length` where that is longer.
Batch make_batch(const std::vector<std::vector<int64_t>>& ids, const std::vector<int64_t>& labels, int64_t pad, c10::Device device,
                 size_t length = 0) {
  size_t t = length;
  for (const auto& x : ids) t = std::max(t, x.size());
  const int64_t b = static_cast<int64_t>(ids.size());
  auto input = torch::full({b, static_cast<int64_t>(t)}, pad, torch::kLong);
  auto mask = torch::zeros({b, static_cast<int64_t>(t)}, torch::kLong);
  for (int64_t i = 0; i < b; ++i) {
    const auto& x = ids[static_cast<size_t>(i)];
    input[i].slice(0, 0, static_cast<int64_t>(x.size())).copy_(torch::tensor(x, torch::kLong));
    mask[i].slice(0, 0, static_cast<int64_t>(x.size())).fill_(1);
  }
  Batch batch;
  batch.in.input_ids = input.to(device);
  batch.in.attention_mask = mask.to(device);
  batch.labels = torch::tensor(labels, torch::kLong).to(device);
  return batch;
}

}  // namespace

// One token past the room tells a cut text.
std::vector<int64_t> example_ids(const text::Tokenizer& tok, const std::string& text, int64_t seq_len, int64_t& cut) {
  MIMIC_CHECK(seq_len >= 3, "a classifier's example needs at least 3 tokens ([CLS] token [SEP]), got ", seq_len);
  const auto room = static_cast<size_t>(seq_len - 2);
  auto body = tok.encode_head(text, room + 1);
  if (body.size() > room) {
    body.resize(room);
    ++cut;
  }
  std::vector<int64_t> ids{tok.cls_id()};
  ids.insert(ids.end(), body.begin(), body.end());
  ids.push_back(tok.sep_id());
  return ids;
}

// A text the tokenizer reduces to nothing (control characters, NULs written as \u0000, U+00A0 and other spaces) was
// scored and trained on as [CLS] [SEP] without a word, as an empty text was until 2026-12-02 (helper-107's probe).
std::vector<int64_t> example_ids(const text::Tokenizer& tok, const data::Example& e, int64_t seq_len, int64_t& cut) {
  auto ids = example_ids(tok, e.text, seq_len, cut);
  MIMIC_CHECK(ids.size() > 2, e.doc_id.empty() ? std::string("an example") : e.doc_id,
              ": the text has no tokens (all of it is characters the tokenizer drops or reads as space: control characters, "
              "NULs, spaces): give each example its text, or leave the line out");
  return ids;
}

void require_classifier_tokenizer(const text::Tokenizer& tok, const std::string& where) {
  MIMIC_CHECK(tok.cls_id() >= 0 && tok.pad_id() >= 0 && tok.sep_id() >= 0, where, ": sequence classification needs a BERT tokenizer");
  // the ids are framed here, not by encode(text, true): a post-processor that adds other tokens would be read otherwise
  MIMIC_CHECK(tok.encode("", true) == std::vector<int64_t>({tok.cls_id(), tok.sep_id()}), where,
              ": sequence classification needs a tokenizer that frames a text as [CLS] text [SEP], as BERT's does; this one's "
              "post-processor adds other tokens");
}

ClassifyEval evaluate_classifier(models::Model& model, const text::Tokenizer& tok, const std::vector<data::Example>& examples,
                                 int64_t num_labels, int64_t seq_len, int64_t batch_size) {
  MIMIC_CHECK(!examples.empty(), "no examples to evaluate");
  require_classifier_tokenizer(tok, "the tokenizer");
  check_sizes(seq_len, batch_size);
  seq_len = example_length(seq_len, model.summary().max_positions);
  torch::NoGradGuard no_grad;
  std::vector<int64_t> predicted, truth;
  double loss = 0;
  int64_t cut = 0;
  const auto device = models::device_of(model);
  for (size_t i = 0; i < examples.size(); i += static_cast<size_t>(batch_size)) {
    std::vector<std::vector<int64_t>> ids;
    std::vector<int64_t> labels;
    for (size_t j = i; j < std::min(examples.size(), i + static_cast<size_t>(batch_size)); ++j) {
      ids.push_back(example_ids(tok, examples[j], seq_len, cut));
      labels.push_back(examples[j].label);
    }
    auto b = make_batch(ids, labels, tok.pad_id(), device);
    auto logits = float_or_wider(model.forward(b.in).logits);  // a bf16 forward's: the loss summed in float
    loss += torch::nn::functional::cross_entropy(logits, b.labels,
                                                 torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                .item<double>();
    const auto pred = host(logits.argmax(-1).to(torch::kLong));  // one copy per batch, not one read per example
    predicted.insert(predicted.end(), pred.data_ptr<int64_t>(), pred.data_ptr<int64_t>() + pred.numel());
    truth.insert(truth.end(), labels.begin(), labels.end());
  }
  return {eval::classification_metrics(predicted, truth, num_labels), loss / static_cast<double>(examples.size()), cut};
}

std::string cut_texts_note(int64_t cut, int64_t n, const std::string& what, int64_t seq_len, int64_t context) {
  if (cut == 0) return "";
  return detail::concat(cut, " of ", n, " ", what, (cut == 1 ? " is" : " are"), " longer than ", seq_len,
                        " tokens with [CLS] and [SEP]: each is read as its first ", seq_len - 1, " tokens and [SEP]",
                        seq_len < context ? detail::concat(" (a --seq-len up to ", context, ", the model's context, keeps more)") : std::string());
}

void require_classifier_family(const std::string& model_dir, const std::string& option) {
  const auto cfg = models::load_config((std::filesystem::path(model_dir) / "config.json").string());
  if (!cfg.family->classifier.architecture.empty()) return;
  std::string families;
  for (const models::Family* f : models::families())
    if (!f->classifier.architecture.empty()) families += (families.empty() ? "" : ", ") + f->display_name;
  fail(option.empty() ? "" : option + " ", model_dir, " is a ", cfg.family->display_name, " model, which has no sequence-classification head: mimic classifies with ",
       families, " models (bert-mini ships with mimic)");
}

ClassifyResult finetune_classifier(const ClassifyOptions& o) {
  check_sizes(o.seq_len, o.batch_size);  // before any file is read (0: the default, resolved below)
  torch::manual_seed(o.seed);  // dropout draws from the global generator: a run is a function of its seed
  require_classifier_family(o.model_dir);
  auto data = data::load_classification(o.data);
  MIMIC_CHECK(!data.train.empty() && !data.validation.empty(), "data set '", o.data, "' needs train and validation examples");
  if (o.note && train::writes_outputs() && data.conflicting_texts > 0) o.note(data.conflict_note() + ": each row keeps its own label");
  auto tok = models::load_tokenizer(o.model_dir);
  require_classifier_tokenizer(*tok, o.model_dir);
  // a classifier keeps its own labels: the data's ids follow its id2label, not the data's order
  const auto cfg = models::load_config((std::filesystem::path(o.model_dir) / "config.json").string());
  const int64_t seq_len = example_length(o.seq_len, cfg.max_positions);
  if (cfg.head == models::Head::Cls) data::align_labels(data, cfg.labels, cfg.num_labels, o.model_dir);
  MIMIC_CHECK(data.labels.size() >= 2, o.data, " has one label (", nlohmann::json(data.labels).dump(),
              "): a new classifier needs at least two (or start from a classifier whose id2label holds them)");
  if (cfg.head != models::Head::Cls && data.labels_are_ids) {  // ids 0 … the largest name ids the file need not use
    std::set<int64_t> held;
    for (const auto* part : {&data.train, &data.validation, &data.test})
      for (const auto& e : *part) held.insert(e.label);
    MIMIC_CHECK(held.size() >= 2, o.data, " holds one label (id ", *held.begin(), "): a new classifier needs at least two (or start "
                "from a classifier whose id2label holds them)");
  }
  // A label the validation or test rows hold and no train row does gets an output that never trains — said, as a
  // typo or a split by hand can cause it (helper-69's probe: a 3-way head from a label seen only in validation, exit 0).
  if (o.note && train::writes_outputs()) {
    std::set<int64_t> trained, scored;
    for (const auto& e : data.train) trained.insert(e.label);
    for (const auto* part : {&data.validation, &data.test})
      for (const auto& e : *part)
        if (!trained.count(e.label)) scored.insert(e.label);
    std::string names;
    for (int64_t l : scored) names += (names.empty() ? "" : ", ") + nlohmann::json(data.labels.at(static_cast<size_t>(l))).dump();
    if (!scored.empty())
      o.note(o.data + ": label" + (scored.size() == 1 ? " " : "s ") + names + " occur" + (scored.size() == 1 ? "s" : "") +
             " only in the validation or test rows: no train row teaches " + (scored.size() == 1 ? "its output" : "their outputs"));
  }
  models::LoadOptions lo;
  lo.head = "cls";
  lo.labels = data.labels;
  lo.classifier_seq_len = seq_len;  // kept in the saved model's config.json: eval's default length for it
  lo.seed = o.seed;
  lo.device = o.device;
  auto prepared = prepare(models::load_model(o.model_dir, lo), o);
  auto& model = prepared.model;
  const int64_t k = static_cast<int64_t>(data.labels.size());
  auto teacher = load_teacher(o, *model, models::kComparedWithAnotherTeacher);
  // The teacher is scored on the same rows with its own ids for the labels (its id2label, as eval --teacher reads it):
  // the same names in another order were refused here while eval took them (helper-52's probe of 2026-12-04).
  std::optional<data::ClassificationData> teacher_data;  // a copy of the rows only where there is a teacher
  if (teacher.model) {
    auto s = teacher.model->summary();
    MIMIC_CHECK(s.head == "cls" && s.num_labels == k, "teacher ", o.teacher_dir, " is not a classifier with the data's ", k,
                " labels (head '", s.head, "', ", s.num_labels, " labels)");
    teacher_data = data;
    data::align_labels(*teacher_data, s.labels, s.num_labels, "teacher " + o.teacher_dir, "a teacher must classify the data's labels");
  }

  // Tokenize the training set once; the order of examples is shuffled per epoch by (seed, epoch).
  std::vector<std::vector<int64_t>> train_ids;
  int64_t cut = 0;
  for (const auto& e : data.train) train_ids.push_back(example_ids(*tok, e, seq_len, cut));
  const int64_t n = static_cast<int64_t>(train_ids.size());
  int64_t epoch = 0, index = 0;
  std::vector<int64_t> order;
  int64_t order_epoch = -1;
  auto shuffle = [&]() {
    if (order_epoch == epoch) return;
    order = data::shuffled_order(n, o.seed, epoch);
    order_epoch = epoch;
  };

  const auto& env = distributed::environment();
  train::TrainTask task;
  bind(task, prepared);
  task.micro_batch_loss = [&]() {
    std::vector<std::vector<int64_t>> ids;
    std::vector<int64_t> labels;
    // Data parallelism: the global batch has --batch-size × ranks examples; this rank keeps its share.
    // Padded to the global batch's longest row: dropout draws its noise for the global batch's shape (BatchShare).
    const int64_t first = o.batch_size * env.rank;
    size_t longest = 0;
    for (int64_t i = 0; i < o.batch_size * env.world_size; ++i) {
      if (index >= n) {
        ++epoch;
        index = 0;
      }
      shuffle();
      int64_t ex = order[static_cast<size_t>(index++)];
      longest = std::max(longest, train_ids[static_cast<size_t>(ex)].size());
      if (i < first || i >= first + o.batch_size) continue;
      ids.push_back(train_ids[static_cast<size_t>(ex)]);
      labels.push_back(data.train[static_cast<size_t>(ex)].label);
    }
    auto b = make_batch(ids, labels, tok->pad_id(), o.device, longest);
    return torch::nn::functional::cross_entropy(float_or_wider(model->forward(b.in).logits), b.labels);
  };
  // Each rank scores its contiguous share of the validation set, [n·r/N, n·(r+1)/N). The engine averages the ranks'
  // numbers with equal weights while the shares may differ by one example, so a rank returns its share's summed loss
  // scaled by N/n: the average is then the mean over all n examples (as one process computes it, up to the
  // summation order). The reference, one process scoring all of it, is the same function with N = 1.
  task.evaluate = [&]() {
    const auto n_val = static_cast<int64_t>(data.validation.size());
    const int64_t begin = n_val * env.rank / env.world_size, end = n_val * (env.rank + 1) / env.world_size;
    if (begin == end) return 0.0;  // more ranks than examples: this one has none
    const std::vector<data::Example> share(data.validation.begin() + begin, data.validation.begin() + end);
    const double mean = evaluate_classifier(*model, *tok, share, k, seq_len, o.batch_size).loss;
    return mean * static_cast<double>(end - begin) * static_cast<double>(env.world_size) / static_cast<double>(n_val);
  };
  task.data_parallel = true;
  task.data_state = [&]() { return nlohmann::json{{"epoch", epoch}, {"index", index}}; };
  task.restore_data_state = [&](const nlohmann::json& j) {
    epoch = json_int(j, "epoch", "the data position", 0);
    index = json_int(j, "index", "the data position", 0);
  };

  train::TrainOptions t = o.train;
  t.tokens_per_micro_batch = o.batch_size * seq_len;
  t.fingerprint = fingerprint(o);
  t.fingerprint_defaults.update(fingerprint_defaults());
  add_weight_digests(t.fingerprint, *model, teacher, /*distils=*/false, o.model_dir, o.teacher_dir);
  // the length asked for (unset: 128), not the one used: a default run on a model of context under 128 begun before
  // the default was capped at the context resumes (the same examples either way: longer ones failed then)
  t.fingerprint.update({{"task", "cls"}, {"data", data::data_identity(o.data)}, {"data_digest", data.digest()}, {"seq_len", o.seq_len != 0 ? o.seq_len : int64_t{128}},
                        {"batch_size", o.batch_size}});
  // rows without "split" placed by their text (since 2026-12-02; by the path as typed and the line before): eval tells
  // a run under the old rule from a file edited since by this key (absent where every row says its split, so such runs
  // begun before the key resume)
  if (data.split_by_text > 0) t.fingerprint["split_by"] = "text";
  // Held until the model is promoted and scored: no other run may write this directory meanwhile.
  const auto lock = train::lock_run_output(t.out_dir);
  if (const auto note = cut_texts_note(cut, n, "training texts", seq_len, cfg.max_positions); !note.empty()) t.start_notes.push_back(note);
  // the texts the run scores, read as they will be (their heads alone) before any step: a text with no tokens among them
  // is refused now, not at the first evaluation, and their cut texts are said as the training texts' are (only those
  // were: helper-107's probe of 2026-12-07)
  for (const auto& [part, what] : {std::pair{&data.validation, "validation texts"}, std::pair{&data.test, "test texts"}}) {
    int64_t part_cut = 0;
    for (const auto& e : *part) example_ids(*tok, e, seq_len, part_cut);
    if (const auto note = cut_texts_note(part_cut, static_cast<int64_t>(part->size()), what, seq_len, cfg.max_positions); !note.empty())
      t.start_notes.push_back(note);
  }
  // a batch runs on into the next epoch's order: one step then holds an example more than once (helper-92's probe)
  if (const int64_t global = o.batch_size * env.world_size; global > n)
    t.start_notes.push_back(detail::concat("a batch of ", global, " examples is larger than the training split (", count_of(n, "row"),
                                           "): each step holds some rows more than once"));
  ClassifyResult r;
  r.trainable = prepared.trainable_described;
  r.trainable_parameters = prepared.trainable_parameters;
  r.labels = data.labels;
  r.train = train::train(task, t);
  if (r.train.stopped || !train::writes_outputs()) return r;
  // Metrics of the best model (by validation loss) as saved, which also becomes the output directory itself.
  train::promote_best(t.out_dir);
  auto score = [&](models::Model& m, const data::ClassificationData& d) {
    AutocastGuard mixed(t.precision, o.device);  // in the run's precision, as its evaluations were (finetune_lm's score)
    ClassifyScores s;
    s.validation = evaluate_classifier(m, *tok, d.validation, k, seq_len, o.batch_size).metrics;
    if (!d.test.empty()) s.test = evaluate_classifier(m, *tok, d.test, k, seq_len, o.batch_size).metrics;
    return s;
  };
  r.student = score(*models::load_model(t.out_dir, o.device), data);
  if (teacher.model) r.teacher = score(*teacher.model, *teacher_data);
  return r;
}

}  // namespace mimic::finetune
