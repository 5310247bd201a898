// GPT-2's byte-level BPE, as OpenAI's encoder.py: regex pre-tokenization, bytes mapped to printable
// characters, merges applied by rank.
//
// Input is bytes, not necessarily valid UTF-8. Well-formed UTF-8 is pre-tokenized on its code points
// exactly as encoder.py's regex does; each byte that is not part of a well-formed sequence counts as one
// character of its own that is neither letter, number nor space (so it joins a run of symbols, like a
// byte that Python's errors="surrogateescape" escapes). Pieces are byte spans of the input, so
// decode(encode(s)) == s for every byte string s.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "mimic/text/bpe.h"
#include "mimic/text/tokenizer.h"

namespace mimic::text {

class Gpt2Bpe : public Tokenizer {
 public:
  // vocab.json (token → id) and merges.txt (a first line "#version..." is skipped). Throws mimic::Error
  // naming the file and what is wrong when either is malformed or they do not fit together.
  Gpt2Bpe(const std::string& vocab_json_path, const std::string& merges_path);

  std::string kind() const override { return "gpt2-bpe"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(token_bytes_.size()); }
  // Plain BPE of the text; add_special_tokens is ignored (GPT-2 adds none). Like encoder.py, a literal
  // "<|endoftext|>" in the text is ordinary text (it becomes several tokens).
  std::vector<int64_t> encode(const std::string& text, bool add_special_tokens = true) const override;
  // Like encode, but each literal "<|endoftext|>" becomes the end-of-text id (as HF's GPT2Tokenizer does
  // with its special token); the text between is encoded separately. Used to join documents.
  std::vector<int64_t> encode_with_special(const std::string& text) const;
  // The bytes of the tokens, concatenated. Unlike encoder.py, which decodes them as UTF-8 with
  // errors="replace", the raw bytes are returned (a cut through a multi-byte character stays cut).
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::string id_to_token(int64_t id) const override;  // the vocabulary's spelling ("Ġworld")
  int64_t token_to_id(const std::string& token) const override;
  int64_t eos_id() const override { return eos_; }

  // The regex pre-tokenization alone: the byte spans of the pieces (exposed for tests; HF tokenizer.json's
  // ByteLevel pre-tokenizer with use_regex splits with it too).
  static std::vector<std::string> pretokenize(const std::string& text);
  // OpenAI's bytes_to_unicode(): the character that stands for each byte in a byte-level vocabulary.
  static std::vector<char32_t> byte_alphabet();

 private:
  // Appends the ids of one pre-tokenized piece.
  void bpe(const std::string& piece, std::vector<int64_t>& out) const;

  std::unordered_map<std::string, int64_t> vocab_;  // token spelling → id
  std::vector<std::string> id_to_token_;
  std::vector<std::string> token_bytes_;  // id → the bytes it stands for
  int32_t byte_id_[256];                  // id of the single-byte token of each byte
  BpeMerges merges_;
  int64_t eos_ = -1;
  PieceCache cache_;
};

}  // namespace mimic::text
