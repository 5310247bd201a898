// Token caches: a corpus split tokenized once and stored as a flat binary file of token ids — uint16 when
// the vocabulary fits (GPT-2's 50,257, BERT's 30,522, Mistral's 32,000), else uint32 (Llama 3's 128,256,
// Qwen's 151,669) — documents separated by the tokenizer's separator (<|endoftext|> for GPT-2, [SEP] for
// BERT, the eos token of a tokenizer.json folder), each opened by the tokenizer's document start where it has
// one (Llama's <s>), read back memory-mapped. Format: docs/formats.md.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mimic/data/corpus.h"

namespace mimic::text { class Tokenizer; }

namespace mimic::data {

struct TokenCacheInfo {
  std::string tokenizer;      // tokenizer kind
  int64_t vocab_size = 0;
  int64_t separator = -1;     // id placed after every document
  std::vector<int64_t> document_start;  // ids placed before every document (Tokenizer::document_start; none for most)
  int64_t documents = 0;
  int64_t tokens = 0;         // including separators and document starts
};

// Tokenizes `docs` (in order) and writes PATH (ids) + PATH.json (TokenCacheInfo + document offsets)
// atomically. Returns the info.
TokenCacheInfo write_token_cache(const std::string& path, const text::Tokenizer& tok, const std::vector<Document>& docs);

class TokenCache {
 public:
  static TokenCache open(const std::string& path);  // throws mimic::Error on a missing or inconsistent cache
  const TokenCacheInfo& info() const { return info_; }
  int64_t size() const { return info_.tokens; }
  int64_t operator[](int64_t i) const { return wide_ ? static_cast<const uint32_t*>(data_)[i] : static_cast<const uint16_t*>(data_)[i]; }
  std::vector<int64_t> ids() const {  // all of them, copied
    std::vector<int64_t> out(static_cast<size_t>(size()));
    for (int64_t i = 0; i < size(); ++i) out[static_cast<size_t>(i)] = (*this)[i];
    return out;
  }
  // The file's bytes as mapped (2 or 4 per token): what a digest of the data reads.
  const void* raw() const { return data_; }
  size_t raw_bytes() const { return static_cast<size_t>(info_.tokens) * (wide_ ? 4 : 2); }
  // Start offset of each document (documents_+1 entries, last = size()).
  const std::vector<int64_t>& document_offsets() const { return offsets_; }

 private:
  struct Mapping;
  std::shared_ptr<Mapping> map_;
  const void* data_ = nullptr;
  bool wide_ = false;  // uint32 ids
  TokenCacheInfo info_;
  std::vector<int64_t> offsets_;
};

// The cache of a named corpus ("sotu", "moby-dick" or "all") and split for a tokenizer, built on first
// use under $MIMIC_CACHE/data/<tokenizer identity>/<corpus>.<split>.bin (Tokenizer::identity: two tokenizers
// of one kind with different files never share a cache). A cache whose document start is not the tokenizer's
// (one written before caches had them) is written again.
TokenCache corpus_token_cache(const std::string& corpus, Split split, const text::Tokenizer& tok);

}  // namespace mimic::data
