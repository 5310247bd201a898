// HF `tokenizer.json` with a BPE model: byte-level BPE (GPT-2, Llama 3, Qwen2/3) and SentencePiece-style
// BPE with byte fallback (Llama 2, Mistral). The file's pipeline is run as HF's tokenizers runs it:
//   added tokens split out of the raw text (longest match; lstrip/rstrip honoured)
//   → normalizer (NFC, NFD, Lowercase, Prepend, Replace, Strip, Sequence) on each remaining segment
//   → pre-tokenizer (Split with a regex or string, ByteLevel, Metaspace, Digits, Whitespace,
//     WhitespaceSplit, Sequence)
//   → BPE model (vocab, merges as "a b" or ["a", "b"], ignore_merges, byte_fallback, unk_token, fuse_unk)
//   → post-processor when special tokens are asked for (TemplateProcessing, BertProcessing,
//     RobertaProcessing, ByteLevel, Sequence);
// decoding runs the decoder (ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence).
// Any other component, and any option of these that changes the result and is not implemented, is
// refused at load with a mimic::Error naming the file and the component — never tokenized differently.
//
// Input is bytes, not necessarily valid UTF-8: a byte outside a well-formed sequence is a character of
// its own that no letter/number/space class matches; byte-level models encode it as its byte, byte
// fallback as <0xHH>. Differences from HF, stated: a character with no token, no byte fallback and no
// unk_token is dropped (as HF does) — mimic cannot refuse what a corpus happens to contain.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "mimic/text/tokenizer.h"

namespace mimic::text {

// The files and facts beside tokenizer.json that decide how HF's AutoTokenizer encodes with it.
struct HfTokenizerFolder {
  // tokenizer_config.json ("" for none): the special tokens (eos_token, bos_token, pad_token), the tokenizer class and
  // its flags
  std::string config_path;
  // special_tokens_map.json ("" for none): in a folder whose tokenizer_config.json has no added_tokens_decoder (one
  // saved before transformers 4.34, or none at all), its tokens replace the config's, as transformers reads it
  std::string special_tokens_map_path;
  // The class AutoTokenizer takes where tokenizer_config.json names none ("" for none): config.json's
  // tokenizer_class, else its model type's (models::load_tokenizer reads it from the family registry)
  std::string default_class;
  std::string default_class_why;  // where it comes from, for messages: "config.json's model_type llama"
};

class HfTokenizer : public Tokenizer {
 public:
  // tokenizer.json, and the folder's tokenizer_config.json when given ("" for none): it names the
  // special tokens (eos_token, bos_token, pad_token) as HF's loaders read them; for transformers' Llama tokenizer
  // classes its add_bos_token/add_eos_token must encode as tokenizer.json's post-processor does (transformers 4
  // follows the flags, 5 the file: where they differ the folder is refused).
  explicit HfTokenizer(const std::string& tokenizer_json_path, const std::string& tokenizer_config_path = "");
  HfTokenizer(const std::string& tokenizer_json_path, const HfTokenizerFolder& folder);
  // The same from the file's text and its parse, read already (load_tokenizer looks at the model's type first).
  HfTokenizer(const std::string& tokenizer_json_path, const std::string& file_text, const nlohmann::json& file,
              const HfTokenizerFolder& folder);
  ~HfTokenizer() override;

  std::string kind() const override { return byte_level_ ? "hf-byte-bpe" : "hf-bpe"; }
  // kind-<digest of tokenizer.json and the special tokens>: Llama 3's and Qwen's never share a token cache
  std::string identity() const override { return kind() + "-" + digest_; }
  int64_t vocab_size() const override { return static_cast<int64_t>(spelling_.size()); }
  // The ids of `text`: added tokens in the text become their ids (as HF encodes them, special or not);
  // with add_special_tokens the post-processor adds its tokens (e.g. Llama's <s> / <|begin_of_text|>).
  std::vector<int64_t> encode(const std::string& text, bool add_special_tokens = true) const override;
  // The decoder's bytes (an id of a special token gives its text; an id past the tokenizer's vocabulary, which a
  // model's padded embedding may produce, gives nothing, as in HF).
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::string id_to_token(int64_t id) const override;
  int64_t token_to_id(const std::string& token) const override;
  int64_t eos_id() const override { return eos_; }
  int64_t pad_id() const override { return pad_; }
  int64_t cls_id() const override { return cls_; }
  int64_t sep_id() const override { return sep_; }
  int64_t unk_id() const override { return unk_; }
  int64_t bos_id() const override { return bos_; }
  std::vector<int64_t> document_start() const override { return start_; }

  struct Pipeline;  // the parsed components (hf_tokenizer.cpp)

 private:
  HfTokenizer(const std::string& path, const std::string& file_text, const HfTokenizerFolder& folder);
  void encode_segment(const std::string& text, bool first_segment, std::vector<int64_t>& out) const;
  void encode_piece(const std::string& piece, std::vector<int64_t>& out) const;

  std::unique_ptr<Pipeline> p_;
  bool byte_level_ = false;
  std::vector<std::string> spelling_;  // id → spelling in the file ("" for an unused id)
  std::string digest_;
  int64_t eos_ = -1, bos_ = -1, pad_ = -1, cls_ = -1, sep_ = -1, unk_ = -1;
  std::vector<int64_t> start_;  // the post-processor's ids before the text
};

}  // namespace mimic::text
