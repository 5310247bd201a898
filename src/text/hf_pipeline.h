// The parts of HfTokenizer that its two sources share (internal: included by hf_tokenizer.cpp, which loads the file
// and runs the BPE model, and hf_components.cpp, which builds the normalizer, pre-tokenizer, decoder and
// post-processor from their JSON). Not an API: nothing outside src/text/hf_*.cpp includes it.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "mimic/text/bpe.h"
#include "mimic/text/hf_tokenizer.h"

namespace mimic::text {
namespace hf {
using json = nlohmann::json;
constexpr int64_t kMaxId = int64_t{1} << 21;  // ids past this are a broken file, not a vocabulary to allocate (Gemma: 262,144)

// A string of the file in a message: JSON-quoted, so that a newline or an escape sequence in it cannot forge lines.
std::string quoted(const std::string& s);
// A token id from the file: an integer in [0, kMaxId), read without wrapping an unsigned 64-bit value.
int64_t read_id(const json& v, const std::string& what);
// The byte each character of a byte-level vocabulary stands for (GPT-2's bytes_to_unicode, inverted).
std::unordered_map<char32_t, char> byte_of_char();
// The bytes a byte-level spelling stands for; a spelling with a character outside the alphabet (an added token)
// stands for its own UTF-8 text, as in HF.
std::string spelling_bytes(const std::string& spelling, const std::unordered_map<char32_t, char>& u2b);
}  // namespace hf

struct HfTokenizer::Pipeline {
  std::string path;
  const std::unordered_map<char32_t, char> u2b = hf::byte_of_char();
  using json = nlohmann::json;
  // Where HF's alignments tie a segment to the original text's first character, which Metaspace's prepend_scheme
  // "first" asks (HF: a piece whose original offset is 0): `bytes`, how many of the text's leading bytes are tied to
  // it (0: none); `text_start`, whether the segment starts the text (then what a step inserts at its very start is
  // tied to it too, even once the first character is gone).
  struct Origin {
    bool text_start = false;
    size_t bytes = 0;
  };
  // The normalized text; `origin` carried along (in and out).
  using Normalize = std::function<std::string(const std::string&, Origin& origin)>;
  struct Piece {
    std::string text;
    size_t origin = 0;  // as above: its leading bytes tied to the original text's first character
  };
  using PreTokenize = std::function<std::vector<Piece>(std::vector<Piece>)>;
  using Decode = std::function<std::vector<std::string>(std::vector<std::string>)>;
  using PostProcess = std::function<std::vector<int64_t>(std::vector<int64_t>)>;
  Normalize normalize;
  PreTokenize pre_tokenize;
  Decode decode;
  PostProcess post_process;

  // the BPE model
  std::unordered_map<std::string, int32_t> vocab;  // the model's vocabulary: key = bytes (byte-level) or spelling
  BpeMerges merges;
  int32_t byte_id[256];      // byte-level: the token of each byte (-1: none)
  int32_t fallback_id[256];  // byte_fallback: the <0xHH> tokens (-1: none)
  bool byte_fallback = false, fuse_unk = false, ignore_merges = false;
  int32_t unk = -1;
  PieceCache cache;

  // added tokens
  struct Added {
    std::string content;  // as matched: the file's, or for a normalized token the normalizer's output of it
    int64_t id;
    bool lstrip, rstrip, single_word;
  };
  // One pass's tokens and a byte trie of their contents: node → (byte → child), and the token ending at each node
  // (-1: none). HF matches in two passes (added_vocabulary.rs): `added_raw` (normalized false) over the raw text, then
  // `added_normalized` (normalized true, their contents normalized) over each remaining segment once normalized.
  struct AddedSet {
    std::vector<Added> tokens;
    std::vector<std::unordered_map<unsigned char, int32_t>> trie{1};
    std::vector<int32_t> trie_token{-1};
    void add(Added t);
  };
  AddedSet added_raw, added_normalized;
  std::unordered_map<int64_t, std::string> decode_as;  // a normalized added token's id → its normalized form, which decode reads
  std::unordered_map<std::string, int64_t> added_ids;
  std::unordered_map<std::string, int64_t> special_ids;  // post-processor names → id

  std::string where(const std::string& part) const { return path + ": " + part; }

  Normalize normalizer(const json& n, int depth = 0);
  PreTokenize pre_tokenizer(const json& n, bool& byte_level, int depth = 0);
  Decode decoder(const json& n, int depth = 0);
  bool decodes_bytes = false;  // the decoder has a ByteLevel step (set by decoder()): it reads characters as bytes
  PostProcess post_processor(const json& n, int64_t& cls, int64_t& sep, int depth = 0);
  std::vector<int64_t> post_ids;  // every id the post-processor adds (checked against the vocabulary once read)
};

}  // namespace mimic::text
