// Public-domain English corpora (fetched by tools/setup.sh) as documents with deterministic splits.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mimic::data {

enum class Split { Train, Validation, Test };
const char* split_name(Split s);          // "train" | "validation" | "test"
Split split_from_name(const std::string& s);  // accepts train|validation|val|test

struct Document {
  std::string id;      // stable id, e.g. "sotu/1862_abraham_lincoln_r", "moby-dick/chapter_12"
  std::string corpus;  // "sotu" | "moby-dick"
  int year = 0;        // sotu: year of the address
  std::string text;    // cleaned UTF-8 text
};

// Names of the language-modelling corpora mimic knows ("sotu", "moby-dick"); "all" means every one.
std::vector<std::string> lm_corpus_names();

// Loads a corpus from the asset folder, cleaned: line endings normalised to \n, trailing spaces removed,
// runs of more than two newlines folded, and the text checked to be valid, non-empty UTF-8 (a bad file is
// a mimic::Error naming it). Documents come sorted by id.
std::vector<Document> load_corpus(const std::string& name);

// The split a document belongs to: a pure function of its id (FNV-1a hash, 90/5/5), so a document is
// never in two splits and splits do not change when documents are added.
Split split_of(const std::string& doc_id);

// True when `s` is valid UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool is_valid_utf8(const std::string& s);

// Normalises text the way load_corpus does (exposed for user files).
std::string clean_text(const std::string& raw);

}  // namespace mimic::data
