// The tokenizer interface every mimic command uses, and loading a tokenizer from a model directory.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mimic::text {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string kind() const = 0;  // "gpt2-bpe" | "bert-wordpiece" | "hf-byte-bpe" | "hf-bpe"
  // What names this tokenizer's output among others of its kind (token caches are kept per identity):
  // the kind, plus what distinguishes instances (BERT's casing, a tokenizer.json's content digest).
  virtual std::string identity() const { return kind(); }
  virtual int64_t vocab_size() const = 0;
  // Token ids of `text` (UTF-8). GPT-2: plain BPE, no special tokens added. BERT: [CLS] … [SEP] added
  // when add_special_tokens is true (the default, like the original).
  virtual std::vector<int64_t> encode(const std::string& text, bool add_special_tokens = true) const = 0;
  // The first n ids of encode(text, false), or all of them where it has fewer: a text's head, for a reader that keeps
  // no more (a classifier's example). WordPiece tokenizes no word past the head (a 38 MB line tokenized whole took
  // 1.3 GB to keep 128 tokens), though it still scans the whole text for invalid bytes and literal special tokens; the
  // others tokenize the whole text and cut.
  virtual std::vector<int64_t> encode_head(const std::string& text, size_t n) const;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual std::string id_to_token(int64_t id) const = 0;
  virtual int64_t token_to_id(const std::string& token) const = 0;  // -1 if absent
  // Special ids (-1 where the tokenizer has none).
  virtual int64_t eos_id() const { return -1; }   // GPT-2 <|endoftext|>
  virtual int64_t bos_id() const { return -1; }   // a tokenizer.json's bos_token (Llama's <s>); GPT-2's is its EOS
  virtual int64_t pad_id() const { return -1; }
  virtual int64_t cls_id() const { return -1; }
  virtual int64_t sep_id() const { return -1; }
  virtual int64_t mask_id() const { return -1; }
  virtual int64_t unk_id() const { return -1; }
  // The ids a document opens with in a token stream (token caches, eval's text, a passkey prompt): what HF's
  // post-processor puts before a text it encodes with special tokens — Llama's <s>, Llama 3's <|begin_of_text|> —
  // so that a model trained with a BOS before every text is trained, scored and prompted with one, as generate's
  // prompt (encode with special tokens) already is. None for GPT-2 and Qwen (their tokenizers add none) and for
  // BERT's WordPiece: its [CLS] opens a sequence a classifier reads (classify adds it), and mimic's masked-LM
  // streams, and the models shipped trained on them, separate documents by [SEP] alone.
  virtual std::vector<int64_t> document_start() const { return {}; }
  // A text as one document of a token stream: document_start(), then encode(text) without special tokens — what a
  // token cache holds for each document, eval scores for --text and a passkey prompt is.
  std::vector<int64_t> encode_document(const std::string& text) const;
  // The text `ids` add after `before`, as the decoder writes them following it: what a continuation prints after its
  // prompt. Decoded alone, a SentencePiece continuation loses the space its first piece opens with (the decoder strips
  // a text's leading space: "▁surprise" alone is "surprise"); decoded after the prompt it keeps it. Where the
  // prompt's text is not a prefix of the whole (a byte sequence cut at the seam), `ids` decoded alone.
  std::string decode_after(const std::vector<int64_t>& before, const std::vector<int64_t>& ids) const;
};

// Loads the tokenizer stored in a HF-layout model directory: tokenizer.json (a BPE model, with the folder's
// tokenizer_config.json naming its special tokens; hf_tokenizer.h), else vocab.json + merges.txt (GPT-2 BPE) or
// vocab.txt (BERT WordPiece — also when tokenizer.json holds a WordPiece model; tokenizer_config.json's
// do_lower_case is honoured, default true).
// Throws mimic::Error naming the directory when neither is present or a file is malformed.
// `default_class` is the class HF's AutoTokenizer takes for a tokenizer.json whose tokenizer_config.json names none
// (config.json's tokenizer_class, else its model type's), `why` where it comes from; models::load_tokenizer(dir)
// supplies both from the model-family registry, which the stages call.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir, const std::string& default_class = "", const std::string& why = "");

}  // namespace mimic::text
