// Where distill takes the teacher's attention from, one layer at a time: a record file (`record`'s HDF5) or
// the teacher model run here on the samples `record` would take (the online mode). Internal to distill.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mimic/analysis/teacher.h"
#include "mimic/distill/distill.h"

namespace mimic::distill {

using analysis::TeacherBatch;

// The teacher's tensors of one layer for a range of samples. The record source reads a layer once and
// keeps it in memory while that layer trains.
class Source {
 public:
  virtual ~Source() = default;
  virtual int64_t samples() const = 0;
  virtual int64_t n_head() const = 0;
  virtual int64_t head_dim() const = 0;
  virtual std::vector<int64_t> layers() const = 0;
  virtual std::string describe() const = 0;
  virtual std::string model() const = 0;  // the teacher
  virtual std::string model_digest() const = 0;  // its models::model_digest ("" when unknown: an older record)
  virtual std::string data() const = 0;  // the text its samples came from, as --data named it ("" when unknown: an older record)
  virtual nlohmann::json identity() const = 0;  // what the fingerprint keys on
  // The converted attention a layer of the teacher computes ("" for softmax, the attention distill learns from)
  virtual std::string converted(int64_t layer) const = 0;
  // What the user should know about the source before the work ("" when nothing): a record stopped before its end
  virtual std::string note() const { return {}; }
  // Samples [begin, begin + count) of a layer; the layer's tensors for all samples are loaded once and
  // kept while that layer trains.
  TeacherBatch batch(int64_t layer, int64_t begin, int64_t count) {
    if (layer != cached_) {
      full_ = load(layer);
      // read on the CPU, placed once per layer where the student trains
      for (at::Tensor* t : {&full_.q, &full_.k, &full_.v, &full_.o, &full_.mask})
        if (t->defined()) *t = t->to(device_);
      cached_ = layer;
    }
    TeacherBatch b = full_;
    for (at::Tensor* t : {&b.q, &b.k, &b.v, &b.o, &b.mask}) *t = t->narrow(0, begin, count);
    return b;
  }

 protected:
  virtual TeacherBatch load(int64_t layer) = 0;  // every sample of one layer

 public:
  // Where batch() hands the tensors out (DistillOptions::device); the CPU unless told.
  void place_on(c10::Device device) { device_ = device; }

 private:
  c10::Device device_ = c10::Device(c10::kCPU);
  int64_t cached_ = -1;
  TeacherBatch full_;
};

// --record FILE, or --model DIR with --data (online); a mimic::Error when neither or both are given.
std::unique_ptr<Source> open_source(const DistillOptions& options);

}  // namespace mimic::distill
