// Public-domain English corpora (fetched by tools/setup.sh) as documents with deterministic splits.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mimic/core/utf8.h"

namespace mimic::data {

enum class Split { Train, Validation, Test };
const char* split_name(Split s);          // "train" | "validation" | "test"
Split split_from_name(const std::string& s);  // accepts train|validation|val|test

struct Document {
  std::string id;      // stable id, e.g. "sotu/1862_abraham_lincoln_r", "moby-dick/chapter_12"
  std::string corpus;  // "sotu" | "moby-dick"
  int year = 0;        // sotu: year of the address
  std::string text;    // cleaned UTF-8 text
  // Set for a user's text (load_text_data), whose split is its position; unset for the corpora, whose documents
  // are split by id (split_of).
  std::optional<Split> split = std::nullopt;
};

// Names of the language-modelling corpora mimic knows ("sotu", "moby-dick"); "all" means every one. A --data that
// names none of them and is an existing file or folder is the user's own text (load_text_data).
std::vector<std::string> lm_corpus_names();
// THE answer to "does --data name a corpus?": "all" or one of lm_corpus_names(). Every stage asks this, never a
// list of names of its own.
bool is_lm_corpus(const std::string& data);
// "all, sotu, moby-dick": the names --data takes for a corpus, for messages.
std::string lm_corpus_choices();
// What a run's settings keep of --data: a corpus or recall-task name as given, the user's own file or folder as its
// path_identity (core/paths.h), so that a run resumes however the path is spelled.
std::string data_identity(const std::string& data);

// Loads a corpus from the asset folder, cleaned: line endings normalised to \n, trailing spaces removed,
// runs of more than two newlines folded, and the text checked to be valid, non-empty UTF-8 (a bad file is
// a mimic::Error naming it). Documents come sorted by id.
std::vector<Document> load_corpus(const std::string& name);

// The split a document belongs to: a pure function of its id (FNV-1a hash, 90/5/5), so a document is
// never in two splits and splits do not change when documents are added.
Split split_of(const std::string& doc_id);

// The split of a document: its own (user text) or the one its id hashes to.
Split split_of(const Document& doc);

// A user's text as --data takes it: a UTF-8 text file, or a folder whose *.txt files (top level, sorted) are the
// documents. Each document is split by position, at line breaks: its first 90% of characters train, the next 5%
// validation, the last 5% test (so a single file trains, validates and tests on text it did not train on); where the
// line breaks leave validation or test under half its share the cuts fall between words, and in text written without
// spaces between characters. Each part is a Document with id "<file>#<split>". A file that is not UTF-8, a .jsonl file
// (classification data), an empty folder, or a document too short for three parts is a mimic::Error saying which.
std::vector<Document> load_text_data(const std::string& path);
// True when `data` names a user's text (an existing file or folder) rather than a corpus ("all", "sotu", ...).
// A corpus name wins over a file of the same name in the working folder.
bool is_text_data(const std::string& data);

// UTF-8 checks and the shown form of odd bytes live in core (core/utf8.h), for the boundaries outside data too.
using mimic::is_valid_utf8;
using mimic::shown_bytes;

// Normalises text the way load_corpus does (exposed for user files): a leading byte-order mark dropped, line endings
// as \n, trailing spaces removed, at most two line breaks in a row.
std::string clean_text(const std::string& raw);

}  // namespace mimic::data
