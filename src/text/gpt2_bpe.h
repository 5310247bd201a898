// GPT-2's byte-level BPE, as OpenAI's encoder.py: regex pre-tokenization, bytes mapped to printable
// characters, merges applied by rank. Works on arbitrary bytes: decode(encode(s)) == s.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/tokenizer.h"

namespace mimic::text {

class Gpt2Bpe : public Tokenizer {
 public:
  // vocab.json (token → id) and merges.txt (first line "#version: ..." optional).
  Gpt2Bpe(const std::string& vocab_json_path, const std::string& merges_path);

  std::string kind() const override { return "gpt2-bpe"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_token_.size()); }
  // Plain BPE of the text (like encoder.py: "<|endoftext|>" in the text is ordinary text).
  std::vector<int64_t> encode(const std::string& text, bool add_special_tokens = true) const override;
  // Like encode, but literal "<|endoftext|>" becomes the special id (used to join documents).
  std::vector<int64_t> encode_with_special(const std::string& text) const;
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::string id_to_token(int64_t id) const override;
  int64_t token_to_id(const std::string& token) const override;
  int64_t eos_id() const override { return eos_; }

  // The pre-tokenization alone: byte spans of the pieces the regex yields (exposed for tests).
  static std::vector<std::string> pretokenize(const std::string& text);

 private:
  void bpe(const std::string& piece, std::vector<int64_t>& out) const;
  std::unordered_map<std::string, int64_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::unordered_map<std::string, int> ranks_;  // "a b" → rank
  std::string byte_to_unicode_[256];            // UTF-8 of the printable stand-in of each byte
  std::unordered_map<std::string, uint8_t> unicode_to_byte_;
  int64_t eos_ = -1;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache_;
  mutable std::mutex cache_mutex_;
};

}  // namespace mimic::text
