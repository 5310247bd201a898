// The `report` stage: how close linear attention comes to its softmax teacher, per layer and head, in tables,
// figures and one HTML page (Hedgehog, Zhang et al. 2024, Sec. 2.2: low-entropy "spiky" weights and
// monotonicity in q·k; Fig. 2–4, 8).
//
// Sources: the softmax teacher (weights recomputed from a record's q, k, as distill does), and students —
// distill outputs (maps.safetensors), untrained registered maps by name, or a converted model directory.
// The record is streamed one sample × one layer at a time; every student's weights are computed on the
// teacher's own q, k (teacher-forced, as in distillation). The metrics are distill's too (analysis/metrics.h):
// mean row entropy, KL(teacher ‖ student), CE, Spearman monotonicity, top-k mass. Files: docs/report.md.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace mimic::report {

// How a report's metrics.csv begins (its first columns): what knows a report's folder where no report.html is there
// yet (a report killed while drawing), tools/cli.cpp's refuse_foreign_output.
inline constexpr const char* kMetricsCsvHead = "source,kind,layer,head,";

struct ReportOptions {
  std::string record;                  // FILE.h5 (mimic record)
  std::vector<std::string> maps;       // distill outputs; "LABEL=FILE" names the source LABEL
  std::vector<std::string> baselines;  // untrained registered maps by name (elu, performer, ...)
  std::vector<std::string> models;     // converted model directories (their linear layers); "LABEL=DIR" names one
  // what `mimic eval --json` printed for a model (--task lm, copy or passkey): "LABEL=FILE", one row per label in
  // the report's Quality section (quality.h)
  std::vector<std::string> evals;
  std::string out;                     // output directory
  int64_t samples = 0;                 // the last N samples of the record (0: the last 10%, at least 1 — what distill holds out)
  std::string layers = "all";          // recorded layers to report
  std::string heads = "all";           // heads to report
  int64_t top_k = 8;                   // k of the top-k mass
  int64_t local_window = 64;           // W of the local mass (weight on keys within W positions; a hybrid's window share)
  int64_t plot_sample = -1;            // record index of the sample drawn (-1: the first reported one)
  std::string plot_layers;             // layers drawn ("": first, middle and last reported)
  std::string plot_heads;              // heads drawn in the heatmaps ("": the first 4 reported); the first one in the monotonicity plot
  int64_t plot_tokens = 64;            // heatmaps show the first N queries × keys
  uint64_t seed = 0;                   // the untrained baselines' random state (as distill --eval-only --seed)
  bool progress = true;
};

struct ReportResult {
  std::string out;
  std::vector<int64_t> samples;         // record indices evaluated
  std::vector<int64_t> layers, heads;   // reported
  nlohmann::json sources;               // [{name, kind (teacher | maps | baseline | model), path, feature_map}]
  std::vector<std::string> files;       // every file written (names inside out)
  // one row per source × layer × head (head -1: the mean over the reported heads):
  // {source, layer, head, entropy, kl, ce, spearman, top_k_mass, induction, previous_token, local_mass}; null where
  // undefined or absent
  nlohmann::json rows;
  nlohmann::json quality = nlohmann::json::array();  // quality_json of the --eval files (quality.h)
  double uniform_entropy = 0;           // mean over real query rows of log(visible keys): uniform weights' entropy
  // the options as they applied: at most the record's tokens per sample (the CLI says when one was cut)
  int64_t mass_k = 0, plot_tokens = 0, local_window = 0;
  std::string record_note;  // RecordReader::unfinished(): the record stopped before its end (the CLI says so)
  double seconds = 0;
  nlohmann::json to_json() const;
};

// A "LABEL=PATH" input (--maps, --model, --eval) as {label, path}; a path alone (or one that exists with its '=')
// gives an empty label. The one reading of such inputs, for the library and the CLI alike.
std::pair<std::string, std::string> split_labelled(const std::string& entry);

// Computes the metrics, writes metrics.csv, metrics.json, the figures (PNG + SVG) and report.html into
// options.out (created). Throws mimic::Error for bad options or files.
ReportResult report(const ReportOptions& options);

}  // namespace mimic::report
