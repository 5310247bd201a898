#include "mimic/distill/sources.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>

#include "mimic/attention/attention.h"
#include "mimic/core/error.h"
#include "mimic/core/hash.h"
#include "mimic/core/paths.h"
#include "mimic/core/words.h"
#include "mimic/models/model.h"
#include "mimic/record/record.h"

namespace fs = std::filesystem;

namespace mimic::distill {

namespace {

class RecordSource : public Source {
 public:
  explicit RecordSource(const std::string& path) : path_(path), reader_(path) {
    MIMIC_CHECK(reader_.samples() > 0, path, ": the record holds no complete sample");
  }
  int64_t samples() const override { return reader_.samples(); }
  int64_t n_head() const override { return reader_.n_head(); }
  int64_t head_dim() const override { return reader_.head_dim(); }
  std::vector<int64_t> layers() const override { return reader_.layers(); }
  std::string describe() const override { return path_; }
  std::string model() const override { return reader_.source(); }
  std::string model_digest() const override { return reader_.model_digest(); }
  std::string data() const override { return reader_.data(); }
  std::string converted(int64_t layer) const override { return reader_.converted(layer); }
  nlohmann::json identity() const override {
    // the teacher too: another teacher's record at the same path is another run (its maps would be labelled with
    // the new teacher while half trained on the old one)
    nlohmann::json id = {{"record", path_identity(path_)}, {"samples", reader_.samples()},
                         {"seq_len", reader_.seq_len()}, {"model_digest", reader_.model_digest()}};
    // and its data: a record made again from other text at the same path is another run (the probe of 2026-11-27:
    // a resume mixed layers distilled on two records). Absent for older records, so their checkpoints still resume.
    if (!reader_.data_digest().empty()) id["data_digest"] = reader_.data_digest();
    return id;
  }

  std::string note() const override { return reader_.unfinished(); }

 protected:
  TeacherBatch load(int64_t layer) override {
    const int64_t n = reader_.samples();
    TeacherBatch b;
    b.q = reader_.read(layer, "q", 0, n);
    b.k = reader_.read(layer, "k", 0, n);
    b.v = reader_.read(layer, "v", 0, n);
    b.o = reader_.read(layer, "o", 0, n);
    b.mask = reader_.attention_mask(0, n);
    b.scale = reader_.scale(layer);
    b.causal = reader_.causal();
    return b;
  }

 private:
  std::string path_;
  record::RecordReader reader_;
};

// The online mode: the teacher runs here, on the samples `record` would take from --data; a layer's q, k,
// v, o are captured for every sample when that layer starts (what a record file would hold, kept in memory).
class OnlineSource : public Source {
 public:
  explicit OnlineSource(const DistillOptions& o) : model_dir_(o.model_dir) {
    MIMIC_CHECK(!o.data.empty(), "distill: the online mode needs --data (a corpus, a text file or folder, a classification set or a recall task) with --model");
    MIMIC_CHECK(o.samples >= 0, "--samples must be >= 0 (0: every sample --data gives), got ", o.samples);
    record::RecordOptions ro;
    ro.model_dir = o.model_dir;
    ro.data = o.data;
    ro.split = o.split;
    ro.seq_len = o.seq_len;
    samples_ = std::make_unique<record::SampleReader>(ro);
    n_ = o.samples > 0 ? std::min(o.samples, samples_->available()) : samples_->available();
    model_ = models::load_model(o.model_dir, o.device);  // the teacher runs where the students train
    model_->module().eval();
    digest_ = models::model_digest(*model_);
    // the samples themselves: another --split, or the text replaced under the same name, is another run (a resume
    // reported the old maps, the fourth probe of 2026-11-27)
    {
      const auto ids = samples_->batch(0, n_).first.contiguous();
      Hasher h;
      h.bytes(ids.data_ptr(), static_cast<size_t>(ids.numel()) * ids.element_size());
      data_digest_ = h.hex();
    }
    split_ = o.split;
    auto sum = model_->summary();
    n_head_ = sum.n_head;
    head_dim_ = sum.head_dim;
    for (int64_t l = 0; l < sum.n_layer; ++l) layers_.push_back(l);
    batch_ = std::max<int64_t>(1, o.batch_size);
    every_ = o.samples == 0;
  }
  int64_t samples() const override { return n_; }
  int64_t n_head() const override { return n_head_; }
  int64_t head_dim() const override { return head_dim_; }
  std::vector<int64_t> layers() const override { return layers_; }
  std::string describe() const override { return model_dir_; }
  // --samples 0 takes what record's --samples 0 would; a layer's q, k, v, o are then held in memory for every
  // sample of the data, so the size is said before the work (docs/distill.md: 4·N·H·T·d·4 bytes)
  std::string note() const override {
    if (!every_) return {};
    const double bytes = 16.0 * static_cast<double>(n_) * static_cast<double>(n_head_) * static_cast<double>(samples_->seq_len()) *
                         static_cast<double>(head_dim_);
    return detail::concat("--samples 0 takes every sample of the data: ", n_, " samples of ", samples_->seq_len(),
                          " tokens, whose q, k, v and o take ", byte_size(bytes), " of memory while a layer trains; --samples N takes fewer");
  }
  std::string model() const override { return model_dir_; }
  std::string model_digest() const override { return digest_; }
  std::string data() const override { return samples_->data_id(); }
  std::string converted(int64_t layer) const override { return models::converted_layer_attention(*model_, layer); }
  nlohmann::json identity() const override {
    return {{"model", path_identity(model_dir_)}, {"data", samples_->data_id()}, {"samples", n_},
            {"seq_len", samples_->seq_len()}, {"model_digest", digest_}, {"split", split_}, {"data_digest", data_digest_},
            // the teacher's config beside its weights: a resume onto the same weights under another activation or
            // epsilon mixed two teachers' maps, exit 0 (the fifth probe of 2026-11-27)
            {"network", models::network_description(model_dir_)}};
  }

 protected:
  TeacherBatch load(int64_t layer) override {
    torch::NoGradGuard no_grad;
    attention::AttentionCapture cap;
    model_->set_attention_capture(layer, &cap);
    std::vector<at::Tensor> q, k, v, o, m;
    const auto device = models::device_of(*model_);
    try {
      for (int64_t s = 0; s < n_; s += batch_) {
        auto [ids, mask] = samples_->batch(s, std::min(batch_, n_ - s));
        model_->forward({ids.to(device), mask.to(device), {}, {}});
        q.push_back(cap.q.to(torch::kFloat));
        k.push_back(cap.k.to(torch::kFloat));
        v.push_back(cap.v.to(torch::kFloat));
        o.push_back(cap.o.to(torch::kFloat));
        m.push_back(mask.to(torch::kBool));
      }
    } catch (...) {
      model_->set_attention_capture(layer, nullptr);
      throw;
    }
    model_->set_attention_capture(layer, nullptr);
    TeacherBatch b;
    b.q = torch::cat(q);
    b.k = torch::cat(k);
    b.v = torch::cat(v);
    b.o = torch::cat(o);
    b.mask = torch::cat(m);
    b.scale = cap.scale;
    b.causal = cap.causal;
    return b;
  }

 private:

  std::string model_dir_;
  std::string digest_, data_digest_, split_;
  std::unique_ptr<record::SampleReader> samples_;
  std::unique_ptr<models::Model> model_;
  int64_t n_ = 0, n_head_ = 0, head_dim_ = 0, batch_ = 8;
  bool every_ = false;  // --samples 0
  std::vector<int64_t> layers_;
};

}  // namespace

std::unique_ptr<Source> open_source(const DistillOptions& o) {
  std::unique_ptr<Source> src;
  if (!o.record.empty()) {
    MIMIC_CHECK(o.model_dir.empty(), "distill: give either --record or --model, not both");
    src = std::make_unique<RecordSource>(o.record);
  } else {
    MIMIC_CHECK(!o.model_dir.empty(), "distill: give --record FILE.h5 (or --model DIR --data ... for the online mode)");
    src = std::make_unique<OnlineSource>(o);
  }
  src->place_on(o.device);
  return src;
}

}  // namespace mimic::distill
