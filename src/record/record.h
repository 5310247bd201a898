// The `record` stage: run a softmax teacher over samples of text and store, per layer, exactly what its
// attention kernel consumed and produced (q, k, v, per-head outputs, optionally the softmax weights) in an
// HDF5 file — the training data of the distillation stage. Layout: docs/formats.md ("Attention records").
//
// The file is appendable and resumable: every batch is written, then the root attribute `samples_done`
// is updated and the file flushed, so a run killed at any moment between two flushes and started again
// with the same settings continues after the last complete batch (no sample missing or duplicated). A
// larger --samples appends to a finished file. A file recorded with other settings, from another model or
// from other data is refused, naming the attribute that differs.
//
// Files: record.cpp (the stage), writer.h (RecordWriter: creating, resuming, appending), reader.cpp
// (RecordReader), samples.h (the samples of --data, SampleReader), hdf5.h (HDF5 helpers).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mimic::record {

struct RecordOptions {
  std::string model_dir;            // HF-layout directory of the softmax teacher
  std::string data;                 // corpus (all | sotu | moby-dick), classification set (spam | sotu-era: its
                                    // texts of the split, packed), a UTF-8 text file, or a recall task (mqar:...,
                                    // ar:...; data/recall_tasks.h: examples 0.. of the split, task seed 0; the
                                    // model needs no tokenizer then)
  std::string split = "train";      // split of a corpus (ignored for a file)
  std::string out;                  // FILE.h5
  int64_t samples = 128;            // samples to hold in the file (0: every block of the data)
  int64_t seq_len = 0;              // tokens per sample (0: min(256, the model's context); a recall task's own)
  // Each sample is a segment of the data followed by the same segment again ([A A], seq_len/2 tokens each;
  // BERT: [CLS] A A [SEP]): the record on which report's induction scores measure in-context copying.
  bool repeat = false;
  std::string layers = "all";       // "all" or a list such as "0,2,4-5"
  int64_t weights_samples = 0;      // store the softmax weights of the first K samples
  std::string dtype = "f16";        // storage of q, k, v, o, weights: "f16" | "f32"
  int64_t batch_size = 8;           // samples per forward pass (does not change the content)
  int compression = 4;              // gzip level 1..9 (0: no compression)
  bool fresh = false;               // overwrite an existing file instead of resuming it
  // Where the teacher runs (--device): its captures come back to the host in the writer, one copy per tensor
  // after the conversion to the stored type.
  c10::Device device = c10::Device(c10::kCPU);
  bool measure_forward = true;      // time one batch's forward without capture for the comparison (the second; the first alone)
  // Testing: called for every batch (with its first sample) after its chunks reached the file and before it is
  // committed (samples_done raised), once the datasets' own metadata (their extents and chunk indexes) has been
  // flushed too. The file on disk is then what a run killed at that moment leaves when HDF5 had already written those
  // entries out of its cache: a copy of it is a killed run's file, at a moment a real kill hits rarely. Empty:
  // nothing is called (and nothing more is flushed).
  std::function<void(int64_t first)> testing_before_commit;
  // Told (one sentence) what an unbounded run will write before it starts: --samples 0 (every sample of the data), or
  // a size of a gigabyte or more. Empty: nothing is said.
  std::function<void(const std::string&)> note;
};

struct RecordResult {
  std::string out;
  int64_t samples = 0;         // samples in the file now
  int64_t recorded = 0;        // samples written by this run
  int64_t resumed_from = 0;    // samples already in the file when this run started
  int64_t rolled_back = 0;     // samples of an interrupted run found incomplete and recorded again
  int64_t tokens = 0;          // tokens written by this run (recorded × seq_len, padding included)
  int64_t padded = 0;          // of them, positions of padding (masked: a text's last block, shorter than seq_len)
  int64_t seq_len = 0;
  std::vector<int64_t> layers;
  // a converted model's attention (models::attention_summary) where any layer runs something other than softmax: its
  // record holds that attention's outputs, and its later layers' q and k, not a softmax teacher's; empty otherwise
  std::string converted_attention;
  double seconds = 0;          // recording loop, wall clock
  double tokens_per_second = 0;
  double forward_seconds = 0;  // of which: the model's forward passes (with capture)
  double write_seconds = 0;    // of which: conversion, compression, writing, flushing
  // The same forward without capture (the body, no LM / MLM head, as recording runs it) on the second batch (the
  // first when there is no other), timed after it was recorded; 0 when nothing was recorded or measure_forward is off.
  double forward_tokens_per_second = 0;
  int64_t file_bytes = 0;
  int gzip = 0;  // the level the file's chunks are written at (a resumed file keeps its own, whatever options asked)
};

// Records (or resumes / extends) `options.out`. Throws mimic::Error on bad options, a mismatched or
// damaged file.
RecordResult record(const RecordOptions& options);

// The samples `record` takes from --data for a model (consecutive blocks of the token stream; GPT-2: T
// tokens, BERT: [CLS] + T−2 tokens + [SEP]; the last block padded and masked) — for stages that run the
// teacher themselves (distill's online mode). Uses options.model_dir (tokenizer and model type), data,
// split and seq_len (0: min(256, the model's context)).
class SampleReader {
 public:
  explicit SampleReader(const RecordOptions& options);
  ~SampleReader();
  SampleReader(SampleReader&&) noexcept;
  int64_t available() const;  // samples the data holds
  int64_t seq_len() const;
  const std::string& data_id() const;  // the corpus name or the file's absolute path
  // input_ids and attention_mask (int64) [count, T] of samples [begin, begin+count).
  std::pair<at::Tensor, at::Tensor> batch(int64_t begin, int64_t count) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reading a record file back (what the distillation stage uses).
class RecordReader {
 public:
  explicit RecordReader(const std::string& path);  // throws mimic::Error for a missing / foreign / damaged file
  ~RecordReader();
  RecordReader(RecordReader&&) noexcept;
  int64_t samples() const;               // complete samples (root attribute samples_done)
  // "" for a finished record; else a note that it holds fewer samples than its run was to record (samples_target):
  // a record stopped before its end, which the same record command continues
  std::string unfinished() const;
  int64_t seq_len() const;
  int64_t n_head() const;
  int64_t head_dim() const;
  bool causal() const;
  const std::vector<int64_t>& layers() const;
  double scale(int64_t layer) const;     // the softmax scale of a recorded layer
  // The converted attention a recorded layer computes, as record described it (a converted model's record:
  // "linear (hedgehog, row norm)"); "" for a softmax layer (and in records made before it was kept).
  std::string converted(int64_t layer) const;
  int64_t weights_samples() const;       // samples with stored weights
  std::string source() const;            // the teacher model (root attribute `source`)
  std::string model_digest() const;      // its models::model_digest (root attribute `model_digest`)
  std::string data_digest() const;       // the digest of the token stream its samples came from ("" if absent)
  std::string data() const;              // what --data named: a corpus, a set, a file's absolute path ("" if absent)
  // input_ids (int64) and attention_mask (bool) rows [begin, begin+count).
  at::Tensor input_ids(int64_t begin, int64_t count) const;
  at::Tensor attention_mask(int64_t begin, int64_t count) const;
  // name: "q" | "k" | "v" | "o" | "weights"; float32 [count, H, T, head_dim or T].
  at::Tensor read(int64_t layer, const std::string& name, int64_t begin, int64_t count) const;

 private:
  void check_shapes() const;  // attributes against limits and against the datasets' shapes
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mimic::record
