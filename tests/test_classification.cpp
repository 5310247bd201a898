// Classification data sets, metrics, and BERT finetuning end to end.
#include <torch/torch.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "mimic/core/paths.h"
#include "mimic/data/classification.h"
#include "mimic/eval/metrics.h"
#include "mimic/finetune/classify.h"
#include "mimic/models/model.h"
#include "mimic/text/tokenizer.h"
#include "test_util.h"

using namespace mimic;
using mimic::test::TempDir;

TEST(ClassificationMetrics, BinaryAndMultiClassByHand) {
  // truth 1 1 0 0 1 0 / predicted 1 0 0 1 1 0: TP 2, FN 1, FP 1, TN 2
  auto m = eval::classification_metrics({1, 0, 0, 1, 1, 0}, {1, 1, 0, 0, 1, 0}, 2);
  EXPECT_DOUBLE_EQ(m.accuracy, 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(m.f1, 2.0 * 2 / (2.0 * 2 + 1 + 1));
  EXPECT_NEAR(m.mcc, (2.0 * 2 - 1.0 * 1) / std::sqrt(3.0 * 3 * 3 * 3), 1e-12);  // (TP·TN − FP·FN)/sqrt(...)
  EXPECT_EQ(m.confusion, (std::vector<std::vector<int64_t>>{{2, 1}, {1, 2}}));
  // perfect and constant predictions
  EXPECT_DOUBLE_EQ(eval::classification_metrics({0, 1, 2, 2}, {0, 1, 2, 2}, 3).mcc, 1.0);
  auto c = eval::classification_metrics({0, 0, 0, 0}, {0, 1, 2, 2}, 3);
  EXPECT_DOUBLE_EQ(c.mcc, 0.0);
  EXPECT_DOUBLE_EQ(c.accuracy, 0.25);
  // 3 classes, by hand: confusion [[2,1,0],[0,1,1],[1,0,2]]: c=5, s=8, t=(3,2,3), p=(3,2,3)
  auto k = eval::classification_metrics({0, 0, 1, 1, 2, 0, 2, 2}, {0, 0, 0, 1, 1, 2, 2, 2}, 3);
  EXPECT_NEAR(k.mcc, (5.0 * 8 - (9 + 4 + 9)) / std::sqrt((64.0 - 22) * (64.0 - 22)), 1e-12);
  EXPECT_NEAR(k.f1, (2.0 * 2 / 6 + 2.0 * 1 / 4 + 2.0 * 2 / 6) / 3, 1e-12);  // macro-F1
  // the same rows under a 5-way head: classes 3 and 4 occur nowhere and are left out of the macro mean (they counted
  // as 0, giving 3/5 of it: helper-69's probe), as scikit-learn's f1_score(average="macro") leaves them out
  EXPECT_NEAR(eval::classification_metrics({0, 0, 1, 1, 2, 0, 2, 2}, {0, 0, 0, 1, 1, 2, 2, 2}, 5).f1, k.f1, 1e-12);
  // a class only predicted counts (F1 0), as one only in the labels does
  EXPECT_NEAR(eval::classification_metrics({0, 3}, {0, 1}, 4).f1, (1.0 + 0 + 0) / 3, 1e-12);
  // one class in the labels, all right: MCC is 0/0, reported as 0
  EXPECT_DOUBLE_EQ(eval::classification_metrics({2, 2, 2}, {2, 2, 2}, 3).mcc, 0.0);
  EXPECT_MIMIC_ERROR(eval::classification_metrics({0}, {0, 1}, 2), "1 predictions for 2 labels");
}

namespace {
void expect_document_disjoint(const data::ClassificationData& d) {
  std::map<std::string, int> where;
  int s = 0;
  for (const auto* split : {&d.train, &d.validation, &d.test}) {
    for (const auto& e : *split) {
      auto [it, fresh] = where.emplace(e.doc_id, s);
      EXPECT_EQ(it->second, s) << e.doc_id << " is in two splits";
    }
    ++s;
  }
}
}  // namespace

TEST(ClassificationData, SpamHasRealLabelsAndFixedSplits) {
  auto d = data::load_classification("spam");
  EXPECT_EQ(d.labels, (std::vector<std::string>{"ham", "spam"}));
  std::map<int64_t, int64_t> counts;
  int64_t with_header_lines = 0;
  for (const auto* split : {&d.train, &d.validation, &d.test})
    for (const auto& e : *split) {
      counts[e.label]++;
      EXPECT_NE(e.text.rfind("Return-Path", 0), 0u) << "headers are stripped";
      with_header_lines += e.text.find("Received: from") != std::string::npos;  // only quoted/forwarded mail
    }
  EXPECT_LT(with_header_lines, 300);
  EXPECT_EQ(counts[0], 4150);  // easy-ham-1 2500 + easy-ham-2 1400 + hard-ham-1 250
  EXPECT_EQ(counts[1], 1896);  // spam-1 500 + spam-2 1396
  EXPECT_GT(d.validation.size(), 200u);
  EXPECT_GT(d.test.size(), 200u);
  expect_document_disjoint(d);
}

TEST(ClassificationData, SotuErasAreBalancedAndSplitByAddress) {
  auto d = data::load_classification("sotu-era");
  ASSERT_EQ(d.labels.size(), 4u);
  std::map<int64_t, double> counts;
  double total = 0;
  for (const auto* split : {&d.train, &d.validation, &d.test})
    for (const auto& e : *split) {
      counts[e.label]++;
      total++;
      EXPECT_GE(std::count(e.text.begin(), e.text.end(), ' ') + 1, 100) << "passages hold at least 100 words";
    }
  EXPECT_GT(total, 14000);
  for (auto& [label, n] : counts) EXPECT_NEAR(n / total, 0.25, 0.03) << d.labels[label];
  expect_document_disjoint(d);
}

TEST(ClassificationData, JsonLinesFilesAndErrors) {
  TempDir dir;
  mimic::test::write_bytes(dir.file("d.jsonl"),
                           "{\"text\": \"a\", \"label\": \"pos\", \"split\": \"train\"}\n\n"
                           "{\"text\": \"b\", \"label\": \"neg\", \"split\": \"validation\"}\n"
                           "{\"text\": \"c\", \"label\": \"pos\", \"split\": \"test\"}\n");
  auto d = data::load_classification(dir.file("d.jsonl"));
  EXPECT_EQ(d.labels, (std::vector<std::string>{"neg", "pos"}));
  EXPECT_EQ(d.train.size(), 1u);
  EXPECT_EQ(d.train[0].label, 1);
  EXPECT_EQ(d.conflicting_texts, 0);
  EXPECT_EQ(d.conflict_note(), "");
  // texts given with different labels are counted, the first pair by its lines (the same label twice is no conflict)
  mimic::test::write_bytes(dir.file("c.jsonl"), "{\"text\": \"a\", \"label\": 0}\n{\"text\": \"b\", \"label\": 1}\n{\"text\": \"b\", \"label\": 1}\n"
                                                "{\"text\": \"a\", \"label\": 1}\n{\"text\": \"a\", \"label\": 2}\n{\"text\": \"c\", \"label\": 0}\n"
                                                "{\"text\": \"c\", \"label\": 2}\n");
  const auto c = data::load_classification(dir.file("c.jsonl"));
  EXPECT_EQ(c.conflicting_texts, 2);
  EXPECT_EQ(c.conflict_note(), dir.file("c.jsonl") + ": 2 texts are given with different labels (first at " + dir.file("c.jsonl") + ":1 and " +
                                   dir.file("c.jsonl") + ":4)");
  mimic::test::write_bytes(dir.file("bad.jsonl"), "{\"text\": \"a\", \"label\": 1}\n{\"text\": 3}\n");
  EXPECT_MIMIC_ERROR(data::load_classification(dir.file("bad.jsonl")), "bad.jsonl:2: \"text\" is a JSON number, not a string");
  // the part missing is named (helper-52's probe of 2026-12-04: a key spelled "lable" read as the generic shape)
  mimic::test::write_bytes(dir.file("bad.jsonl"), "{\"text\": \"a\", \"label\": 1}\n{\"text\": \"b\", \"lable\": 1}\n");
  EXPECT_MIMIC_ERROR(data::load_classification(dir.file("bad.jsonl")), "bad.jsonl:2: no \"label\" key (expected {\"text\": string, \"label\": ...})");
  mimic::test::write_bytes(dir.file("bad.jsonl"), "{\"txt\": \"a\", \"label\": 1}\n");
  EXPECT_MIMIC_ERROR(data::load_classification(dir.file("bad.jsonl")), "bad.jsonl:1: no \"text\" key");
  mimic::test::write_bytes(dir.file("bad.jsonl"), "[\"a\", 1]\n");
  EXPECT_MIMIC_ERROR(data::load_classification(dir.file("bad.jsonl")), "bad.jsonl:1: expected {\"text\": string, \"label\": ...}, got a JSON array");
  // an id beyond a classifier's labels is named with its first row, as an unknown name is
  mimic::test::write_bytes(dir.file("ids.jsonl"), "{\"text\": \"a\", \"label\": 0}\n{\"text\": \"b\", \"label\": 5}\n{\"text\": \"c\", \"label\": 5}\n");
  auto ids = data::load_classification(dir.file("ids.jsonl"));
  EXPECT_MIMIC_ERROR(data::align_labels(ids, {"x", "y", "z"}, 3, "M"),
                     "ids.jsonl: label 5 is an id beyond M's 3 labels (ids 0 to 2: [\"x\",\"y\",\"z\"]), first at " + dir.file("ids.jsonl") + ":2");
  // the first row beyond them, whichever its id (the largest's first row was named, and mending it met the next)
  mimic::test::write_bytes(dir.file("ids.jsonl"), "{\"text\": \"a\", \"label\": 0}\n{\"text\": \"b\", \"label\": 3}\n{\"text\": \"c\", \"label\": 5}\n");
  auto ids2 = data::load_classification(dir.file("ids.jsonl"));
  EXPECT_MIMIC_ERROR(data::align_labels(ids2, {"x", "y", "z"}, 3, "M"),
                     "label 3 is an id beyond M's 3 labels (ids 0 to 2: [\"x\",\"y\",\"z\"]), first at " + dir.file("ids.jsonl") + ":2 (ids up to 5)");
  mimic::test::write_bytes(dir.file("one.jsonl"), "{\"text\": \"a\", \"label\": 1}\n");
  // one label is a file of its own (a test set of one class): a classifier's labels decide the ids (align_labels); an
  // integer label is an id, so the ids run from 0 to it
  EXPECT_EQ(data::load_classification(dir.file("one.jsonl")).labels, (std::vector<std::string>{"0", "1"}));
  EXPECT_TRUE(data::load_classification(dir.file("one.jsonl")).labels_are_ids);
  mimic::test::write_bytes(dir.file("one-name.jsonl"), "{\"text\": \"a\", \"label\": \"1\"}\n");
  EXPECT_EQ(data::load_classification(dir.file("one-name.jsonl")).labels, (std::vector<std::string>{"1"}));
  mimic::test::write_bytes(dir.file("ten.jsonl"), "{\"text\": \"a\", \"label\": 10}\n{\"text\": \"b\", \"label\": 2}\n");
  const auto ten = data::load_classification(dir.file("ten.jsonl"));  // ids, not names sorted as text ("10" < "2")
  ASSERT_EQ(ten.labels.size(), 11u);
  EXPECT_EQ(ten.train.size() + ten.validation.size() + ten.test.size(), 2u);
  for (const auto* part : {&ten.train, &ten.validation, &ten.test})
    for (const auto& e : *part) EXPECT_EQ(e.label, e.text == "a" ? 10 : 2);
  mimic::test::write_bytes(dir.file("empty.jsonl"), "");
  EXPECT_MIMIC_ERROR(data::load_classification(dir.file("empty.jsonl")), "no examples");
  mimic::test::write_bytes(dir.file("utf.jsonl"), "{\"text\": \"\\udc80\", \"label\": 1}\n");
  EXPECT_ANY_THROW(data::load_classification(dir.file("utf.jsonl")));
  EXPECT_MIMIC_ERROR(data::load_classification("no-such-set"), "unknown data set: 'no-such-set'");
  // a folder (of .txt files, a language model's data) is said to be one (helper-81's probe: "unknown data set")
  EXPECT_MIMIC_ERROR(data::load_classification(dir.path().string()), "' is a folder: classification reads labelled examples from one JSON-lines file");
  // a CSV is named as no JSON lines (the eighteenth probe: nlohmann's parse text alone)
  mimic::test::write_bytes(dir.file("d.csv"), "text,label\nhello,1\n");
  EXPECT_MIMIC_ERROR(data::load_classification(dir.file("d.csv")), "a classification data file holds JSON lines");
  // an empty label name (a classifier was trained and exported that mimic then could not load: the nineteenth probe)
  mimic::test::write_bytes(dir.file("e.jsonl"), "{\"text\": \"a\", \"label\": \"\"}\n");
  EXPECT_MIMIC_ERROR(data::load_classification(dir.file("e.jsonl")), "e.jsonl:1: an empty label name");
  mimic::test::write_bytes(dir.file("b.jsonl"), "{\"text\": \"a\", \"label\": \" \"}\n");
  EXPECT_MIMIC_ERROR(data::load_classification(dir.file("b.jsonl")), "b.jsonl:1: an empty label name (\" \")");
  // a path that is not there is named as one
  EXPECT_MIMIC_ERROR(data::load_classification("/nonexistent/x.jsonl"), "no such file: '/nonexistent/x.jsonl'");
  // the probe of 2026-12-02: a split no one knows on its line (it was found after every row, without one), an empty
  // or blank text (accepted: the classifier trained on [CLS] [SEP] alone), prose given as the set
  mimic::test::write_bytes(dir.file("d.jsonl"), "{\"text\": \"a\", \"label\": 0}\n{\"text\": \"b\", \"label\": 1, \"split\": \"dev\"}\n");
  EXPECT_MIMIC_ERROR(data::load_classification(dir.file("d.jsonl")), "d.jsonl:2: \"split\" must be train, validation (or val) or test, got \"dev\"");
  for (const char* text : {"", " \\n "}) {
    mimic::test::write_bytes(dir.file("t.jsonl"), std::string("{\"text\": \"a\", \"label\": 0}\n{\"text\": \"") + text + "\", \"label\": 1}\n");
    EXPECT_MIMIC_ERROR(data::load_classification(dir.file("t.jsonl")), "t.jsonl:2: the text is empty: give each example its text, or leave the line out");
  }
  mimic::test::write_bytes(dir.file("prose.txt"), "Mr. Speaker, the state of the union is strong.\n");
  EXPECT_MIMIC_ERROR(data::load_classification(dir.file("prose.txt")), "prose.txt:1: not JSON but text: a classification data file holds JSON lines");
  mimic::test::write_bytes(dir.file("table.csv"), "text,label\nhello,1\n");
  EXPECT_MIMIC_ERROR(data::load_classification(dir.file("table.csv")), "table.csv:1: malformed JSON");  // a table is not called prose
  // a long line that breaks late: the parser's "last read" quoted the whole string read so far, 20 MB on stderr for a
  // 20 MB text (helper-107's probe of 2026-12-07); its start and end are kept, with the count
  mimic::test::write_bytes(dir.file("late.jsonl"), "{\"text\": \"" + std::string(100000, 'w') + "\xFF\", \"label\": 1}\n");
  try {
    data::load_classification(dir.file("late.jsonl"));
    ADD_FAILURE() << "a line with a byte that is no UTF-8 was read";
  } catch (const mimic::Error& e) {
    const std::string what = e.what();
    EXPECT_LT(what.size(), 600u) << what.substr(0, 600);
    EXPECT_NE(what.find("late.jsonl:1: malformed JSON: parse error at line 1, column 100011: syntax error"), std::string::npos) << what;
    EXPECT_EQ(what.find("holds JSON lines"), std::string::npos) << "a .jsonl file is told it holds JSON lines";
    EXPECT_NE(what.find("'\"" + std::string(40, 'w')), std::string::npos) << what;  // the quote's start
    EXPECT_NE(what.find(" ... " + std::string(40, 'w')), std::string::npos) << what;
    EXPECT_NE(what.find(std::string(40, 'w') + "\\xFF' (100127 bytes of message, cut)"), std::string::npos) << what;  // its end
  }
  // a number of 100,000 digits: nlohmann's "number overflow" quotes it whole, without "last read" (helper-108's review)
  mimic::test::write_bytes(dir.file("num.jsonl"), "{\"text\": \"a\", \"label\": 1, \"n\": 1" + std::string(100000, '0') + "}\n");
  try {
    data::load_classification(dir.file("num.jsonl"));
    ADD_FAILURE() << "a number of 100,000 digits was read";
  } catch (const mimic::Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 600u) << std::string(e.what()).substr(0, 600);
    EXPECT_NE(std::string(e.what()).find("num.jsonl:1: malformed JSON: "), std::string::npos) << e.what();
  }
  // ids written as text for a classifier of named labels: refused, and told how ids are written (helper-107's probe)
  mimic::test::write_bytes(dir.file("strids.jsonl"), "{\"text\": \"a\", \"label\": \"0\"}\n{\"text\": \"b\", \"label\": \"1\"}\n");
  auto strids = data::load_classification(dir.file("strids.jsonl"));
  EXPECT_MIMIC_ERROR(data::align_labels(strids, {"ham", "spam"}, 2, "M", "WAY"),
                     "are not among M's labels ([\"ham\",\"spam\"], its id2label); WAY (written as JSON integers, without quotes, labels are "
                     "read as ids: 0 is \"ham\")");
  mimic::test::write_bytes(dir.file("names.jsonl"), "{\"text\": \"a\", \"label\": \"pos\"}\n{\"text\": \"b\", \"label\": \"2\"}\n");
  auto names = data::load_classification(dir.file("names.jsonl"));  // a name among them, and an id beyond: no such hint
  try {
    data::align_labels(names, {"ham", "spam"}, 2, "M", "WAY");
    ADD_FAILURE() << "unknown names were accepted";
  } catch (const mimic::Error& e) {
    EXPECT_EQ(std::string(e.what()).find("JSON integers"), std::string::npos) << e.what();
  }
  // a label name is a class's short name: 5 MB of one went whole into the error (and would into id2label)
  mimic::test::write_bytes(dir.file("lbl.jsonl"), "{\"text\": \"a\", \"label\": \"" + std::string(300, 'x') + "\"}\n");
  EXPECT_MIMIC_ERROR(data::load_classification(dir.file("lbl.jsonl")),
                     "lbl.jsonl:1: a label name of 300 bytes (" + std::string(40, 'x') + "… (300 bytes)): a label is a class's name, at most 256 bytes");
}

// Found by fuzzing JSON-lines files (bench/fuzz): a "split" that is not a string escaped as nlohmann's exception.
// Rows without a "split" go 90/5/5 by a hash of their text alone. They went by "PATH:LINE" with the path as typed,
// so t.jsonl and ./t.jsonl split differently and a finetune and an eval that spelled the file otherwise scored
// training rows as test rows (helper-36's review of 2026-12-02): the same rows now split the same whatever the file's
// name, the way to it, or their order, and a text given twice lies in one split.
TEST(ClassificationData, RowsWithoutASplitGoByTheirTextAloneWhateverThePathOrOrder) {
  TempDir dir;
  std::string rows, reversed;
  for (int i = 0; i < 200; ++i) {
    const std::string line = nlohmann::json{{"text", "row " + std::to_string(i)}, {"label", i % 2}}.dump() + "\n";
    rows += line;
    reversed = line + reversed;
  }
  std::filesystem::create_directories(dir.file("sub"));
  mimic::test::write_bytes(dir.file("a.jsonl"), rows);
  mimic::test::write_bytes(dir.file("sub/b.jsonl"), reversed);
  const auto a = data::load_classification(dir.file("a.jsonl"));
  // golden: FNV-1a (64 bits) of each text modulo 100, < 90 train, < 95 validation, else test — counted with Python
  EXPECT_EQ(a.train.size(), 177u);
  EXPECT_EQ(a.validation.size(), 12u);
  EXPECT_EQ(a.test.size(), 11u);
  EXPECT_EQ(a.split_by_text, 200);
  const auto texts = [](const std::vector<data::Example>& v) {
    std::multiset<std::string> t;
    for (const auto& e : v) t.insert(e.text);
    return t;
  };
  EXPECT_EQ(texts(a.test), (std::multiset<std::string>{"row 12", "row 22", "row 44", "row 80", "row 126", "row 132", "row 141", "row 148",
                                                       "row 156", "row 183", "row 190"}));
  EXPECT_EQ(texts(a.validation), (std::multiset<std::string>{"row 7", "row 8", "row 36", "row 54", "row 65", "row 93", "row 98", "row 102",
                                                             "row 139", "row 160", "row 179", "row 188"}));
  // another name, another way to it, the lines reversed: the same rows in each split
  const auto b = data::load_classification(dir.file("sub") + "/../sub/./b.jsonl");
  EXPECT_EQ(texts(b.train), texts(a.train));
  EXPECT_EQ(texts(b.validation), texts(a.validation));
  EXPECT_EQ(texts(b.test), texts(a.test));
  // each row twice, the copies apart: never one copy in training and the other in test
  mimic::test::write_bytes(dir.file("twice.jsonl"), rows + reversed);
  const auto twice = data::load_classification(dir.file("twice.jsonl"));
  EXPECT_EQ(twice.train.size(), 2 * a.train.size());
  EXPECT_EQ(twice.test.size(), 2 * a.test.size());
  // a row's own "split" decides where it says one; the others go by their text
  mimic::test::write_bytes(dir.file("own.jsonl"), R"({"text": "row 12", "label": 0, "split": "train"})" "\n" + rows);
  const auto own = data::load_classification(dir.file("own.jsonl"));
  EXPECT_EQ(own.split_by_text, 200);
  EXPECT_EQ(texts(own.train).count("row 12"), 1u);
  EXPECT_EQ(texts(own.test).count("row 12"), 1u);
}

TEST(ClassificationData, ASplitThatIsNoStringIsRefusedNamingTheLine) {
  TempDir dir;
  mimic::test::write_bytes(dir.file("s.jsonl"), "{\"text\": \"a\", \"label\": 0}\n{\"text\": \"b\", \"label\": 1, \"split\": 5}\n");
  EXPECT_MIMIC_ERROR(data::load_classification(dir.file("s.jsonl")), "s.jsonl:2: \"split\" must be train, validation or test, got 5");
  mimic::test::write_bytes(dir.file("n.jsonl"), "{\"text\": \"a\", \"label\": 0, \"split\": null}\n{\"text\": \"b\", \"label\": 1}\n");
  EXPECT_MIMIC_ERROR(data::load_classification(dir.file("n.jsonl")), "n.jsonl:1: \"split\" must be train, validation or test, got null");
  // a label is a name or an integer: null, booleans and 1.0 became classes of their own (the fifth probe of 2026-11-27)
  for (const char* label : {"null", "true", "1.0", "[1]"}) {
    mimic::test::write_bytes(dir.file("l.jsonl"), std::string("{\"text\": \"a\", \"label\": 0}\n{\"text\": \"b\", \"label\": ") + label + "}\n");
    EXPECT_MIMIC_ERROR(data::load_classification(dir.file("l.jsonl")), std::string("l.jsonl:2: label must be a name or an integer, got ") + label);
  }
}

// A BERT (random weights, real vocabulary) learns a task that a word decides, and the output directory is
// a classifier that `load_model` reads back with the same predictions.
TEST(ClassificationFinetune, LearnsAWordDecidedTask) {
  TempDir dir;
  std::string lines;
  const char* good[] = {"excellent", "wonderful", "great"};
  const char* bad[] = {"terrible", "awful", "horrible"};
  const char* fill[] = {"the service was", "i found the food", "our stay felt", "the whole trip was", "honestly it was"};
  int i = 0;
  for (const char* f : fill)
    for (int k = 0; k < 3; ++k)
      for (int label = 0; label < 2; ++label) {
        std::string split = i % 5 == 0 ? "validation" : "train";
        lines += nlohmann::json{{"text", std::string(f) + " " + (label ? good[k] : bad[k])}, {"label", label ? "pos" : "neg"}, {"split", split}}.dump() + "\n";
        ++i;
      }
  mimic::test::write_bytes(dir.file("task.jsonl"), lines);
  finetune::ClassifyOptions o;
  o.model_dir = mimic::test::model_with_tokenizer("bert-mlm");
  o.data = dir.file("task.jsonl");
  o.seq_len = 16;
  o.batch_size = 8;
  o.train.steps = 80;
  o.train.warmup = 5;
  o.train.lr = 1e-2;
  o.train.eval_every = 20;
  o.train.out_dir = dir.file("out");
  o.train.progress = false;
  auto r = finetune::finetune_classifier(o);
  EXPECT_EQ(r.student.validation.accuracy, 1.0);
  auto model = models::load_model(dir.file("out"));
  EXPECT_EQ(model->summary().head, "cls");
  EXPECT_EQ(model->summary().num_labels, 2);
  auto cfg = nlohmann::json::parse(mimic::test::read_bytes(dir.file("out/config.json")));
  EXPECT_EQ(cfg["id2label"]["1"], "pos");
  EXPECT_EQ(cfg["architectures"][0], "BertForSequenceClassification");
}

// The sizes of a classification run are checked before anything is read: --seq-len 0 made encode() resize the
// ids to nothing and write [SEP] through ids.back() (heap corruption), a batch of 0 never advanced the
// evaluation loop. The CLI refuses both first (tools/ranges.h); these are the library's own guards. 0 is the default
// now, min(128, the model's context), as record's (an explicit length beyond the context is refused by name).
TEST(ClassificationFinetune, SequenceLengthsBelowThreeAndEmptyBatchesAreErrors) {
  finetune::ClassifyOptions o;
  o.model_dir = "no-such-model";
  o.data = "no-such-set";  // not read: the sizes are refused first
  o.seq_len = -1;
  EXPECT_MIMIC_ERROR(finetune::finetune_classifier(o), "--seq-len must be at least 3 for classification");
  o.seq_len = 2;
  EXPECT_MIMIC_ERROR(finetune::finetune_classifier(o), "got 2");
  o.seq_len = 16;
  o.batch_size = 0;
  EXPECT_MIMIC_ERROR(finetune::finetune_classifier(o), "--batch-size must be at least 1");

  const auto dir = mimic::test::model_with_tokenizer("bert-mlm");  // the real vocabulary, a fresh 2-label head
  models::LoadOptions lo;
  lo.head = "cls";
  lo.labels = {"neg", "pos"};
  auto model = models::load_model(dir, lo);
  auto tok = text::load_tokenizer(dir);
  const std::vector<data::Example> examples = {{"a wonderful day", 1, "d1"}, {"a terrible day", 0, "d2"}};
  const int64_t k = 2;
  for (int64_t len : {-1, 1, 2}) EXPECT_MIMIC_ERROR(finetune::evaluate_classifier(*model, *tok, examples, k, len, 8), "at least 3");
  const int64_t context = model->summary().max_positions;
  ASSERT_LT(context, 128);  // so that the default is the context, not 128
  std::string long_text;  // longer than the context: the length it is cut to shows in the loss
  for (int i = 0; i < 40; ++i) long_text += i % 2 ? "a terrible day " : "a wonderful night ";
  const std::vector<data::Example> long_examples = {{long_text, 1, "d3"}};
  const double by_default = finetune::evaluate_classifier(*model, *tok, long_examples, k, 0, 8).loss;
  EXPECT_DOUBLE_EQ(by_default, finetune::evaluate_classifier(*model, *tok, long_examples, k, context, 8).loss);
  EXPECT_NE(by_default, finetune::evaluate_classifier(*model, *tok, long_examples, k, context - 8, 8).loss);
  {  // a cut text is read as its head: the loss of the text that is just its first seq_len - 2 tokens
    const int64_t len = context - 8;
    const auto all = tok->encode(long_text, false);
    std::istringstream words(long_text);
    std::string head, w;
    for (int64_t i = 0; i < len - 2 && words >> w; ++i) head += (i ? " " : "") + w;
    ASSERT_EQ(tok->encode(head, false), std::vector<int64_t>(all.begin(), all.begin() + (len - 2)));  // a token a word
    const auto cut = finetune::evaluate_classifier(*model, *tok, long_examples, k, len, 8);
    const auto whole = finetune::evaluate_classifier(*model, *tok, {{head, 1, "d4"}}, k, len, 8);
    EXPECT_EQ(cut.cut, 1);
    EXPECT_EQ(whole.cut, 0);
    EXPECT_DOUBLE_EQ(cut.loss, whole.loss);
  }
  {  // the ids themselves: [CLS], the text's head, [SEP], at a room that cuts, one that just fits and one to spare
    const auto body = tok->encode("a wonderful day", false);
    ASSERT_EQ(body.size(), 3u);
    const int64_t cls = tok->cls_id(), sep = tok->sep_id();
    int64_t cut = 0;
    EXPECT_EQ(finetune::example_ids(*tok, "a wonderful day", 4, cut), (std::vector<int64_t>{cls, body[0], body[1], sep}));
    EXPECT_EQ(cut, 1);
    for (int64_t len : {5, 6})
      EXPECT_EQ(finetune::example_ids(*tok, "a wonderful day", len, cut), (std::vector<int64_t>{cls, body[0], body[1], body[2], sep}));
    EXPECT_EQ(cut, 1);
    EXPECT_EQ(finetune::example_ids(*tok, "", 3, cut), (std::vector<int64_t>{cls, sep}));
    EXPECT_EQ(cut, 1);
  }
  EXPECT_MIMIC_ERROR(finetune::evaluate_classifier(*model, *tok, examples, k, context + 1, 8),
                     "--seq-len " + std::to_string(context + 1) + " must lie in 3.." + std::to_string(context));
  EXPECT_MIMIC_ERROR(finetune::evaluate_classifier(*model, *tok, examples, k, 16, 0), "--batch-size must be at least 1");
  EXPECT_EQ(finetune::evaluate_classifier(*model, *tok, examples, k, 3, 8).metrics.n, 2);  // [CLS] one token [SEP]
  // a text the tokenizer reduces to nothing (controls, NULs, U+00A0 and U+3000) was scored as [CLS] [SEP] without a word,
  // as an empty text was until 2026-12-02 (helper-107's probe of 2026-12-07): refused, naming its line
  for (const std::string& nothing : {std::string("\x01\x1f\x7f"), std::string("\0\0", 2), std::string("\xC2\xA0\xE3\x80\x80\t")}) {
    const std::vector<data::Example> odd = {{"a wonderful day", 1, "f.jsonl:1"}, {nothing, 0, "f.jsonl:2"}};
    EXPECT_MIMIC_ERROR(finetune::evaluate_classifier(*model, *tok, odd, k, 16, 8),
                       "f.jsonl:2: the text has no tokens (all of it is characters the tokenizer drops or reads as space");
  }

  // a tokenizer with a [CLS] and a [PAD] whose post-processor frames a text otherwise (<s> <s> text </s>, as a
  // RoBERTa processor followed by a template gives): the classifier frames its examples itself, so it is refused
  // (helper-104's review)
  mimic::test::TempDir other;
  mimic::test::write_bytes(other.file("tokenizer_config.json"), R"({"pad_token":"<pad>"})");
  mimic::test::write_bytes(other.file("tokenizer.json"), R"({"version":"1.0","added_tokens":[],"normalizer":null,"pre_tokenizer":null,
   "post_processor":{"type":"Sequence","processors":[
     {"type":"RobertaProcessing","sep":["</s>",2],"cls":["<s>",1],"trim_offsets":true,"add_prefix_space":false},
     {"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],
      "pair":[{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{"<s>":{"id":"<s>","ids":[1],"tokens":["<s>"]}}}]},
   "decoder":null,"model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,"end_of_word_suffix":null,
   "fuse_unk":false,"byte_fallback":false,"vocab":{"a":0,"<s>":1,"</s>":2,"<pad>":3,"b":4},"merges":[]}})");
  auto framed_otherwise = text::load_tokenizer(other.path().string());
  ASSERT_GE(framed_otherwise->cls_id(), 0);
  ASSERT_GE(framed_otherwise->pad_id(), 0);
  EXPECT_MIMIC_ERROR(finetune::evaluate_classifier(*model, *framed_otherwise, examples, k, 16, 8),
                     "the tokenizer: sequence classification needs a tokenizer that frames a text as [CLS] text [SEP]");
  EXPECT_MIMIC_ERROR(finetune::evaluate_classifier(*model, *text::load_tokenizer(mimic::cache_dir() + "/assets/gpt2"), examples, k, 16, 8),
                     "the tokenizer: sequence classification needs a BERT tokenizer");
}
