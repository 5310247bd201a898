// Where a language-model training run takes its batches: a prose corpus (packed blocks of the train split,
// optionally with the copy curriculum) or a recall task (examples of its train split). One interface for
// pretrain and finetune: the next batch, the position to checkpoint, and the fixed validation batches.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "mimic/data/batches.h"
#include "mimic/data/recall_tasks.h"

namespace mimic::text { class Tokenizer; }

namespace mimic::data {

class LmSource {
 public:
  virtual ~LmSource() = default;
  virtual LmBatch next() = 0;
  virtual nlohmann::json position() const = 0;            // enough to resume exactly
  virtual void seek(const nlohmann::json& position) = 0;  // a position() read back
  // The mean of `loss` over the same validation batches at every call (at most max_batches of them).
  virtual double validation_mean(int64_t max_batches, const std::function<double(const LmBatch&)>& loss) const = 0;
  // How many batches validation_mean averages for `max_batches`: fewer when the validation split holds fewer.
  virtual int64_t validation_batches(int64_t max_batches) const = 0;
  virtual bool is_recall_task() const = 0;
  // A digest of the tokens it trains and validates on ("" for a recall task, which its spec and seed define): a
  // resume and the ranks of one run compare it, so text changed under the same path is named, not trained on.
  virtual std::string data_digest() const = 0;
};

// The model a source feeds: its tokenizer (a corpus needs one; a recall task none), and its vocabulary and name (a
// recall task's ids must be the model's: RecallTaskSpec::check_fits, named by `name`).
struct LmSourceModel {
  const text::Tokenizer* tok = nullptr;
  int64_t vocab_size = 0;
  std::string name;
};

// `data`: a corpus (all, sotu, moby-dick; needs the model's tokenizer) or a recall task spec (mqar:..., ar:...; its
// seq_len must equal seq_len, its vocabulary fit the model's, its examples come from `seed`). A copy curriculum applies
// to corpora only.
std::unique_ptr<LmSource> open_lm_source(const std::string& data, const LmSourceModel& model, int64_t seq_len, int64_t batch_size,
                                         uint64_t seed, const CopyCurriculum& copy = {});

}  // namespace mimic::data
