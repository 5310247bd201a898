// Token caches: a corpus split tokenized once and stored as a flat binary file of uint16 token ids
// (both GPT-2's 50,257 and BERT's 30,522 ids fit), documents separated by the tokenizer's separator
// (<|endoftext|> for GPT-2, [SEP] for BERT), read back memory-mapped. Format: docs/formats.md.
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
  int64_t documents = 0;
  int64_t tokens = 0;         // including separators
};

// Tokenizes `docs` (in order) and writes PATH (ids) + PATH.json (TokenCacheInfo + document offsets)
// atomically. Returns the info.
TokenCacheInfo write_token_cache(const std::string& path, const text::Tokenizer& tok, const std::vector<Document>& docs);

class TokenCache {
 public:
  static TokenCache open(const std::string& path);  // throws mimic::Error on a missing or inconsistent cache
  const TokenCacheInfo& info() const { return info_; }
  int64_t size() const { return info_.tokens; }
  int64_t operator[](int64_t i) const { return data_[i]; }
  const uint16_t* data() const { return data_; }
  // Start offset of each document (documents_+1 entries, last = size()).
  const std::vector<int64_t>& document_offsets() const { return offsets_; }

 private:
  struct Mapping;
  std::shared_ptr<Mapping> map_;
  const uint16_t* data_ = nullptr;
  TokenCacheInfo info_;
  std::vector<int64_t> offsets_;
};

// The cache of a named corpus ("sotu", "moby-dick" or "all") and split for a tokenizer, built on first
// use under $MIMIC_CACHE/data/<tokenizer kind>/<corpus>.<split>.bin.
TokenCache corpus_token_cache(const std::string& corpus, Split split, const text::Tokenizer& tok);

}  // namespace mimic::data
