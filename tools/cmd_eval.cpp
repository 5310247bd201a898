// mimic eval — perplexity of a text or a corpus split under a causal LM (strided windows), or
// classification accuracy / F1 / MCC (--task cls), or passkey retrieval by context length (--task passkey).
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <algorithm>
#include <iostream>
#include <set>

#include "cli.h"
#include "mimic/core/error.h"
#include "mimic/eval/metrics.h"
#include "mimic/core/precision.h"
#include "mimic/core/words.h"
#include "mimic/data/token_cache.h"
#include "mimic/eval/copy.h"
#include "mimic/eval/passkey.h"
#include "mimic/eval/recall_accuracy.h"
#include "mimic/eval/perplexity.h"
#include "mimic/finetune/classify.h"
#include "mimic/models/config.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"
#include "mimic/models/tokenizer.h"
#include "mimic/train/trainer.h"
#include "ranges.h"

namespace mimic::cli {
namespace {

struct EvalArgs {
  Common common;
  Precision precision = Precision::Fp32;  // --precision: autocast around the whole evaluation
  std::string task = "lm", model, data, split = "test";
  std::optional<std::string> text, file;
  eval::PerplexityOptions ppl;
  int64_t seq_len = 0, batch_size = 32;  // seq_len 0: min(128, the model's context)
  std::string teacher;  // evaluated the same way, printed side by side
  bool lengths_given = false;  // --lengths on the command line (else the default lengths that fit the model)
  bool each_trial = false;     // --each-trial: passkey's JSON lists every trial
  eval::PasskeyOptions passkey;
  eval::CopyOptions copy;
  eval::RecallAccuracyOptions recall;
  // The teachers --model was converted from (models::conversion_teachers), read as it loads, for the note on another
  // --teacher when the teacher loads after it (load_evaluated); mutable as the evaluations take the arguments as given.
  mutable std::optional<std::vector<std::string>> converted_from;
};

// A model to evaluate, from `dir` (--model or --teacher). With --teacher, a converted model's own teacher is known by its
// digest (mimic.json): another is evaluated all the same — a larger model of the tokenizer is a fair reference — but
// said before the teacher's evaluation, as the ratios and "recall recovered" then compare with a model it did not come
// from (helper-50's probe of 2026-12-04; finetune --teacher says it too). --model loads first in every task.
std::unique_ptr<models::Model> load_evaluated(const EvalArgs& a, const std::string& dir) {
  auto model = models::load_model(dir, a.common.on);
  if (a.teacher.empty()) return model;
  if (!a.converted_from) {
    MIMIC_CHECK(dir == a.model, "internal: eval loaded --teacher before --model, so a foreign teacher would go without its note");
    a.converted_from = models::conversion_teachers(*model);
  } else if (!a.converted_from->empty() && dir != a.model) {
    const auto other = models::other_teacher(*a.converted_from, a.model, *model, models::model_digest(*model), dir);
    if (!other.empty()) print_note(other + ": " + models::kComparedWithAnotherTeacher);
  }
  return model;
}

// Whether --model and --teacher fit the task, from their config.json alone, before either runs: a BERT --teacher of
// --task mqar was refused after the model's whole evaluation, and not by its option (helper-58's probe of 2026-12-04).
void check_models_fit_task(const EvalArgs& a) {
  for (const auto& [option, dir] : {std::pair<std::string, const std::string*>{"--model", &a.model}, {"--teacher", &a.teacher}}) {
    if (dir->empty()) continue;
    if (a.task == "cls") {
      finetune::require_classifier_family(*dir, option);
      continue;
    }
    // (a folder without config.json is left to the model's loading, which says what such a folder is)
    const auto path = std::filesystem::path(*dir) / "config.json";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) continue;
    const auto config = models::load_config(path.string());
    MIMIC_CHECK(config.family->causal, option, " ", *dir, " is a ", config.family->display_name, " model: --task ", a.task,
                " needs a causal language model (", models::causal_family_names(), ")",
                config.head == models::Head::Cls ? " (a classifier: `mimic eval --task cls` scores it on labelled data)" : "");
  }
}

// Which text --task lm and copy score: one of --data and --text/--file (checked before any model loads: a usage error).
void check_text_given(const EvalArgs& a) {
  MIMIC_USAGE_CHECK(a.data.empty() || (!a.text && !a.file), "give --data (a corpus split) or --text/--file, not both");
  MIMIC_USAGE_CHECK(!a.data.empty() || a.text || a.file, "eval --task ", a.task,
                    ": give the text to score: --data (a corpus split, or your own text file or folder), --file or --text");
}

// The token ids --data (a corpus split) or --text/--file name, tokenized with `dir`'s tokenizer.
std::vector<int64_t> lm_ids(const EvalArgs& a, const text::Tokenizer& tok) {
  check_text_given(a);
  if (!a.data.empty()) {
    auto cache = data::corpus_token_cache(a.data, data::split_from_name(a.split), tok);
    return cache.ids();
  }
  // one document: opened as a token cache opens each (Llama's <s>; nothing for GPT-2), so the text is scored as
  // the model reads a text, and --text scores as --data does
  const auto text = read_text_input(a.text, a.file);
  // a file of blank space scored a perplexity of 150.8, an empty one "needs at least 2 tokens" without naming the file
  // (the probe of 2026-12-02); --data refuses such a document too
  // an empty --text is a command-line mistake (exit 2), as forward's and generate's are; a file's content is data
  const bool blank = text.find_first_not_of(" \t\r\n\f\v") == std::string::npos;
  const std::string why = std::string(" holds no text (") + (text.empty() ? "it is empty" : "blank space only") + "): nothing to score";
  if (a.text) MIMIC_USAGE_CHECK(!blank, "--text", why);
  MIMIC_CHECK(!blank, "--file ", a.file.value_or(""), why);
  auto ids = tok.encode_document(text);
  // "perplexity needs at least 2 tokens, the text has 1" named no option (the probe of 2026-12-02): the first token is
  // scored by none, so one token leaves nothing to predict
  MIMIC_CHECK(ids.size() >= 2, a.file ? "--file " + *a.file : std::string("--text"), " is ", count_of(static_cast<int64_t>(ids.size()), "token"),
              " long: a score needs at least 2 tokens (the first has nothing before it to be predicted from)");
  return ids;
}

// One model's result as JSON (perplexity, or classification metrics), with its attention description.
nlohmann::json eval_lm(const EvalArgs& a, const std::string& dir) {
  auto model = load_evaluated(a, dir);
  const auto tok = models::load_tokenizer(dir);
  auto options = a.ppl;
  options.unscored = tok->document_start();  // the opening of each document is the tokenizer's, not the text's
  auto r = eval::perplexity(*model, lm_ids(a, *tok), options);
  // a request cut to what the model allows is said so (the probe of 2026-11-27: --window 1000 ran at 512 silently),
  // once: a teacher of the same context said it again (helper-58's probe of 2026-12-04)
  static std::set<std::string> said;
  auto note_once = [](const std::string& s) {
    if (said.insert(s).second) print_note(s);
  };
  if (a.ppl.window > r.window)
    note_once("--window " + std::to_string(a.ppl.window) + ": the model's context is " + std::to_string(r.window) + " tokens; the windows have " +
              std::to_string(r.window));
  if (a.ppl.stride > r.stride)
    note_once("--stride " + std::to_string(a.ppl.stride) + ": each window scores every token but its first, so windows overlap by one at "
              "least: the stride is " + count_of(r.stride, "token", "tokens"));
  nlohmann::json j = {{"perplexity", r.perplexity}, {"nll", r.nll},         {"tokens", r.tokens},
                      {"predicted", r.predicted},   {"windows", r.windows}, {"window", r.window}, {"stride", r.stride}, {"seconds", r.seconds},
                      {"tokens_per_second", r.seconds > 0 ? r.predicted / r.seconds : 0.0},
                      {"attention", models::attention_summary(*model)}};
  // the NLL's 95% interval by windows (eval::PerplexityResult::nll_ci95), and the perplexity's from it
  if (std::isfinite(r.nll_ci95)) {
    j["nll_ci95"] = r.nll_ci95;
    j["perplexity_ci95"] = {std::exp(r.nll - r.nll_ci95), std::exp(r.nll + r.nll_ci95)};
  }
  if (!a.data.empty()) j["data"] = a.data + ":" + a.split;
  else if (a.file) j["file"] = *a.file;  // what was scored, as --data's "data" says it (helper-94's probe)
  return j;
}

// `model_length`: scoring a --teacher, the length the model was scored at, which the teacher reads too (each at its own
// stored length compared a converted classifier finetuned at 128 with its shipped teacher at 256: helper-85's review)
nlohmann::json eval_cls(const EvalArgs& a, const std::string& dir, int64_t model_length = 0) {
  MIMIC_USAGE_CHECK(!a.data.empty(), "--task cls needs --data (spam, sotu-era or a JSON-lines file)");
  // (the family was checked for both models before either ran: check_models_fit_task)
  auto data = data::load_classification(a.data);
  if (dir == a.model && data.conflicting_texts > 0) print_note(data.conflict_note() + ": each row keeps its own label");
  auto tok = models::load_tokenizer(dir);
  auto model = load_evaluated(a, dir);
  auto s = model->summary();
  MIMIC_CHECK(s.head == "cls", dir, " is not a classifier (head '", s.head, "'): finetune it with mimic finetune --task cls");
  // the model's label2id decides which output is which label
  data::align_labels(data, s.labels, s.num_labels, dir, "it scores only those: give data labelled with them (a classifier for these labels is "
                     "finetuned from a model without one)");
  MIMIC_CHECK(s.num_labels == static_cast<int64_t>(data.labels.size()), dir, " has ", s.num_labels, " labels, ", a.data, " has ",
              data.labels.size());
  const auto& examples = data.split(data::split_from_name(a.split));
  // "no examples to evaluate" named neither the file nor the split (the probe of 2026-12-02)
  MIMIC_CHECK(!examples.empty(), a.data, " has no examples in the ", a.split, " split: give another --split (a JSON-lines file's rows ",
              "say theirs with \"split\"; rows without one go 90/5/5 by a hash of their text)");
  // A classifier scored on the very file it was finetuned on, whose examples are others now (its run's checkpoint keeps
  // the data's identity and digest). Before 2026-12-02 rows without "split" were placed by a hash of the path as typed
  // and the line, so under today's rule (their text) some rows the run trained on may now be test rows: said so. A
  // file edited since under today's rule keeps each such row where it was; only a row whose own "split" changed moved.
  const auto fp = train::model_run_fingerprint(dir);
  const auto str = [&fp](const char* key) { return fp.contains(key) && fp[key].is_string() ? fp[key].get<std::string>() : std::string(); };
  if (str("task") == "cls" && str("data") == data::data_identity(a.data) && !str("data_digest").empty() && str("data_digest") != data.digest()) {
    if (data.split_by_text > 0 && str("split_by") != "text")
      std::fprintf(stderr, "mimic: note: %s was finetuned on %s when mimic placed rows without \"split\" by the path and line (before "
                   "2026-12-02; now by their text), or when the file held other rows: some of the %s examples scored may be ones it "
                   "trained on (give the rows their \"split\", or finetune again)\n", dir.c_str(), a.data.c_str(), a.split.c_str());
    else
      std::fprintf(stderr, "mimic: note: %s changed since %s was finetuned on it: the scores are of the file as it is now (a row "
                   "without \"split\" stays in the split its text gives; one whose \"split\" changed may have been trained on)\n",
                   a.data.c_str(), dir.c_str());
  }
  // A classifier is scored at the length it was finetuned at unless --seq-len says otherwise: the default 128 scored
  // one finetuned at 256 on shorter texts than it learnt from, without a word (spam: accuracy 0.839 for 0.849, helper-69's
  // probe). A run's fingerprint keeps it (128 for a run given no --seq-len, whatever its context: capped by the
  // context); so does the config.json of a classifier finetuned since 2026-12-06 and of the shipped ones, wherever its
  // files are copied (helper-81's probe: the shipped classifiers were scored at 128 unless --seq-len 256 was given).
  const bool has_run_length = str("task") == "cls" && fp.contains("seq_len") && fp["seq_len"].is_number_integer();
  const int64_t stored = has_run_length ? fp["seq_len"].get<int64_t>() : s.classifier_seq_len;  // 0: neither says
  // three cases: a teacher reads at the length its model was scored at (within its own context); a model given no
  // --seq-len at its stored length; otherwise --seq-len (0: the default)
  const bool teacher = a.seq_len == 0 && model_length > 0;
  const bool trained_length = a.seq_len == 0 && !teacher && stored > 0;
  const int64_t asked = teacher ? std::min(model_length, s.max_positions) : trained_length ? std::min(stored, s.max_positions) : a.seq_len;
  const int64_t seq_len = finetune::example_length(asked, s.max_positions);
  if (trained_length && seq_len != finetune::example_length(0, s.max_positions))
    print_note("scoring at --seq-len " + std::to_string(seq_len) + ", the length " + dir + " was finetuned at (give --seq-len to choose another)");
  auto r = finetune::evaluate_classifier(*model, *tok, examples, s.num_labels, seq_len, a.batch_size);
  // the model's own (a --teacher scored beside it reads the same texts: said once)
  if (dir == a.model)
    if (const auto n = finetune::cut_texts_note(r.cut, r.metrics.n, "texts of " + a.data + ":" + a.split, seq_len, s.max_positions); !n.empty())
      print_note(n);
  return {{"data", a.data + ":" + a.split}, {"n", r.metrics.n},   {"accuracy", r.metrics.accuracy},
          {"seq_len", seq_len}, {"cut", r.cut},
          {"f1", r.metrics.f1},             {"mcc", r.metrics.mcc}, {"loss", r.loss},
          {"confusion", r.metrics.confusion}, {"labels", data.labels}, {"attention", models::attention_summary(*model)},
          // which class F1 is of, in the JSON too (the text alone said it: helper-81's probe)
          {"f1_of", eval::f1_of(data.labels)}};
}

void print_one(const EvalArgs& a, const nlohmann::json& j) {
  if (a.task == "cls") {
    // which class F1 is of, as the JSON's f1_of says (eval/metrics.h)
    const auto f1 = eval::f1_name(j["labels"].get<std::vector<std::string>>());
    std::printf("%s  n=%lld  accuracy %.4f  %s %.4f  MCC %.4f  loss %.4f\n", j["data"].get<std::string>().c_str(),
                static_cast<long long>(j["n"].get<int64_t>()), j["accuracy"].get<double>(), f1.c_str(), j["f1"].get<double>(),
                j["mcc"].get<double>(), j["loss"].get<double>());
  } else {
    std::printf("tokens %lld (predicted %lld, %s)  perplexity %.4f  (evaluated at %.1f tok/s)\n",
                static_cast<long long>(j["tokens"].get<int64_t>()), static_cast<long long>(j["predicted"].get<int64_t>()),
                count_of(j["windows"].get<int64_t>(), "window").c_str(), j["perplexity"].get<double>(), j["tokens_per_second"].get<double>());
    if (j.contains("perplexity_ci95"))
      std::printf("perplexity 95%% interval %.2f to %.2f (the windows as independent samples of the text; neighbours share some)\n",
                  j["perplexity_ci95"][0].get<double>(), j["perplexity_ci95"][1].get<double>());
    if (j["predicted"].get<int64_t>() < 2000) std::printf("(few tokens: perplexity over so short a text varies much from one text to another)\n");
  }
}

// What the numbers rest on: the tokens (lm) or examples (cls) scored, and a warning when they are few.
void print_scored(const EvalArgs& a, const nlohmann::json& j) {
  if (a.task == "cls") {
    const auto n = j["n"].get<int64_t>();
    std::printf("scored %lld examples of %s%s\n", static_cast<long long>(n), j["data"].get<std::string>().c_str(),
                n < 200 ? " (few: one example moves accuracy by more than half a point)" : "");
  } else {
    const auto n = j["predicted"].get<int64_t>();
    std::printf("scored %lld tokens in %s%s\n", static_cast<long long>(n), count_of(j["windows"].get<int64_t>(), "window").c_str(),
                n < 2000 ? " (few: perplexity over so short a text varies much from one text to another)" : "");
  }
}

// --teacher: the same evaluation of both models, side by side, with the student's metric relative to the teacher's.
void print_side_by_side(const EvalArgs& a, const nlohmann::json& student, const nlohmann::json& teacher) {
  std::vector<const char*> keys = a.task == "cls" ? std::vector<const char*>{"accuracy", "f1", "mcc", "loss"}
                                                  : std::vector<const char*>{"perplexity", "nll", "tokens_per_second"};
  std::printf("%-18s %14s %14s %10s\n", "", "model", "teacher", "ratio");
  for (const char* k : keys) {
    const double s = student[k].get<double>(), t = teacher[k].get<double>();
    // a ratio only of positive numbers: 0/0 printed 0.000x, and an MCC of -0.11 against 0.50 "-0.226x" (helper-52)
    if (s >= 0 && t > 0)
      std::printf("%-18s %14.4f %14.4f %9.3fx\n", k, s, t, s / t);
    else
      std::printf("%-18s %14.4f %14.4f %10s\n", k, s, t, "-");
  }
  // each perplexity's interval, as print_one says it of one model (the table dropped them: helper-58's probe)
  if (student.contains("perplexity_ci95") && teacher.contains("perplexity_ci95"))
    std::printf("perplexity 95%% interval: model %.2f to %.2f, teacher %.2f to %.2f (the windows as independent samples of the text)\n",
                student["perplexity_ci95"][0].get<double>(), student["perplexity_ci95"][1].get<double>(),
                teacher["perplexity_ci95"][0].get<double>(), teacher["perplexity_ci95"][1].get<double>());
  std::printf("model:   %s\nteacher: %s\n", student["attention"].get<std::string>().c_str(),
              teacher["attention"].get<std::string>().c_str());
  print_scored(a, student);
}

// --teacher beside a text's perplexity or copy gain: per-token numbers and copy segments compare only between models
// that read a text as the same tokens (the probe of 2026-12-01: a Llama 3 student of 128k tokens against a Mistral
// teacher of 32k printed a perplexity ratio of 3.9). Classification compares accuracies, whatever the tokens.
void check_teacher_reads_alike(const EvalArgs& a) {
  if (a.teacher.empty()) return;
  const auto m = models::load_tokenizer(a.model), t = models::load_tokenizer(a.teacher);
  MIMIC_CHECK(m->identity() == t->identity(), "--teacher ", a.teacher, " reads a text as other tokens than --model ", a.model, " (tokenizer ",
              t->identity(), ", the model's ", m->identity(), "): perplexity and copy gain compare only between models with one tokenizer");
}

void run(const EvalArgs& a) {
  if (a.task != "cls") {
    check_text_given(a);
    check_teacher_reads_alike(a);
  }
  auto one = [&](const std::string& dir) { return a.task == "cls" ? eval_cls(a, dir) : eval_lm(a, dir); };
  auto j = one(a.model);
  if (a.teacher.empty()) {
    if (a.common.json) return print_json(j);
    return print_one(a, j);
  }
  // a classifier's teacher reads the texts the model read, at its length (the model's stored one, where --seq-len is not given)
  auto t = a.task == "cls" ? eval_cls(a, a.teacher, j["seq_len"].get<int64_t>()) : one(a.teacher);
  const char* key = a.task == "cls" ? "accuracy" : "perplexity";
  nlohmann::json both = {{"model", j}, {"teacher", t}};
  both[std::string(key) + "_ratio"] = t[key].get<double>() > 0 ? nlohmann::json(j[key].get<double>() / t[key].get<double>()) : nlohmann::json();
  if (a.common.json) return print_json(both);
  print_side_by_side(a, j, t);
}

// --task copy: every segment scored once and repeated; the copy gain per model, and with --teacher the share
// of the teacher's gain the model keeps ("recall recovered").
nlohmann::json eval_copy(EvalArgs& a, const std::string& dir) {
  auto model = load_evaluated(a, dir);
  const auto tok = models::load_tokenizer(dir);
  // each run opens as a text does (a Llama's <s>), and is cut from the stream after the stream's own opening
  const auto opening = tok->document_start();
  // no --segment-len: 128, or what fits the model's context twice after the opening (a Llama of context 256 with its
  // <s> was refused at the default 128: the probe of 2026-12-01); the teacher then runs the model's length
  if (a.copy.segment_len == 0)
    a.copy.segment_len = std::min<int64_t>(128, (model->summary().max_positions - static_cast<int64_t>(opening.size())) / 2);
  auto o = a.copy;
  o.opening = opening;
  // the refusal of a text too short names which text (helper-68's probe: "the text has 2025 tokens" named no --data)
  const std::string text = !a.data.empty() ? "--data " + a.data + ": its " + a.split + " split" : a.file ? "--file " + *a.file : "--text";
  auto segments = eval::copy_segments(eval::without_opening(lm_ids(a, *tok), o.opening), o.segments, o.segment_len, text);
  auto r = eval::copy_eval(*model, segments, o);
  return {{"first_nll", r.first_nll}, {"second_nll", r.second_nll}, {"copy_gain", r.gain},
          {"copy_gain_ci95", r.gain_ci95}, {"copy_gain_sd", r.gain_sd}, {"seconds", r.seconds},
          {"attention", models::attention_summary(*model)}};
}

// A number of the JSON built here, or NaN where it holds null (a NaN, which nlohmann writes as null)
double number_or_nan(const nlohmann::json& v) { return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN(); }

void run_copy(EvalArgs& a) {
  check_text_given(a);
  check_teacher_reads_alike(a);
  const auto model = eval_copy(a, a.model);  // (it settles the segment length where none was given)
  nlohmann::json j = {{"task", "copy"}, {"segments", a.copy.segments}, {"segment_len", a.copy.segment_len},
                      {"scored_per_copy", a.copy.segment_len - 1}};
  if (!a.data.empty()) j["data"] = a.data + ":" + a.split;
  else if (a.file) j["file"] = *a.file;
  j["model"] = model;
  if (!a.teacher.empty()) {
    j["teacher"] = eval_copy(a, a.teacher);
    // A ratio to a gain that may be zero is noise: only a teacher gain above its own 95% interval divides.
    // (one segment gives no interval: null in the JSON)
    const double tg = j["teacher"]["copy_gain"].get<double>(), tci = number_or_nan(j["teacher"]["copy_gain_ci95"]);
    if (tg > tci) {
      j["recall_recovered"] = j["model"]["copy_gain"].get<double>() / tg;
    } else {
      j["recall_recovered"] = nullptr;
      char why[200];
      if (std::isnan(tci))
        std::snprintf(why, sizeof why, "n/a: one segment gives no interval, so the teacher's gain %.3f cannot be told from zero (give --segments 2 or more)", tg);
      else
        std::snprintf(why, sizeof why, "n/a: the teacher's gain %.3f ± %.3f is not significantly above zero", tg, tci);
      j["recall_recovered_note"] = why;
    }
  }
  if (a.common.json) return print_json(j);
  std::printf("in-context copy: %s of %lld tokens, each run as [A A]; NLL in nats/token over %lld tokens per copy\n",
              count_of(a.copy.segments, "segment").c_str(), static_cast<long long>(a.copy.segment_len),
              static_cast<long long>(a.copy.segment_len - 1));
  std::printf("%-8s %11s %11s %10s %12s\n", "", "first copy", "second copy", "copy gain", "95% CI");
  auto line = [](const char* name, const nlohmann::json& m) {
    const double ci = number_or_nan(m["copy_gain_ci95"]);
    char interval[32] = "n/a (1 segment)";
    if (!std::isnan(ci)) std::snprintf(interval, sizeof interval, "± %.3f", ci);
    std::printf("%-8s %11.3f %11.3f %10.3f     %s\n", name, m["first_nll"].get<double>(), m["second_nll"].get<double>(),
                m["copy_gain"].get<double>(), interval);
  };
  line("model", j["model"]);
  if (j.contains("teacher")) {
    line("teacher", j["teacher"]);
    if (j["recall_recovered"].is_null())
      std::printf("recall recovered (model gain / teacher gain): %s\n", j["recall_recovered_note"].get<std::string>().c_str());
    else
      std::printf("recall recovered (model gain / teacher gain): %.3f\n", j["recall_recovered"].get<double>());
    std::printf("model:   %s\nteacher: %s\n", j["model"]["attention"].get<std::string>().c_str(),
                j["teacher"]["attention"].get<std::string>().c_str());
  }
}

// --task mqar: accuracy on the queried keys of a recall task's split (--data mqar:... or ar:...).
nlohmann::json eval_recall(const EvalArgs& a, const data::RecallTaskSpec& spec, const std::string& dir) {
  auto model = load_evaluated(a, dir);
  auto o = a.recall;
  o.model_name = dir;  // named by its folder: eval_recall runs the model and its teacher
  if (a.data.empty()) {
    // the task no one named: said whose it is (helper-78's probe of 2026-12-06: "mq2: the task's seq_len 256 exceeds
    // the model's context of 128" for a model trained on mqar:vocab=64,seq_len=64,pairs=8, with --data left out)
    try {
      eval::check_recall_task(*model, spec, dir);
    } catch (const Error& e) {
      fail(e.what(), " (--data left out: ", spec.to_string(), ", the default task; give the task the model was trained on, --data mqar:vocab=V,seq_len=L,pairs=P)");
    }
  }
  auto r = eval::recall_accuracy(*model, spec, o);
  return {{"accuracy", r.accuracy}, {"accuracy_ci95", {r.lo, r.hi}}, {"correct", r.correct}, {"queries", r.queries},
          {"examples", r.examples}, {"seconds", r.seconds}, {"attention", models::attention_summary(*model)}};
}

void run_recall(EvalArgs& a) {
  const auto spec = data::RecallTaskSpec::parse(a.data.empty() ? "mqar" : a.data);
  a.recall.seed = a.common.seed;
  a.recall.split = data::split_from_name(a.split);
  nlohmann::json j = {{"task", spec.kind}, {"data", spec.to_string()}, {"split", a.split}, {"seed", a.recall.seed},
                      {"model", eval_recall(a, spec, a.model)}};
  if (!a.teacher.empty()) {
    j["teacher"] = eval_recall(a, spec, a.teacher);
    const double t = j["teacher"]["accuracy"].get<double>();
    j["accuracy_ratio"] = t > 0 ? nlohmann::json(j["model"]["accuracy"].get<double>() / t) : nlohmann::json();  // 0/0 is no ratio
  }
  if (a.common.json) return print_json(j);
  std::printf("%s (%s split): %lld examples, %lld queries\n", spec.to_string().c_str(), a.split.c_str(),
              static_cast<long long>(j["model"]["examples"].get<int64_t>()), static_cast<long long>(j["model"]["queries"].get<int64_t>()));
  auto line = [](const char* name, const nlohmann::json& m) {
    // Wilson's interval as its two ends (perplexity_ci95's form): not centred on the accuracy near 0 or 1
    std::printf("%-8s accuracy %.4f (95%% interval %.4f to %.4f)  (%s)\n", name, m["accuracy"].get<double>(),
                m["accuracy_ci95"][0].get<double>(), m["accuracy_ci95"][1].get<double>(), m["attention"].get<std::string>().c_str());
  };
  line("model", j["model"]);
  if (j.contains("teacher")) {
    line("teacher", j["teacher"]);
    // the JSON's ratio, in the text too (helper-58's probe: only --json had it)
    if (j["accuracy_ratio"].is_number()) std::printf("accuracy ratio (model / teacher): %.3f\n", j["accuracy_ratio"].get<double>());
    else std::printf("accuracy ratio (model / teacher): n/a (the teacher answered no query)\n");
  }
}

void run_passkey(EvalArgs& a) {
  MIMIC_USAGE_CHECK(a.teacher.empty(), "--teacher is not available with --task passkey: run the passkey evaluation on each model");
  MIMIC_USAGE_CHECK(!a.each_trial || a.common.json, "--each-trial lists the trials in the --json output: add --json");
  auto tok = models::load_tokenizer(a.model);
  auto model = models::load_model(a.model, a.common.on);
  a.passkey.seed = a.common.seed;
  a.passkey.each_trial = a.each_trial;
  if (!a.lengths_given) {
    // the default lengths the model's context holds, said so (a model of context 256 was refused at the default's 512:
    // the probe of 2026-12-01); lengths given on the command line are checked as given
    const auto s = model->summary();
    std::vector<int64_t> fit, left_out;
    for (int64_t l : a.passkey.lengths) (l <= s.max_positions ? fit : left_out).push_back(l);
    MIMIC_CHECK(!fit.empty(), "--lengths: the default lengths all exceed ", models::context_words(s), ": give shorter ones");
    if (!left_out.empty()) {
      std::string shown;
      for (int64_t l : left_out) shown += (shown.empty() ? "" : ",") + std::to_string(l);
      std::fprintf(stderr, "mimic: note: passkey lengths %s left out: beyond %s (give --lengths to choose)\n", shown.c_str(),
                   models::context_words(s).c_str());
    }
    a.passkey.lengths = fit;
  }
  auto r = eval::passkey_eval(*model, *tok, a.passkey);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows)
    rows.push_back({{"length", row.length},
                    {"trials", row.trials},
                    {"exact", row.exact},
                    {"exact_accuracy", row.exact_accuracy()},
                    {"ranked_first", row.ranked_first},
                    {"rank_accuracy", row.rank_accuracy()},
                    {"mean_rank", row.mean_rank},
                    {"gain_ranked_first", row.gain_ranked_first},
                    {"gain_rank_accuracy", row.gain_rank_accuracy()},
                    {"mean_key_gain", row.mean_key_gain},
                    {"mean_prompt_tokens", row.mean_prompt_tokens}});
  // every trial, on request: two prompts of up to the length per trial make a file that grows with trials × length,
  // so not in every run's (recipes keep theirs; helper-82's review)
  for (size_t i = 0; a.each_trial && i < r.rows.size(); ++i) {
    auto& each = rows[i]["each"] = nlohmann::json::array();
    for (const auto& t : r.rows[i].each)
      each.push_back({{"key", t.key}, {"depth", t.depth}, {"prompt_tokens", t.prompt_tokens}, {"rank", t.rank},
                      {"gain_rank", t.gain_rank}, {"answer", t.answer}, {"alternatives", t.alternatives}, {"decoy", t.decoy},
                      {"log_probs", t.log_probs}, {"decoy_log_probs", t.decoy_log_probs}, {"prompt", t.prompt},
                      {"decoy_prompt", t.decoy_prompt}});
  }
  // which attention answered, as every other task says (helper-58's probe: passkey alone did not)
  const auto attention = models::attention_summary(*model);
  if (a.common.json)
    return print_json({{"task", "passkey"}, {"digits", a.passkey.digits}, {"alternatives", a.passkey.alternatives},
                       {"chance", r.chance}, {"seed", a.passkey.seed}, {"seconds", r.seconds}, {"attention", attention}, {"rows", rows}});
  std::printf("passkey retrieval: %lld-digit keys, ranked against %lld alternatives (chance %.3f)\n",
              static_cast<long long>(a.passkey.digits), static_cast<long long>(a.passkey.alternatives), r.chance);
  std::printf("model: %s\n", attention.c_str());
  // the prompt's tokens beside its length, as docs/generate.md promises (helper-67's probe: --json alone had them)
  std::printf("%8s %7s %8s %13s %10s %18s %15s %14s\n", "length", "trials", "exact", "ranked first", "mean rank", "gain ranked first",
              "key gain nats", "prompt tokens");
  for (const auto& row : r.rows)
    std::printf("%8lld %7lld %8.3f %13.3f %10.2f %18.3f %15.3f %14.1f\n", static_cast<long long>(row.length), static_cast<long long>(row.trials),
                row.exact_accuracy(), row.rank_accuracy(), row.mean_rank, row.gain_rank_accuracy(), row.mean_key_gain, row.mean_prompt_tokens);
  std::printf("(%.1f s)\n", r.seconds);
}

}  // namespace

void register_eval(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  auto* sub = app.add_subcommand("eval", "Evaluate a model: LM perplexity (text, file or corpus split), in-context recall (copy, passkey, mqar) or classification metrics");
  sub->add_option("--model", args->model, "Model directory")->required()->transform(model_dir_arg());
  sub->add_option("--task", args->task, "lm (perplexity), cls (accuracy, F1, MCC), passkey (retrieval by context length), copy (in-context copy gain) or mqar (associative-recall accuracy; --data mqar:... or ar:...)")->capture_default_str()->check(CLI::IsMember({"lm", "cls", "passkey", "copy", "mqar"}));
  auto* file = sub->add_option("--file", args->file, "Text file to score (lm, copy)")->check(input_file_arg("a text file (--data takes a folder of .txt files)"));
  // "" refused while parsing, before the model loads, as forward's and generate's (blank space: lm_ids)
  auto* text = sub->add_option("--text", args->text, "Text to score (lm, copy)")->excludes(file)->check(range::non_empty_text("give the text to score, or --file FILE"));
  auto* data = sub->add_option("--data", args->data, "lm, copy: corpus all|sotu|moby-dick or your own text (a UTF-8 file or a folder of .txt files; --split picks its 90/5/5 part by position); cls: spam|sotu-era|FILE.jsonl; mqar: mqar[:...] or ar[:...]")
      ->check(data_arg())
      ->excludes(file)
      ->excludes(text);
  auto* split = sub->add_option("--split", args->split, "Split of --data: train, validation or test")->capture_default_str()->check(split_arg())->excludes(file)->excludes(text);
  auto* window = sub->add_option("--window", args->ppl.window, "lm: tokens per window (default: the model's context; a longer one is cut to it)")
                     ->transform(range::tokens(2));
  auto* stride = sub->add_option("--stride", args->ppl.stride, "lm: new tokens scored per window (default: window/2; at most window − 1, which a longer one is cut to: a window's first token has no context in it)")
                     ->transform(range::tokens(1));
  auto* seq_len = sub->add_option("--seq-len", args->seq_len, "cls: tokens per example, [CLS] and [SEP] included (default: the length the classifier was finetuned at, which its run's folder and its config.json keep — the embedded bert-mini-spam and bert-mini-sotu-era: 256 — else min(128, the model's context))")
                      ->transform(range::tokens(3));
  auto* batch_size = sub->add_option("--batch-size", args->batch_size, "cls: examples per batch")->capture_default_str()->transform(range::batch());
  sub->add_option("--teacher", args->teacher, "Also evaluate this model (e.g. the softmax teacher of a converted model) and print both side by side (lm, copy, mqar, cls; passkey: run it on each model)")
      ->transform(model_dir_arg());
  auto* lengths = sub->add_option("--lengths", args->passkey.lengths, "passkey: tokens per sequence (prompt + answer), e.g. 128,256,512")
      ->delimiter(',')
      ->default_str(typed_list(args->passkey.lengths))
      ->transform(range::tokens(1));
  auto* trials = sub->add_option("--trials", args->passkey.trials, "passkey: keys per length")
      ->capture_default_str()
      ->transform(range::integer(1, 100000));
  // a key of more than 18 digits does not fit the 64-bit integer it is drawn as
  auto* digits = sub->add_option("--digits", args->passkey.digits, "passkey: digits per key")
      ->capture_default_str()
      ->transform(range::integer(1, 18));
  auto* alternatives = sub->add_option("--alternatives", args->passkey.alternatives, "passkey: random wrong keys the true one is ranked against")
      ->capture_default_str()
      ->transform(range::integer(1, 10000));
  auto* segments = sub->add_option("--segments", args->copy.segments, "copy: segments of the text, evenly spaced")
      ->capture_default_str()
      ->transform(range::integer(1, 100000));
  args->copy.segment_len = 0;  // the model decides (eval_copy), as convert's probe does
  auto* segment_len = sub->add_option("--segment-len", args->copy.segment_len,
                                      "copy: tokens per segment (run doubled after the tokenizer's opening, so at most half the context "
                                      "left; default: 128, or that half where it is less)")
      ->transform(range::tokens(2));
  auto* examples = sub->add_option("--examples", args->recall.examples, "mqar: examples of the split to score")
      ->capture_default_str()
      ->transform(range::count(1));
  auto* each_trial = sub->add_flag("--each-trial", args->each_trial,
                                   "passkey, with --json: list every trial in its row's `each` (prompts, keys, alternatives, their "
                                   "log-likelihoods, ranks, the greedy answer), to check the scores with another implementation");
  add_precision_option(*sub, args->precision, args->common);
  add_common_options(*sub, args->common, Devices::Any);
  // The tasks each task-specific option serves: given to another task it is refused, never ignored.
  const std::vector<std::pair<CLI::Option*, std::vector<std::string>>> serves = {
      {file, {"lm", "copy"}},        {text, {"lm", "copy"}},      {window, {"lm"}},           {stride, {"lm"}},
      {seq_len, {"cls"}},            {batch_size, {"cls"}},       {lengths, {"passkey"}},     {trials, {"passkey"}},
      {digits, {"passkey"}},         {alternatives, {"passkey"}}, {segments, {"copy"}},       {segment_len, {"copy"}},
      {examples, {"mqar"}},          {each_trial, {"passkey"}},
      // passkey's filler text is its own: --data and --split were taken and ignored (helper-58's probe of 2026-12-04)
      {data, {"lm", "cls", "copy", "mqar"}}, {split, {"lm", "cls", "copy", "mqar"}}};
  sub->callback([args, serves, lengths]() {
    args->lengths_given = lengths->count() > 0;
    // a length twice gave two identical rows (--lengths 64,064: the fifth probe of 2026-11-27)
    const auto& ls = args->passkey.lengths;
    for (size_t i = 0; lengths->count() > 0 && i < ls.size(); ++i)
      MIMIC_USAGE_CHECK(std::find(ls.begin(), ls.begin() + static_cast<std::ptrdiff_t>(i), ls[i]) == ls.begin() + static_cast<std::ptrdiff_t>(i),
                        "--lengths names ", ls[i], " twice: give each length once");
    for (const auto& [opt, tasks] : serves)
      if (opt->count() > 0 && std::find(tasks.begin(), tasks.end(), args->task) == tasks.end()) {
        std::string list;
        for (const auto& t : tasks) list += (list.empty() ? "" : " or ") + t;
        MIMIC_USAGE_CHECK(false, opt->get_name(), " is for --task ", list, ", not ", args->task);
      }
    start(args->common);
    // bf16: the model's forward passes, its LM head included, under autocast (mimic/core/precision.h)
    AutocastGuard mixed(args->precision, args->common.on);
    check_models_fit_task(*args);
    if (args->task == "passkey") return run_passkey(*args);
    if (args->task == "copy") return run_copy(*args);
    if (args->task == "mqar") return run_recall(*args);
    run(*args);
  });
}

}  // namespace mimic::cli
