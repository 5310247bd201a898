// BERT's WordPiece tokenizer as in the original BertTokenizer: the basic tokenizer (clean-up, CJK
// splitting, lower-casing and accent stripping, punctuation splitting) followed by greedy
// longest-match-first WordPiece with "##" continuations.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "text/tokenizer.h"

namespace mimic::text {

class WordPiece : public Tokenizer {
 public:
  // vocab.txt: one token per line, id = line number.
  explicit WordPiece(const std::string& vocab_txt_path, bool do_lower_case = true);

  std::string kind() const override { return "bert-wordpiece"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_token_.size()); }
  // [CLS] tokens [SEP] (add_special_tokens), like BertTokenizer.encode.
  std::vector<int64_t> encode(const std::string& text, bool add_special_tokens = true) const override;
  // [CLS] a [SEP] b [SEP] with token types 0 for the first segment (incl. [CLS] and its [SEP]), 1 after.
  void encode_pair(const std::string& a, const std::string& b, std::vector<int64_t>& ids, std::vector<int64_t>& token_types) const;
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::string id_to_token(int64_t id) const override;
  int64_t token_to_id(const std::string& token) const override;
  int64_t pad_id() const override { return pad_; }
  int64_t cls_id() const override { return cls_; }
  int64_t sep_id() const override { return sep_; }
  int64_t mask_id() const override { return mask_; }
  int64_t unk_id() const override { return unk_; }

  // The basic tokenizer alone (exposed for tests).
  std::vector<std::string> basic_tokenize(const std::string& text) const;
  // Word pieces of the text, as strings.
  std::vector<std::string> tokenize(const std::string& text) const;

 private:
  void wordpiece(const std::u32string& word, std::vector<int64_t>& out) const;
  void encode_segment(const std::string& text, std::vector<int64_t>& out) const;
  bool lower_;
  std::unordered_map<std::string, int64_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<std::string> specials_;  // special tokens present in the vocabulary, never split
  int64_t pad_ = -1, unk_ = -1, cls_ = -1, sep_ = -1, mask_ = -1;
};

}  // namespace mimic::text
