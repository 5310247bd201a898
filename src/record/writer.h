// Writing an attention record file (docs/formats.md, "Attention records"): RecordWriter creates the file, or
// reopens one and checks that it belongs to this run, and appends batches with a two-phase commit, so that a
// run killed at any moment resumes after its last complete batch. The `record` stage drives it; RecordReader
// (record.h) reads the files back.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "mimic/record/record.h"

namespace mimic::attention { struct AttentionCapture; }

namespace mimic::record {

// What a record holds, fixed when it is created.
struct RecordLayout {
  // The root attributes a resumed file must share with this run, in the order they are checked.
  std::vector<std::pair<std::string, nlohmann::json>> settings;
  std::string source;            // the teacher's directory (root attribute `source`, not checked)
  int64_t target = 0;            // samples the file is to hold (samples_target)
  int64_t seq_len = 0, n_head = 0, head_dim = 0;
  std::vector<int64_t> layers;
  std::vector<double> scales;    // per entry of `layers`: the softmax scale its kernel saw
  int64_t weights_samples = 0;   // the first K samples also store the softmax weights
  // per entry of `layers`: the converted attention the layer computes ("" for softmax; its group's attribute
  // `converted`), so that distill can refuse a layer whose outputs are no softmax teacher's
  std::vector<std::string> converted;
};

class RecordWriter {
 public:
  // Creates options.out (options.fresh: replacing it; a new file is built under a temporary name and renamed
  // once complete, so a file named `out` is always a valid record), or reopens it: its settings must be
  // `layout`'s, datasets grown past samples_done by a killed run are cut back, samples_done rolls back to
  // the first sample some dataset lost, and the input_ids already recorded must equal `expected_ids(done)`.
  // Throws mimic::Error naming the problem (another file, other settings, a damaged file).
  RecordWriter(const RecordOptions& options, const RecordLayout& layout,
               const std::function<at::Tensor(int64_t)>& expected_ids);
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  int64_t samples_done() const;  // complete samples in the file
  int64_t rolled_back() const;   // samples of an interrupted run found incomplete when reopening
  // The gzip level its chunks are written at: the options' for a new file; a reopened file's own (its datasets'
  // filters decide how every chunk is read, so appended chunks must match them: a raw chunk in a deflated dataset
  // made the whole file unreadable — the probe of 2026-11-27).
  int compression() const;

  // Appends samples [first, first + b) (b = ids.size(0)): ids, mask and, per layer of the layout, the
  // capture's q, k, v, o (and weights of the samples below weights_samples). The batch's chunks reach the
  // file before samples_done is raised to first + b.
  void write_batch(int64_t first, const at::Tensor& ids, const at::Tensor& mask, const std::vector<attention::AttentionCapture>& captures);
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mimic::record
