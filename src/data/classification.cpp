#include "mimic/data/classification.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "mimic/core/error.h"
#include "mimic/core/hash.h"
#include "mimic/core/json_keys.h"
#include "mimic/core/paths.h"
#include "mimic/io/atomic_file.h"

namespace mimic::data {

namespace fs = std::filesystem;

const std::vector<Example>& ClassificationData::split(Split s) const {
  return s == Split::Train ? train : s == Split::Validation ? validation : test;
}

std::string ClassificationData::digest() const {
  Hasher h;
  // every string with its length first, so that no two different lists hash the same concatenation
  auto add = [&](const std::string& str) {
    const uint64_t n = str.size();
    h.bytes(&n, sizeof n);
    h.bytes(str.data(), str.size());
  };
  for (const auto& l : labels) add(l);
  for (const auto* part : {&train, &validation, &test}) {
    const uint64_t n = part->size();
    h.bytes(&n, sizeof n);
    for (const auto& e : *part) {
      add(e.text);
      h.bytes(&e.label, sizeof e.label);
    }
  }
  return h.hex();
}

const std::vector<Era>& sotu_eras() {
  static const std::vector<Era> eras = {
      {1790, 1856, "1790-1856"}, {1857, 1900, "1857-1900"}, {1901, 1951, "1901-1951"}, {1952, 2021, "1952-2021"}};
  return eras;
}

namespace {

// Replaces bytes that are not valid UTF-8 by U+FFFD (mail bodies come in many encodings).
std::string to_valid_utf8(const std::string& s) {
  if (is_valid_utf8(s)) return s;
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t len = 1;
    unsigned c = static_cast<unsigned char>(s[i]);
    if (c >= 0xC0) len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    if (c >= 0x80 && i + len <= s.size() && is_valid_utf8(s.substr(i, len))) {
      out += s.substr(i, len);
      i += len;
    } else if (c < 0x80) {
      out.push_back(s[i++]);
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

// A mail without its headers: the Subject line, a blank line, then the body.
std::string mail_text(const std::string& raw) {
  std::string text = to_valid_utf8(raw);
  size_t body = text.find("\n\n");
  std::string headers = body == std::string::npos ? text : text.substr(0, body);
  std::string subject;
  std::istringstream hs(headers);
  std::string line;
  while (std::getline(hs, line))
    if (line.rfind("Subject:", 0) == 0) subject = line.substr(8);
  std::string out = clean_text(subject) + "\n\n" + clean_text(body == std::string::npos ? "" : text.substr(body + 2));
  return clean_text(out);
}

void add(ClassificationData& d, Example e, Split s) {
  switch (s) {
    case Split::Train: d.train.push_back(std::move(e)); break;
    case Split::Validation: d.validation.push_back(std::move(e)); break;
    case Split::Test: d.test.push_back(std::move(e)); break;
  }
}

ClassificationData load_spam() {
  ClassificationData d;
  d.name = d.source = "spam";
  d.labels = {"ham", "spam"};
  d.metric = "f1";
  std::string root = asset_path("corpora/spam-assassin");
  for (const char* group : {"easy-ham-1", "easy-ham-2", "hard-ham-1", "spam-1", "spam-2"}) {
    const int64_t label = std::string(group).rfind("spam", 0) == 0 ? 1 : 0;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(root + "/" + group))
      if (e.path().extension() == ".txt") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      auto text = mail_text(io::read_text_file(f.string()));
      if (text.empty()) continue;
      const std::string id = std::string("spam/") + group + "/" + f.stem().string();
      add(d, {text, label, id}, split_of(id));
    }
  }
  return d;
}

// Passages of State of the Union addresses: consecutive sentences gathered until they hold at least 100
// words; labelled by the era of the address. Splits go by address.
ClassificationData load_sotu_era() {
  ClassificationData d;
  d.name = d.source = "sotu-era";
  for (const auto& e : sotu_eras()) d.labels.push_back(e.name);
  d.metric = "mcc";
  for (const auto& doc : load_corpus("sotu")) {
    int64_t label = -1;
    for (size_t i = 0; i < sotu_eras().size(); ++i)
      if (doc.year >= sotu_eras()[i].first && doc.year <= sotu_eras()[i].last) label = static_cast<int64_t>(i);
    MIMIC_CHECK(label >= 0, "no era for the address of ", doc.year);
    std::string passage;
    int words = 0;
    const std::string& t = doc.text;
    size_t start = 0;
    for (size_t i = 0; i <= t.size(); ++i) {
      bool end_of_sentence = i == t.size() || ((t[i] == '.' || t[i] == '!' || t[i] == '?') && (i + 1 == t.size() || std::isspace(static_cast<unsigned char>(t[i + 1]))));
      if (!end_of_sentence) continue;
      std::string sentence = clean_text(t.substr(start, i + 1 - start));
      start = i + 1;
      if (sentence.empty()) continue;
      passage += (passage.empty() ? "" : " ") + sentence;
      words += static_cast<int>(std::count(sentence.begin(), sentence.end(), ' ')) + 1;
      if (words >= 100) {
        add(d, {passage, label, doc.id}, split_of(doc.id));
        passage.clear();
        words = 0;
      }
    }
  }
  return d;
}

ClassificationData load_jsonl(const std::string& path) {
  ClassificationData d;
  d.name = fs::path(path).filename().string();
  d.source = path;  // the base name alone in an error left the file to guess (the fifteenth probe of 2026-11-30)
  std::istringstream is(io::read_text_file(path));
  std::string line;
  std::map<std::string, int64_t> label_ids;
  std::vector<std::pair<Example, std::string>> rows;
  int lineno = 0;
  while (std::getline(is, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    // json_parse: mimic's one-line message for malformed JSON, and a key given twice refused
    // (a CSV read as "malformed JSON" said nothing of the format expected: the eighteenth probe of 2026-11-30)
    nlohmann::json j;
    try {
      j = json_parse(line, path + ":" + std::to_string(lineno));
    } catch (const Error& e) {
      // A first line that opens with a word, in a file not named as a table or JSON, is most likely prose: said so,
      // not in the JSON parser's words. (A CSV, a JSON array or a broken JSON line keeps the parser's message.)
      const auto first = line.find_first_not_of(" \t");
      const std::string ext = fs::path(path).extension().string();
      if (rows.empty() && std::isalpha(static_cast<unsigned char>(line[first])) && ext != ".csv" && ext != ".tsv" && ext != ".json" &&
          ext != ".jsonl")
        fail(path, ":", lineno, ": not JSON but text: a classification data file holds JSON lines, one {\"text\": …, \"label\": …} ",
             "per line (plain text is language-model data: --task lm)");
      // the format is said where the file may not be JSON lines at all; a .jsonl file's broken line is the parser's alone
      // (helper-107's probe: "holds JSON lines" under a file that does)
      if (ext == ".jsonl") throw;
      fail(e.what(), " (a classification data file holds JSON lines, one {\"text\": …, \"label\": …} per line)");
    }
    // which part is missing or wrong, named: a key spelled "lable" read as the generic shape (helper-52's probe of 2026-12-04)
    MIMIC_CHECK(j.is_object(), path, ":", lineno, ": expected {\"text\": string, \"label\": ...}, got a JSON ", j.type_name());
    MIMIC_CHECK(j.contains("text"), path, ":", lineno, ": no \"text\" key (expected {\"text\": string, \"label\": ...})");
    MIMIC_CHECK(j["text"].is_string(), path, ":", lineno, ": \"text\" is a JSON ", j["text"].type_name(), ", not a string");
    MIMIC_CHECK(j.contains("label"), path, ":", lineno, ": no \"label\" key (expected {\"text\": string, \"label\": ...})");
    // a label is a name or an integer (docs/data.md): null, true or 1.0 became classes "null", "true" and "1.0" (so 1
    // and 1.0 were two classes: the fifth probe of 2026-11-27)
    MIMIC_CHECK(j["label"].is_string() || j["label"].is_number_integer(), path, ":", lineno, ": label must be a name or an integer, got ",
                json_dump(j["label"], -1));
    // a name is a class's short name: one of 5 MB went whole into an error line and would into config.json's id2label
    // (helper-108's review of 2026-12-07)
    MIMIC_CHECK(!j["label"].is_string() || j["label"].get_ref<const std::string&>().size() <= 256, path, ":", lineno, ": a label name of ",
                j["label"].get_ref<const std::string&>().size(), " bytes (",
                shown_excerpt(j["label"].get_ref<const std::string&>(), 40), "): a label is a class's name, at most 256 bytes");
    // an empty name trained and exported a classifier whose id2label mimic then refused to load (the nineteenth probe)
    MIMIC_CHECK(!j["label"].is_string() || j["label"].get<std::string>().find_first_not_of(" \t\r\n") != std::string::npos, path, ":", lineno,
                ": an empty label name (", json_dump(j["label"], -1), "): give each class a name, or integer ids");
    // an integer is an id, a string a name: the two in one file would give one class two spellings (the tenth probe:
    // "label": 1 was matched as the name "1", so a ham/spam classifier refused 0/1 labels)
    const bool id = j["label"].is_number_integer();
    if (rows.empty()) d.labels_are_ids = id;
    MIMIC_CHECK(id == d.labels_are_ids, path, ":", lineno, ": label ", json_dump(j["label"], -1), " is ", id ? "an id (an integer)" : "a name",
                ", the lines before give ", id ? "names" : "ids (integers)", ": give every label the same way");
    MIMIC_CHECK(!id || (j["label"].get<int64_t>() >= 0 && j["label"].get<int64_t>() < 1'000'000), path, ":", lineno, ": label ",
                json_dump(j["label"], -1), " is an id, which must lie in [0, 10^6)");
    std::string label = id ? j["label"].dump() : j["label"].get<std::string>();
    auto text = j["text"].get<std::string>();
    MIMIC_CHECK(is_valid_utf8(text), path, ":", lineno, ": text is not valid UTF-8");
    // an example of no text trained the classifier on [CLS] [SEP] alone without a word (the probe of 2026-12-02)
    MIMIC_CHECK(text.find_first_not_of(" \t\r\n") != std::string::npos, path, ":", lineno,
                ": the text is empty: give each example its text, or leave the line out");
    // checked before reading: j.value() of a number would throw nlohmann's exception, not a one-line error
    MIMIC_CHECK(!j.contains("split") || j["split"].is_string(), path, ":", lineno,
                ": \"split\" must be train, validation or test, got ", j["split"].dump());
    std::string split = j.value("split", std::string());
    // on its line (a "dev" was refused once every row was read, naming neither the line nor what a split may be)
    MIMIC_CHECK(split.empty() || split == "train" || split == "validation" || split == "val" || split == "test", path, ":", lineno,
                ": \"split\" must be train, validation (or val) or test, got \"", shown_excerpt(split, 40), "\"");
    rows.push_back({{text, 0, path + ":" + std::to_string(lineno)}, split + "\t" + label});
    label_ids.emplace(label, 0);
  }
  MIMIC_CHECK(!rows.empty(), path, ": no examples");
  // One label is a valid file: a test set may hold one class alone, and a classifier's id2label decides the ids
  // (align_labels). A new classification head needs two, which finetune checks where it makes one.
  if (d.labels_are_ids) {  // the ids themselves: 0 … the largest, whether or not the file uses each
    int64_t largest = 0;
    for (auto& [name, id] : label_ids) id = std::stoll(name), largest = std::max(largest, id);
    for (int64_t i = 0; i <= largest; ++i) d.labels.push_back(std::to_string(i));
  } else {
    int64_t next = 0;
    for (auto& [name, id] : label_ids) {
      id = next++;
      d.labels.push_back(name);
    }
  }
  d.metric = d.labels.size() <= 2 ? "f1" : "mcc";
  {
    // views into `rows`, which outlive both: a copy of every text doubled a large file's memory while it loaded
    auto label_of = [&](size_t i) { return std::string_view(rows[i].second).substr(rows[i].second.find('\t') + 1); };
    std::unordered_map<std::string_view, size_t> seen;  // text → the first row that gives it
    std::unordered_set<std::string_view> conflicting;
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& ex = rows[i].first;
      const auto [it, fresh] = seen.emplace(ex.text, i);
      if (fresh || label_of(it->second) == label_of(i) || !conflicting.insert(ex.text).second) continue;
      if (d.first_conflict.empty()) d.first_conflict = rows[it->second].first.doc_id + " and " + ex.doc_id;
    }
    d.conflicting_texts = static_cast<int64_t>(conflicting.size());
  }
  for (auto& [ex, tag] : rows) {
    auto tab = tag.find('\t');
    std::string split = tag.substr(0, tab);
    ex.label = label_ids.at(tag.substr(tab + 1));
    if (split.empty()) {
      // By the text alone. The key was "PATH:LINE" with the path as typed until 2026-12-02: t.jsonl and ./t.jsonl split
      // differently, so a finetune and an eval that spelled the file otherwise scored training rows as test rows, and a
      // row added at the top moved every row below it (helper-36's review of 2026-12-02). Two rows of one text without a
      // "split" now lie in one split, whichever their lines.
      ++d.split_by_text;
      add(d, ex, split_of(ex.text));
    } else {
      add(d, ex, split == "train" ? Split::Train : split == "test" ? Split::Test : Split::Validation);  // checked on its line
    }
  }
  return d;
}

}  // namespace

namespace {
// Whether the example at `a` ("FILE:LINE", as a JSON-lines file's examples name theirs) comes before the one at `b`
bool line_before(const std::string& a, const std::string& b) {
  const auto line = [](const std::string& at) {
    const auto colon = at.rfind(':');
    try {
      return colon == std::string::npos ? int64_t{0} : static_cast<int64_t>(std::stoll(at.substr(colon + 1)));
    } catch (const std::exception&) {
      return int64_t{0};
    }
  };
  return line(a) < line(b);
}
}  // namespace

std::vector<std::string> classification_names() { return {"spam", "sotu-era"}; }

bool is_classification_data(const std::string& data) {
  const auto names = classification_names();
  if (std::find(names.begin(), names.end(), data) != names.end()) return true;
  std::string ext = fs::path(data).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::error_code ec;
  return ext == ".jsonl" && fs::is_regular_file(data, ec);
}

namespace {
// The first row (file:line, in file order) whose label id is `i` (or, with `or_above`, `i` or more), and its id; ""
// where the rows name no line (a shipped set).
std::pair<std::string, int64_t> first_row_of(const ClassificationData& d, int64_t i, bool or_above = false) {
  std::string first;
  int64_t label = i;
  for (const auto* part : {&d.train, &d.validation, &d.test})
    for (const auto& e : *part)
      if ((e.label == i || (or_above && e.label > i)) && !e.doc_id.empty() && (first.empty() || line_before(e.doc_id, first)))
        first = e.doc_id, label = e.label;
  return {first, label};
}
}  // namespace

void align_labels(ClassificationData& d, const std::vector<std::string>& model_labels, int64_t model_num_labels, const std::string& model,
                  const std::string& way_out) {
  if (d.labels_are_ids) {
    const int64_t k = model_labels.empty() ? model_num_labels : static_cast<int64_t>(model_labels.size());
    // the first row beyond them named, as an unknown name's is (helper-52's probe of 2026-12-04; the largest id's first
    // row was named, so mending it met the next: helper-53's)
    const int64_t largest = static_cast<int64_t>(d.labels.size()) - 1;
    if (largest >= k) {
      const auto [at, id] = first_row_of(d, k, /*or_above=*/true);
      fail(d.source, ": label ", at.empty() ? largest : id, " is an id beyond ", model, "'s ", k, " labels (ids 0 to ", k - 1,
           model_labels.empty() ? std::string() : ": " + nlohmann::json(model_labels).dump(), ")", at.empty() ? "" : ", first at " + at,
           at.empty() || id == largest ? std::string() : " (ids up to " + std::to_string(largest) + ")");
    }
    d.labels = model_labels;
    if (d.labels.empty())
      for (int64_t i = 0; i < k; ++i) d.labels.push_back(std::to_string(i));
    d.metric = d.labels.size() == 2 ? "f1" : "mcc";
    return;
  }
  if (model_labels.empty() || model_labels == d.labels) return;
  std::vector<int64_t> to(d.labels.size());
  // every unknown label is named (the first alone was, and a fix for it met the next: the fourth probe of 2026-11-27)
  std::vector<std::string> unknown;
  for (size_t i = 0; i < d.labels.size(); ++i) {
    const auto it = std::find(model_labels.begin(), model_labels.end(), d.labels[i]);
    if (it == model_labels.end()) unknown.push_back(d.labels[i]);
    to[i] = it - model_labels.begin();
  }
  if (!unknown.empty()) {
    const size_t shown = std::min<size_t>(unknown.size(), 8);
    const std::string more = unknown.size() > shown ? " and " + std::to_string(unknown.size() - shown) + " more" : "";
    // where each is found first: a label on a file's last line alone was named without its line (the fourteenth probe)
    std::string where;
    for (size_t u = 0; u < shown; ++u) {
      const auto i = static_cast<int64_t>(std::find(d.labels.begin(), d.labels.end(), unknown[u]) - d.labels.begin());
      const std::string first = first_row_of(d, i).first;
      if (!first.empty()) where += (where.empty() ? "" : ", ") + first;
    }
    if (!where.empty()) where = " (first at " + where + ")";
    // names that are ids written as text ("0", "1") for a classifier of named labels: JSON integers would be read as its
    // ids (helper-107's probe of 2026-12-07: "spam"/"ham" refused "0"/"1" without saying so)
    const bool ids_as_text = std::all_of(unknown.begin(), unknown.end(), [&](const std::string& l) {
      return !l.empty() && l.size() < 7 && std::all_of(l.begin(), l.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
             std::stoll(l) < static_cast<long long>(model_labels.size());
    });
    fail(d.source, ": ", unknown.size() == 1 ? "label " : "labels ", nlohmann::json(std::vector<std::string>(unknown.begin(), unknown.begin() + shown)).dump(),
         more, where, unknown.size() == 1 ? " is" : " are", " not among ", model, "'s labels (", nlohmann::json(model_labels).dump(),
         ", its id2label); ", way_out,
         ids_as_text ? " (written as JSON integers, without quotes, labels are read as ids: 0 is " + nlohmann::json(model_labels[0]).dump() + ")"
                     : std::string());
  }
  for (auto* part : {&d.train, &d.validation, &d.test})
    for (auto& e : *part) e.label = to[static_cast<size_t>(e.label)];
  d.labels = model_labels;
  d.metric = d.labels.size() == 2 ? "f1" : "mcc";
}

std::string ClassificationData::conflict_note() const {
  if (conflicting_texts == 0) return "";
  return source + ": " + (conflicting_texts == 1 ? std::string("a text is") : std::to_string(conflicting_texts) + " texts are") +
         " given with different labels (first at " + first_conflict + ")";
}

ClassificationData load_classification(const std::string& name) {
  if (name == "spam") return load_spam();
  if (name == "sotu-era") return load_sotu_era();
  // a path that is not there read only as "unknown data set" (the fifteenth probe of 2026-11-30)
  std::error_code ec;
  const bool path_like = name.find('/') != std::string::npos || name.find('.') != std::string::npos;
  // a folder is text for a language model, not labelled examples (it read "unknown data set": helper-81's probe)
  MIMIC_CHECK(!fs::is_directory(name, ec), "'", name, "' is a folder: classification reads labelled examples from one JSON-lines file ",
              "({\"text\": ..., \"label\": ...} per line: docs/data.md), or spam or sotu-era; a folder of .txt files is text for --task lm or copy");
  MIMIC_CHECK(fs::is_regular_file(name, ec), path_like && !fs::exists(name, ec) ? "no such file: " : "unknown data set: ", "'", name,
              "' (spam, sotu-era, or a JSON-lines file)");
  return load_jsonl(name);
}

}  // namespace mimic::data
