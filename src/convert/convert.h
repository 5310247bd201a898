// The `convert` stage: swap distilled linear attention (feature maps ± SLA gates, from `mimic distill`) into a
// softmax model's layers and write a converted model directory (models/model.h: HF layout + mimic.json + the
// kernels' tensors). The teacher's tensors are written unchanged; the layers not converted keep softmax, and so do
// the heads placement keeps (placement.h).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "mimic/convert/placement.h"

namespace mimic::models { class Model; }

namespace mimic::distill { class DistilledMaps; }

namespace mimic::convert {

// How convert chooses the heads that keep softmax (placement.h).
struct PlacementOptions {
  // "" none; "auto:K" K heads of the converted layers, ranked by `rule`; "auto:P%" (probe only) heads until the probe's
  // copy gain reaches P% of the teacher's; or a list of LAYER.HEAD such as "3.1,4.0". A layer with some heads kept
  // runs the mixed kind (mixed_kernel.h); a layer with all heads kept stays softmax.
  std::string keep_softmax;
  // The same grammar for the heads that carry a hybrid student's sparse cache (attention option cache = λ), every
  // other head the hybrid without one: the cache where the measured recall lives, a constant state. The probe ranks
  // the heads as for keep_softmax (exact attention in a head stands for the cache it would get). Not with keep_softmax.
  std::string cache_heads;
  bool caches() const { return !cache_heads.empty(); }
  const std::string& spec() const { return caches() ? cache_heads : keep_softmax; }
  std::string option() const { return caches() ? "--cache-heads" : "--keep-softmax"; }
  // "probe" (measured effect, greedy; needs a causal LM and its tokenizer), "kl" (the highest held-out KL distill
  // measured), or "" for the default: probe for a causal LM, kl otherwise.
  std::string rule;
  CalibrationOptions calibration;  // probe: the calibration set (the training split)
  int64_t leaders = 16;            // probe: heads each greedy step re-measures
  ProbeWeights weights;            // probe: the score's weights
  int64_t batch_size = 8;          // probe: sequences per forward pass
  // probe: the tokenizer the calibration set is built with (convert() loads the model directory's); unused when
  // `calibration_set` is given.
  const text::Tokenizer* tokenizer = nullptr;
  std::optional<ProbeCalibration> calibration_set;  // probe: a ready calibration set instead (tests, own data)
  bool progress = true;
};

struct ConvertOptions {
  std::string model_dir;  // the teacher (a softmax model, or a partly converted one)
  std::string maps;       // a distill output (maps.safetensors)
  std::string out;        // the converted model directory
  std::string layers;     // "" or "all": every layer the maps hold; else a list such as "0,2-3"
  // Accept maps distilled from another model than model_dir (their teacher digest differs). Off by default:
  // maps fit the teacher they were distilled from, not another model of the same shape.
  bool force = false;
  PlacementOptions placement;
  // Options merged into the maps' attention options for every converted layer (e.g. {"cache": 64}: LoLA's sparse
  // cache on distilled hybrid maps, training-free); the kind checks them as it builds the kernels.
  nlohmann::json attention_options = nlohmann::json::object();
  // Where the model and its kernels compute while the probe measures candidate placements (--device); the
  // converted model is written from the host either way.
  c10::Device device = c10::Device(c10::kCPU);
};

struct ConvertResult {
  std::string out;
  std::vector<int64_t> layers;  // converted
  std::string summary;          // models::attention_summary of the result
  bool teacher_checked = false; // the maps' teacher digest was known and matched (false: unknown, or forced)
  std::string warning;          // set when the teacher could not be checked or was forced, or when every head kept softmax (nothing converted)
  // null, or what keep_softmax (cache_heads) chose and why (also in mimic.json's provenance): the rule, the heads
  // kept ("keeps": softmax or the cache) and, for
  // the probe, the calibration, the screen and every greedy step with its measurements (the curve heads kept →
  // copy gain, passkey, LM loss)
  nlohmann::json placement;
};

// Swaps the maps' kernels into `model` (in memory) for `layers` ("" = all the maps hold). Checks heads, head
// size, layer range and the teacher digest (unless force); throws mimic::Error naming what does not fit.
// Records the conversion in model.provenance(). attention_options: ConvertOptions' (merged into the maps').
ConvertResult convert_model(models::Model& model, const std::string& model_name, const distill::DistilledMaps& maps,
                            const std::string& layers, bool force, const PlacementOptions& placement = {},
                            const nlohmann::json& attention_options = nlohmann::json::object());

// Loads, converts and saves.
ConvertResult convert(const ConvertOptions& options);

}  // namespace mimic::convert
