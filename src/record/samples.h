// The samples `record` takes from --data (internal to record/; SampleReader in record.h is the public face):
// the token stream of a corpus, classification set or text file, cut into consecutive blocks of seq_len.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "mimic/record/record.h"

namespace mimic::text { class Tokenizer; }

namespace mimic::record {

// The token stream samples are cut from.
struct Stream {
  std::function<int64_t(int64_t)> at;
  int64_t size = 0;
  std::shared_ptr<void> keep;  // the memory-mapped cache or the token vector
};

// The stream of --data (o.data, o.split) tokenized with `tok`; *data_id: the corpus or set name, or the
// file's absolute path. A recall task (mqar:..., ar:...) needs no tokenizer (tok may be null): its stream is
// the inputs of examples 0 .. o.samples−1 (1,000 when 0) of the split, task seed 0, seq_len tokens each
// (seq_len must be the task's; its vocabulary fit the model's `model_vocab`: data::RecallTaskSpec::check_fits).
Stream open_stream(const RecordOptions& o, const text::Tokenizer* tok, int64_t seq_len, int64_t model_vocab, std::string* data_id);
// The tokens per sample of o (record and distill alike): o.seq_len, else a recall task's own length, else
// min(256, context); refused unless it fits the model's context (and holds [CLS] token [SEP] when cls_sep).
// `context_note`: where a capped context comes from (ModelConfig::context_note), named in the refusal. With --repeat
// the default length leaves an even room after the framing (`tok`'s opening, or [CLS] and [SEP]).
int64_t sample_length(const RecordOptions& o, int64_t context, const std::string& context_note, bool cls_sep,
                      const text::Tokenizer* tok = nullptr);
// The tokenizer of o.model_dir, or null for a recall task (which has none).
std::unique_ptr<text::Tokenizer> record_tokenizer(const RecordOptions& o);
// Word-wise FNV-style hash of the stream (identity of token streams, not cryptographic).
std::string stream_digest(const Stream& s);

// Samples: consecutive blocks of the stream (T tokens; a family with cls_sep framing, e.g. BERT: [CLS] + T-2
// tokens + [SEP]); the last block may be shorter: it is padded and masked.
struct Sampler {
  const Stream& stream;
  bool cls_sep;
  int64_t seq_len, block;
  int64_t cls = -1, sep = -1, pad = 0;
  bool repeat = false;  // each block appears twice in its sample (block = half the room)
  std::vector<int64_t> opening;  // ids before a repeated sample's [A A] (a causal tokenizer's document start)
  int64_t available() const { return (stream.size + block - 1) / block; }
  // input_ids and attention_mask (int64) [count, seq_len] of samples [begin, begin+count).
  std::pair<at::Tensor, at::Tensor> batch(int64_t begin, int64_t count) const;
};

// The sampler of a stream: framing ([CLS]/[SEP] when cls_sep) and padding from the tokenizer (token 0
// without one); `repeat`: samples [A A] (the room left by the framing must be even), opened as eval's copy runs are
// by the tokenizer's document start (a Llama's <s>) where it has one: [<s> A A].
Sampler make_sampler(const Stream& stream, const text::Tokenizer* tok, bool cls_sep, int64_t seq_len, bool repeat);

}  // namespace mimic::record
