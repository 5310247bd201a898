// BERT's WordPiece tokenizer as HF's BertTokenizer (the original BasicTokenizer + WordpieceTokenizer of
// google-research/bert, with HF's refinements), step by step:
//   1. literal special tokens ([CLS] [SEP] [MASK] [PAD] [UNK], case-sensitive) are cut out and kept whole;
//   2. clean-up: NUL, U+FFFD and every "other" character (categories C*: controls, formats, private use,
//      unassigned) except \t \n \r are dropped, white space (\t \n \r and category Zs) becomes ' ';
//   3. CJK ideographs get spaces around them;
//   4. with do_lower_case: each character lower-cased as Python's str.lower() does for that character
//      alone (HF lower-cases character by character, so there is no Greek final-sigma rule), then NFD and
//      non-spacing marks (Mn) dropped; without: NFC (HF normalises before splitting);
//   5. split on Python's white space, then around each punctuation character (ASCII !../:..@[..`{..~ and
//      categories P*);
//   6. greedy longest-match-first WordPiece with "##" continuations; a word longer than 100 characters or
//      with an unmatched rest becomes [UNK].
// Input bytes that are not well-formed UTF-8 are dropped (like the original's decode(errors="ignore")).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "mimic/text/tokenizer.h"

namespace mimic::text {

class WordPiece : public Tokenizer {
 public:
  // vocab.txt: one token per line, id = line number (a repeated token keeps its last id, as in HF).
  // Throws mimic::Error when the file is unreadable, empty, or lacks [UNK], [CLS] or [SEP].
  explicit WordPiece(const std::string& vocab_txt_path, bool do_lower_case = true);

  std::string kind() const override { return "bert-wordpiece"; }
  std::string identity() const override { return lower_ ? kind() : kind() + "-cased"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_token_.size()); }
  // [CLS] tokens [SEP] when add_special_tokens, like BertTokenizer.encode.
  std::vector<int64_t> encode(const std::string& text, bool add_special_tokens = true) const override;
  std::vector<int64_t> encode_head(const std::string& text, size_t n) const override;

  struct Pair {
    std::vector<int64_t> ids;             // [CLS] a [SEP] b [SEP]
    std::vector<int64_t> token_type_ids;  // 0 up to and including the first [SEP], 1 after
  };
  Pair encode_pair(const std::string& a, const std::string& b) const;

  // Tokens joined by spaces with "##" continuations glued on, like HF's convert_tokens_to_string
  // (special tokens included, no clean-up of spaces before punctuation).
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::string id_to_token(int64_t id) const override;
  int64_t token_to_id(const std::string& token) const override;
  int64_t pad_id() const override { return pad_; }
  int64_t cls_id() const override { return cls_; }
  int64_t sep_id() const override { return sep_; }
  int64_t mask_id() const override { return mask_; }
  int64_t unk_id() const override { return unk_; }
  bool lower_case() const { return lower_; }

  // Steps 2-5 alone (no special-token handling): the words WordPiece then splits (exposed for tests).
  std::vector<std::string> basic_tokenize(const std::string& text) const;
  // The word pieces of the text as strings, without [CLS]/[SEP].
  std::vector<std::string> tokenize(const std::string& text) const;

 private:
  void wordpiece(const std::string& word, std::vector<int64_t>& out) const;
  // Appends the text's ids to `out`, stopping once `out` holds `limit` or more (it may hold a word's pieces beyond).
  void encode_segment(const std::string& text, std::vector<int64_t>& out, size_t limit = SIZE_MAX) const;
  void encode_words(const std::string& part, std::vector<int64_t>& out, size_t limit) const;

  bool lower_;
  std::unordered_map<std::string, int64_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<std::string> specials_;  // special tokens present in the vocabulary, never split
  int64_t pad_ = -1, unk_ = -1, cls_ = -1, sep_ = -1, mask_ = -1;
};

}  // namespace mimic::text
