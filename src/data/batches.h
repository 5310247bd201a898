// Training batches: packed language-model sequences and BERT masked-LM masking.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "mimic/data/token_cache.h"

namespace mimic::data {

// A permutation of 0..n-1 for an epoch: Fisher–Yates driven by a generator seeded with (seed, epoch), so
// it is identical on every platform. Every shuffled stream of mimic uses it.
std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch);

// Where a batch stream stands: enough to resume it exactly.
struct StreamPosition {
  int64_t epoch = 0;
  int64_t index = 0;  // next block within the epoch's order
};

struct LmBatch {
  at::Tensor input_ids;  // int64 [B, T]
  at::Tensor labels;     // int64 [B, T] (causal: next tokens; MLM: original ids at masked positions, -100 elsewhere)
  at::Tensor attention_mask;  // int64 [B, T], all ones for packed sequences
};

// Rows [part·B/parts, (part+1)·B/parts) of a batch of B rows: the share of data-parallel rank `part` of `parts`
// in a global batch that every rank draws alike, so that N ranks × B/N rows see exactly the batches one process
// with B rows sees. B must be a multiple of parts.
LmBatch rows_of(const LmBatch& batch, int64_t part, int64_t parts);

// The batch on `device` (batches are drawn on the CPU: the same tokens on any device). No copy when it is there.
LmBatch to_device(const LmBatch& batch, c10::Device device);

// A copy curriculum: in a fraction of the packed blocks an earlier span of the block recurs later in it
// (copied over the tokens that stood there), so that predicting the second occurrence pays for looking back
// at the first — the in-context recall ("induction") that plain prose rewards too rarely for a small model
// trained briefly to learn it. Per chosen block: a span length L drawn log-uniformly in [min_span,
// max_span] (capped at half the block), a source start s and a destination d >= s + L, both uniform; the
// labels follow the edited block. The draws are a pure function of (seed, epoch, index of the block), so
// a resumed stream edits the same blocks the same way. fraction 0: plain prose.
// `copies` K > 1 makes the span recur K times (each copy after the previous one, gaps uniform in what room
// is left; L is then capped at n/(K+1)): more of each block rewards looking back, and a span seen several
// times teaches that a match keeps paying. K = 1 draws exactly what the one-copy curriculum drew.
// `random_fraction` R > 0: of the edited blocks, a share R first has its source span overwritten with tokens
// drawn uniformly from a pool (PackedBatches uses the train split's `random_vocab` most frequent tokens).
// Prose spans can be half-predicted from grammar alone; a random span's copies can only be predicted by
// looking back (previous-token head + induction head), so every gradient on them pushes toward that
// circuit. The first reading of a random span is left unscored (labels -100): it is unpredictable, and
// scoring it would only teach the pool's unigram distribution. R = 0 draws exactly what it drew before.
struct CopyCurriculum {
  double fraction = 0;
  int64_t min_span = 8;
  int64_t max_span = 128;
  int64_t copies = 1;
  double random_fraction = 0;
  int64_t random_vocab = 2000;
  void validate() const;  // a mimic::Error naming the bad value
};

// Applies the curriculum to one block of n tokens (in place) with draws keyed by (seed, epoch, index);
// returns the span copied (source s, length L, the start of every copy in order, whether the source was
// filled from `pool`), or L = 0 when the block was left as it was. `pool` must be non-empty when
// c.random_fraction > 0.
struct CopiedSpan {
  int64_t source = 0, length = 0;
  std::vector<int64_t> dests;
  bool random = false;
};
CopiedSpan apply_copy_curriculum(int64_t* block, int64_t n, const CopyCurriculum& c, uint64_t seed, int64_t epoch, int64_t index,
                                 const std::vector<int64_t>& pool = {});

// The `n` most frequent token ids of a cache, most frequent first (ties by smaller id), without the
// document separator and document start; fewer if the cache holds fewer distinct tokens.
std::vector<int64_t> most_frequent_tokens(const TokenCache& cache, int64_t n);

// Packs the token stream into blocks of T+1 tokens (block i starts at token i·T; documents separated by
// the cache's separator) and yields them in an order shuffled per epoch by (seed, epoch), B at a time.
// inputs = block[0:T], labels = block[1:T+1], except that a document-start token (the cache's document_start:
// Mistral's <s>, which follows every </s>) is no target (-100), as eval's perplexity scores none. Deterministic for a
// given (cache, T, B, seed). `data` names the tokens in the refusal of too few for one batch ("--data F: its train
// split"), which says what one batch takes and how to make do with less.
class PackedBatches {
 public:
  PackedBatches(const TokenCache& cache, int64_t seq_len, int64_t batch_size, uint64_t seed, CopyCurriculum copy = {},
                const std::string& data = "the data");
  LmBatch next();
  int64_t blocks_per_epoch() const { return static_cast<int64_t>(order_.size()); }
  StreamPosition position() const { return pos_; }
  void seek(StreamPosition p);
  // The block a position refers to (start token offset); exposed for tests.
  int64_t block_start(int64_t epoch, int64_t index);

 private:
  void shuffle_for(int64_t epoch);
  const TokenCache& cache_;
  int64_t seq_len_, batch_size_;
  uint64_t seed_;
  CopyCurriculum copy_;
  std::vector<int64_t> pool_;  // random-span tokens (copy_.random_fraction > 0)
  StreamPosition pos_;
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;
};

// BERT masked-LM corruption (Devlin et al.): choose each non-special position with probability `rate`;
// of the chosen, 80% become [MASK], 10% a random token, 10% stay. labels hold the original id at chosen
// positions and -100 elsewhere. `special` marks positions never chosen ([CLS], [SEP], [PAD]). Every row (of 2-D ids;
// 1-D ids are one row) with a non-special position has at least one chosen: one drawn uniformly where none was.
struct MlmMasking {
  double rate = 0.15;
  int64_t mask_id = 103;
  int64_t vocab_size = 30522;
  int64_t first_random_id = 999;  // random replacements are drawn from [first_random_id, vocab_size): real word pieces
};
void mask_tokens(at::Tensor& input_ids, at::Tensor& labels, const at::Tensor& special, const MlmMasking& m, std::mt19937_64& rng);

}  // namespace mimic::data
