#include "mimic/record/samples.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>

#include "mimic/core/error.h"
#include "mimic/core/hash.h"
#include "mimic/data/classification.h"
#include "mimic/data/corpus.h"
#include "mimic/data/recall_tasks.h"
#include "mimic/data/token_cache.h"
#include "mimic/io/atomic_file.h"
#include "mimic/models/config.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"
#include "mimic/models/tokenizer.h"

namespace mimic::record {

namespace fs = std::filesystem;

std::unique_ptr<text::Tokenizer> record_tokenizer(const RecordOptions& o) {
  if (data::is_recall_task(o.data)) return nullptr;
  return models::load_tokenizer(o.model_dir);
}

Stream open_stream(const RecordOptions& o, const text::Tokenizer* tok, int64_t seq_len, int64_t model_vocab, std::string* data_id) {
  Stream s;
  if (data::is_recall_task(o.data)) {
    const auto spec = data::RecallTaskSpec::parse(o.data);
    spec.check_fits(model_vocab, o.model_dir);  // record's and online distill's reading of a task, before any id is drawn
    MIMIC_CHECK(seq_len == spec.seq_len, "--seq-len ", seq_len, " differs from the task's seq_len ", spec.seq_len, " (", o.data,
                "): give --seq-len ", spec.seq_len);
    const int64_t n = o.samples > 0 ? o.samples : 1000;
    auto ids = std::make_shared<std::vector<int64_t>>();
    ids->reserve(static_cast<size_t>(n * seq_len));
    const auto split = data::split_from_name(o.split);
    for (int64_t i = 0; i < n; ++i) {
      auto ex = data::make_recall_example(spec, 0, split, i);
      ids->insert(ids->end(), ex.tokens.begin(), ex.tokens.begin() + seq_len);
    }
    s.size = static_cast<int64_t>(ids->size());
    const int64_t* p = ids->data();
    s.at = [p](int64_t i) { return p[i]; };
    s.keep = ids;
    *data_id = spec.to_string();
    return s;
  }
  MIMIC_CHECK(tok != nullptr, "--data ", o.data, " needs the model's tokenizer");
  if (data::is_lm_corpus(o.data) || (!data::is_classification_data(o.data) && data::is_text_data(o.data))) {
    // A corpus, or a user's text file or folder: the tokens of --split, a user's text split as every command splits
    // it (data::load_text_data: the first 90% of each document trains), so that distillation never reads the text
    // `eval --data FILE --split test` scores.
    auto cache = std::make_shared<data::TokenCache>(data::corpus_token_cache(o.data, data::split_from_name(o.split), *tok));
    s.size = cache->size();
    const data::TokenCache* c = cache.get();
    s.at = [c](int64_t i) { return (*c)[i]; };
    s.keep = cache;
    *data_id = data::data_identity(o.data);
  } else {
    std::string text;
    if (data::is_classification_data(o.data)) {
      // A classification data set's texts of the split, in a fixed order that mixes the labels (the files list
      // them grouped), separated by blank lines: the distribution a classifier is finetuned on.
      const auto set = data::load_classification(o.data);
      const auto& examples = set.split(data::split_from_name(o.split));
      std::vector<std::pair<uint64_t, size_t>> order;
      for (size_t i = 0; i < examples.size(); ++i) {
        Hasher h;
        h.bytes(examples[i].text.data(), examples[i].text.size());
        order.push_back({h.h, i});
      }
      std::sort(order.begin(), order.end());
      for (const auto& [hash, i] : order) text += examples[i].text + "\n\n";
      *data_id = o.data;
    } else {
      std::error_code ec;
      fail("--data ", o.data, fs::exists(o.data, ec) ? ": " : ": no such file or folder, and ",
           "neither a corpus (" + data::lm_corpus_choices() + ") nor a classification data set (spam, sotu-era)");
    }
    auto ids = std::make_shared<std::vector<int64_t>>(tok->encode_document(text));  // one document, opened as a cache opens each
    s.size = static_cast<int64_t>(ids->size());
    const int64_t* p = ids->data();
    s.at = [p](int64_t i) { return p[i]; };
    s.keep = ids;
  }
  MIMIC_CHECK(s.size > 0, "--data ", o.data, " holds no tokens");
  return s;
}

std::string stream_digest(const Stream& s) {
  Hasher h;
  std::vector<int64_t> buf;
  const int64_t step = 1 << 16;
  for (int64_t i = 0; i < s.size; i += step) {
    buf.clear();
    for (int64_t j = i; j < std::min(s.size, i + step); ++j) buf.push_back(s.at(j));
    h.bytes(buf.data(), buf.size() * sizeof(int64_t));
  }
  return h.hex();
}

Sampler make_sampler(const Stream& stream, const text::Tokenizer* tok, bool cls_sep, int64_t seq_len, bool repeat) {
  // a repeated sample is a copy run: opened as a text is (a Llama's <s>), as eval --task copy opens its runs
  const auto opening = repeat && !cls_sep && tok ? tok->document_start() : std::vector<int64_t>{};
  const int64_t open = static_cast<int64_t>(opening.size());
  const int64_t room = cls_sep ? seq_len - 2 : seq_len - open;
  MIMIC_CHECK(!repeat || (room >= 2 && room % 2 == 0), "--repeat needs an even number of tokens between the framing: --seq-len ", seq_len,
              " leaves ", room, cls_sep ? " (seq_len − 2 for [CLS] and [SEP])" : open > 0 ? " (seq_len − " + std::to_string(open) + " for the tokenizer's opening)" : "",
              room >= 3 ? "; --seq-len " + std::to_string(seq_len - 1) + " fits" : std::string());
  Sampler sampler{stream, cls_sep, seq_len, repeat ? room / 2 : room, -1, -1, 0, repeat, opening};
  if (cls_sep) {
    MIMIC_CHECK(tok != nullptr, "[CLS]/[SEP] framing needs a tokenizer");
    sampler.cls = tok->cls_id();
    sampler.sep = tok->sep_id();
    sampler.pad = std::max<int64_t>(tok->pad_id(), 0);
  } else {
    sampler.pad = tok && tok->eos_id() >= 0 ? tok->eos_id() : 0;
  }
  return sampler;
}

std::pair<at::Tensor, at::Tensor> Sampler::batch(int64_t begin, int64_t count) const {
  auto ids = torch::full({count, seq_len}, pad, torch::kLong);
  auto mask = torch::zeros({count, seq_len}, torch::kLong);
  auto* id = ids.data_ptr<int64_t>();
  auto* m = mask.data_ptr<int64_t>();
  for (int64_t b = 0; b < count; ++b) {
    int64_t start = (begin + b) * block, n = std::min(block, stream.size - start);
    int64_t* row = id + b * seq_len;
    int64_t* mrow = m + b * seq_len;
    int64_t t = 0;
    if (cls_sep) row[t++] = cls;
    for (auto id : opening) row[t++] = id;
    for (int64_t i = 0; i < n; ++i) row[t++] = stream.at(start + i);
    if (repeat)
      for (int64_t i = 0; i < n; ++i) row[t++] = stream.at(start + i);
    if (cls_sep) row[t++] = sep;
    for (int64_t i = 0; i < t; ++i) mrow[i] = 1;
  }
  return {ids, mask};
}

int64_t sample_length(const RecordOptions& o, int64_t context, const std::string& context_note, bool cls_sep, const text::Tokenizer* tok) {
  if (o.seq_len == 0 && data::is_recall_task(o.data)) {
    const int64_t own = data::RecallTaskSpec::parse(o.data).seq_len;
    MIMIC_CHECK(own <= context, "the task's seq_len ", own, " exceeds ", models::context_words(context, context_note));
    return own;
  }
  int64_t seq_len = o.seq_len > 0 ? o.seq_len : std::min<int64_t>(256, context);
  // --repeat's two halves need an even room between the framing: the default length gives one up where it leaves an
  // odd room (a Llama's 256 less its <s> was refused unless --seq-len was given: helper-50's probe of 2026-12-04)
  if (o.repeat && o.seq_len == 0) {
    const int64_t framing = cls_sep ? 2 : tok ? static_cast<int64_t>(tok->document_start().size()) : 0;
    if ((seq_len - framing) % 2 != 0 && seq_len - framing > 2) seq_len -= 1;
  }
  models::check_seq_len(seq_len, context, context_note, cls_sep ? 3 : 2, cls_sep ? "[CLS] token [SEP]" : "");
  return seq_len;
}

// ------------------------------------------------------------------------------------------ SampleReader
struct SampleReader::Impl {
  std::string data_id;
  Stream stream;
  std::unique_ptr<Sampler> sampler;
};

SampleReader::SampleReader(const RecordOptions& o) : impl_(std::make_unique<Impl>()) {
  auto tok = record_tokenizer(o);
  const auto cfg = models::load_config((fs::path(o.model_dir) / "config.json").string());
  const bool cls_sep = cfg.family->cls_sep;
  const int64_t context = cfg.max_positions;
  const int64_t seq_len = sample_length(o, context, cfg.context_note, cls_sep, tok.get());
  impl_->stream = open_stream(o, tok.get(), seq_len, cfg.vocab_size, &impl_->data_id);
  impl_->sampler = std::make_unique<Sampler>(make_sampler(impl_->stream, tok.get(), cls_sep, seq_len, o.repeat));
}
SampleReader::~SampleReader() = default;
SampleReader::SampleReader(SampleReader&&) noexcept = default;
int64_t SampleReader::available() const { return impl_->sampler->available(); }
int64_t SampleReader::seq_len() const { return impl_->sampler->seq_len; }
const std::string& SampleReader::data_id() const { return impl_->data_id; }
std::pair<at::Tensor, at::Tensor> SampleReader::batch(int64_t begin, int64_t count) const {
  MIMIC_CHECK(begin >= 0 && count >= 0 && begin + count <= available(), "samples [", begin, ", ", begin + count, ") are outside the ",
              available(), " of --data ", impl_->data_id);
  return impl_->sampler->batch(begin, count);
}

}  // namespace mimic::record
