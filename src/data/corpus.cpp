#include "mimic/data/corpus.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "mimic/core/error.h"
#include "mimic/core/paths.h"
#include "mimic/core/words.h"
#include "mimic/data/classification.h"
#include "mimic/data/recall_tasks.h"
#include "mimic/io/atomic_file.h"

namespace mimic::data {

namespace fs = std::filesystem;

const char* split_name(Split s) {
  switch (s) {
    case Split::Train: return "train";
    case Split::Validation: return "validation";
    case Split::Test: return "test";
  }
  return "?";
}

Split split_from_name(const std::string& s) {
  if (s == "train") return Split::Train;
  if (s == "validation" || s == "val") return Split::Validation;
  if (s == "test") return Split::Test;
  fail("unknown split '", s, "' (expected train, validation or test; val is short for validation)");
}

std::vector<std::string> lm_corpus_names() { return {"sotu", "moby-dick"}; }

std::string clean_text(const std::string& with_mark) {
  const std::string raw = text_with_newlines(with_mark);
  std::string out;
  out.reserve(raw.size());
  size_t newlines = 0;
  for (const char c : raw) {
    if (c == '\n') {
      while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
      if (++newlines > 2) continue;
    } else {
      newlines = 0;
    }
    out.push_back(c);
  }
  // trim leading and trailing white space
  size_t b = out.find_first_not_of(" \t\n");
  size_t e = out.find_last_not_of(" \t\n");
  return b == std::string::npos ? std::string() : out.substr(b, e - b + 1);
}

Split split_of(const std::string& doc_id) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (unsigned char c : doc_id) {
    h ^= c;
    h *= 1099511628211ull;
  }
  uint64_t bucket = h % 100;
  return bucket < 90 ? Split::Train : bucket < 95 ? Split::Validation : Split::Test;
}

std::vector<Document> load_corpus(const std::string& name) {
  auto known = lm_corpus_names();
  const auto sets = classification_names();
  MIMIC_CHECK(std::find(sets.begin(), sets.end(), name) == sets.end(), "'", name, "' is a classification data set (--task cls), not a ",
              "corpus to model (", lm_corpus_choices(), ", or a text file or folder of .txt files)");
  // named as what it is, as a classification set is (helper-58's probe of 2026-12-04: "unknown corpus 'mqar'")
  MIMIC_CHECK(!is_recall_task(name), "'", name, "' is a recall task (eval scores it with --task mqar), not a corpus to model here (",
              lm_corpus_choices(), ", or a text file or folder of .txt files)");
  MIMIC_CHECK(std::find(known.begin(), known.end(), name) != known.end(), "unknown corpus '", name,
              "' (known: ", lm_corpus_choices(), ", or a text file or folder of .txt files; no such file or folder)");
  std::string dir = asset_path("corpora/" + name);
  std::vector<Document> docs;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".txt") continue;
    std::string stem = entry.path().stem().string();
    // moby-dick ships the whole book again as data.txt and a table of contents: not documents.
    if (name == "moby-dick" && (stem == "data" || stem == "contents")) continue;
    Document d;
    d.id = name + "/" + stem;
    d.corpus = name;
    if (name == "sotu") d.year = std::atoi(stem.substr(0, 4).c_str());
    std::string raw = io::read_text_file(entry.path().string());
    MIMIC_CHECK(is_valid_utf8(raw), entry.path().string(), ": not valid UTF-8");
    d.text = clean_text(raw);
    MIMIC_CHECK(!d.text.empty(), entry.path().string(), ": empty document");
    docs.push_back(std::move(d));
  }
  MIMIC_CHECK(!docs.empty(), "corpus '", name, "' has no documents in ", dir, " (run tools/setup.sh)");
  std::sort(docs.begin(), docs.end(), [](const Document& a, const Document& b) { return a.id < b.id; });
  return docs;
}

Split split_of(const Document& doc) { return doc.split ? *doc.split : split_of(doc.id); }

bool is_lm_corpus(const std::string& data) {
  const auto known = lm_corpus_names();
  return data == "all" || std::find(known.begin(), known.end(), data) != known.end();
}

std::string lm_corpus_choices() {
  std::string s = "all";
  for (const auto& n : lm_corpus_names()) s += ", " + n;
  return s;
}

bool is_text_data(const std::string& data) {
  if (is_lm_corpus(data)) return false;
  std::error_code ec;
  return !data.empty() && fs::exists(data, ec);
}

std::string data_identity(const std::string& data) { return is_text_data(data) ? path_identity(data) : data; }

namespace {

// Where a document may be cut, coarsest first: after a line break; after a space, tab or line break (between words);
// before any character (text without spaces, such as Chinese or Japanese; never inside a UTF-8 sequence).
enum class CutAt { Line, Word, Character };

bool may_cut_before(const std::string& t, size_t i, CutAt at) {
  const char prev = t[i - 1];
  switch (at) {
    case CutAt::Line: return prev == '\n';
    case CutAt::Word: return prev == '\n' || prev == ' ' || prev == '\t';
    case CutAt::Character: return (static_cast<unsigned char>(t[i]) & 0xC0) != 0x80;
  }
  return false;
}

// The allowed cut nearest `target` strictly inside (lo, hi); npos when there is none.
size_t cut_near(const std::string& t, size_t target, size_t lo, size_t hi, CutAt at) {
  for (size_t d = 0; target >= lo + d || target + d < hi; ++d) {
    if (target >= d && target - d > lo && target - d < hi && may_cut_before(t, target - d, at)) return target - d;
    if (d > 0 && target + d > lo && target + d < hi && may_cut_before(t, target + d, at)) return target + d;
  }
  return std::string::npos;
}

// 90% / 5% / 5% of the characters, cut at line breaks where that gives validation and test at least half their share
// each, else between words, else (text without spaces) between characters. Line cuts alone were taken however far
// from their share: a book on one line ended by "THE\nEND" tested on one token, and 46,000 characters on one line
// were "too short" (the newcomer probe of 2026-12-01).
void add_split_parts(const std::string& name, const std::string& path, const std::string& text, std::vector<Document>& out) {
  const size_t n = text.size();
  // between characters only for text written without spaces (under 1% of its bytes): a few English words are too
  // short, not three parts
  const auto spaces = std::count_if(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\t'; });
  const bool spaced = static_cast<size_t>(spaces) * 100 > n;
  for (const CutAt at : {CutAt::Line, CutAt::Word, CutAt::Character}) {
    if (at == CutAt::Character && spaced) continue;
    const size_t a = cut_near(text, n * 90 / 100, 0, n, at);
    const size_t b = a == std::string::npos ? std::string::npos : cut_near(text, n * 95 / 100, a, n, at);
    if (a == std::string::npos || b == std::string::npos) continue;
    if (b - a < n / 40 || n - b < n / 40) continue;  // under half of a 5% share
    const std::pair<Split, std::string> parts[] = {
        {Split::Train, text.substr(0, a)}, {Split::Validation, text.substr(a, b - a)}, {Split::Test, text.substr(b)}};
    std::vector<Document> docs;
    for (const auto& [split, part] : parts) {
      Document d;
      d.id = name + "#" + split_name(split);
      d.corpus = "text";
      d.text = clean_text(part);
      d.split = split;
      if (!d.text.empty()) docs.push_back(std::move(d));
    }
    if (docs.size() < 3) continue;
    for (auto& d : docs) out.push_back(std::move(d));
    return;
  }
  fail(path, ": too short to split into train, validation and test (", count_of(static_cast<int64_t>(n), "byte"),
       ": the 90% / 5% / 5% parts each need some text of their own; in a folder each file is split so: join short "
       "files into longer ones, or move this one out)");
}

}  // namespace

std::vector<Document> load_text_data(const std::string& path) {
  std::error_code ec;
  MIMIC_CHECK(fs::exists(path, ec), "text data not found: ", path);
  std::vector<fs::path> files;
  if (fs::is_directory(path, ec)) {
    std::string other_case, hidden;  // names that are no documents, said when nothing else is one
    for (const auto& e : fs::directory_iterator(path)) {
      const std::string name = e.path().filename().string(), ext = e.path().extension().string();
      // Hidden files are no documents: macOS's ._NAME.txt beside each copied file, an editor's .#NAME.txt (the
      // probe of 2026-12-02: a folder copied from a Mac failed on ._a.txt's bytes).
      if (name.empty() || name[0] == '.') {
        if (ext == ".txt" && hidden.empty()) hidden = name;
        continue;
      }
      if (ext != ".txt") {
        std::string lower = ext;
        for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (lower == ".txt" && other_case.empty()) other_case = name;
        continue;
      }
      // a link to nothing was skipped without a word, where an unreadable file is an error: both are
      std::error_code lec, followed;
      if (e.is_symlink(lec) && (static_cast<void>(fs::status(e.path(), followed)), followed))
        fail(e.path().string(), ": a link to ", fs::read_symlink(e.path(), lec).string(), " that cannot be followed (", followed.message(),
             "): mend or remove it");
      // a .txt that is neither a file nor a folder (folders are not read) was skipped without a word: a FIFO, a
      // socket (helper-56's probe of 2026-12-04)
      if (e.is_directory(lec)) continue;
      MIMIC_CHECK(e.is_regular_file(lec), e.path().string(), ": not a file (a FIFO, a socket or a device): each .txt in a text folder is one "
                  "document, a file; remove it or rename it");
      files.push_back(e.path());
    }
    MIMIC_CHECK(!files.empty(), path, ": no .txt files in this folder (each .txt file is one document",
                other_case.empty() ? "" : "; names end in lower-case .txt, and " + other_case + " does not",
                hidden.empty() ? "" : "; hidden files such as " + hidden + " are not read", ")");
    std::sort(files.begin(), files.end());
  } else {
    // JSON lines are classification data: read as prose they trained a language model on braces and keys without a
    // word (the newcomer probe of 2026-12-01)
    MIMIC_CHECK(!is_classification_data(path), path, ": a JSON-lines file holds classification data, not language-model text ",
                "(plain text: a .txt file or a folder of them; a classifier reads it with --task cls)");
    files.push_back(path);
  }
  std::vector<Document> docs;
  for (const auto& f : files) {
    // a document's id is its file name, and ids go into JSON (records, run state), which holds UTF-8 only
    MIMIC_CHECK(is_valid_utf8(f.filename().string()), path, ": the file name '", shown_bytes(f.filename().string()),
                "' is not valid UTF-8 (document ids are file names, and mimic's files are JSON, which holds UTF-8 "
                "only): rename it");
    const std::string raw = io::read_text_file(f.string());
    MIMIC_CHECK(is_valid_utf8(raw), f.string(), ": not valid UTF-8 (text data is read as UTF-8: a text file or folder of them)");
    const std::string text = clean_text(raw);
    MIMIC_CHECK(!text.empty(), f.string(), ": empty document");
    add_split_parts(f.filename().string(), f.string(), text, docs);
  }
  return docs;
}

}  // namespace mimic::data
