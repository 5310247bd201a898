#include "mimic/data/lm_source.h"

#include <torch/torch.h>

#include <optional>

#include "mimic/core/error.h"
#include "mimic/core/hash.h"
#include "mimic/core/json_keys.h"
#include "mimic/data/token_cache.h"

namespace mimic::data {

namespace {

// What the refusal of a split too small for one batch calls it.
std::string split_name(const std::string& corpus, const char* split) { return "--data " + corpus + ": its " + split + " split"; }

class CorpusSource : public LmSource {
 public:
  CorpusSource(const std::string& corpus, const text::Tokenizer& tok, int64_t seq_len, int64_t batch_size, uint64_t seed,
               const CopyCurriculum& copy)
      : train_(corpus_token_cache(corpus, Split::Train, tok)),
        val_(corpus_token_cache(corpus, Split::Validation, tok)),
        val_name_(split_name(corpus, "validation")),
        batches_(train_, seq_len, batch_size, seed, copy, split_name(corpus, "train")),
        seq_len_(seq_len),
        batch_size_(batch_size) {
    // before any training: a run that trained and then found no validation batch failed after the work, leaving a
    // folder with only its log (the probe of 2026-11-27)
    validation_slice();
  }
  LmBatch next() override { return batches_.next(); }
  nlohmann::json position() const override {
    auto p = batches_.position();
    return {{"epoch", p.epoch}, {"index", p.index}};
  }
  void seek(const nlohmann::json& j) override {
    batches_.seek({json_int(j, "epoch", "the data position", 0), json_int(j, "index", "the data position", 0)});
  }
  double validation_mean(int64_t max_batches, const std::function<double(const LmBatch&)>& loss) const override {
    // The first batches of a fixed shuffle (seed 12345) of the validation split's blocks.
    PackedBatches slice = validation_slice();
    const int64_t n = validation_batches(max_batches);
    MIMIC_CHECK(n > 0, "the validation split is too small for one batch of ", batch_size_, " x ", seq_len_, " tokens");
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += loss(slice.next());
    return sum / static_cast<double>(n);
  }
  int64_t validation_batches(int64_t max_batches) const override {
    return std::min<int64_t>(max_batches, validation_slice().blocks_per_epoch() / batch_size_);
  }
  bool is_recall_task() const override { return false; }
  std::string data_digest() const override {
    Hasher h;
    for (const auto* c : {&train_, &val_}) {
      const uint64_t n = static_cast<uint64_t>(c->size());
      h.bytes(&n, sizeof n);
      h.bytes(c->raw(), c->raw_bytes());
    }
    return h.hex();
  }

 private:
  // The validation split's blocks in a fixed shuffle (seed 12345): validation reads its first batches.
  PackedBatches validation_slice() const { return PackedBatches(val_, seq_len_, batch_size_, /*seed=*/12345, {}, val_name_); }
  TokenCache train_, val_;
  std::string val_name_;
  PackedBatches batches_;
  int64_t seq_len_, batch_size_;
};

class RecallSource : public LmSource {
 public:
  RecallSource(RecallTaskSpec spec, int64_t batch_size, uint64_t seed) : spec_(std::move(spec)), batch_size_(batch_size), seed_(seed) {}
  LmBatch next() override {
    auto b = recall_batch(spec_, seed_, Split::Train, next_, batch_size_);
    next_ += batch_size_;
    return b;
  }
  nlohmann::json position() const override { return {{"example", next_}}; }
  void seek(const nlohmann::json& j) override {
    next_ = json_int(j, "example", "the recall-task position", 0);
  }
  double validation_mean(int64_t max_batches, const std::function<double(const LmBatch&)>& loss) const override {
    MIMIC_CHECK(max_batches >= 1, "validation needs at least one batch");
    double sum = 0;
    for (int64_t i = 0; i < max_batches; ++i) sum += loss(recall_batch(spec_, seed_, Split::Validation, i * batch_size_, batch_size_));
    return sum / static_cast<double>(max_batches);
  }
  int64_t validation_batches(int64_t max_batches) const override { return max_batches; }  // drawn, never exhausted
  bool is_recall_task() const override { return true; }
  std::string data_digest() const override { return ""; }

 private:
  RecallTaskSpec spec_;
  int64_t batch_size_;
  uint64_t seed_;
  int64_t next_ = 0;
};

}  // namespace

std::unique_ptr<LmSource> open_lm_source(const std::string& data, const LmSourceModel& model, int64_t seq_len, int64_t batch_size,
                                         uint64_t seed, const CopyCurriculum& copy) {
  MIMIC_CHECK(seq_len >= 1 && batch_size >= 1, "sequence length and batch size must be positive");
  copy.validate();
  if (is_recall_task(data)) {
    auto spec = RecallTaskSpec::parse(data);
    MIMIC_CHECK(seq_len == spec.seq_len, "--seq-len ", seq_len, " differs from the task's seq_len ", spec.seq_len, " (", data, ")");
    spec.check_fits(model.vocab_size, model.name);
    MIMIC_CHECK(copy.fraction == 0, "the copy curriculum applies to prose corpora, not to ", data);
    return std::make_unique<RecallSource>(std::move(spec), batch_size, seed);
  }
  MIMIC_CHECK(model.tok != nullptr, "--data ", data, ": a corpus needs the model's tokenizer");
  return std::make_unique<CorpusSource>(data, *model.tok, seq_len, batch_size, seed, copy);
}

}  // namespace mimic::data
