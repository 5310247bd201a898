// The `convert` stage: swap distilled linear attention (feature maps ± SLA gates, from `mimic distill`) into a
// softmax model's layers and write a converted model directory (models/model.h: HF layout + mimic.json + the
// kernels' tensors). The teacher's tensors are written unchanged; the layers not converted keep softmax.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mimic::models { class Model; }

namespace mimic::distill { class DistilledMaps; }

namespace mimic::convert {

struct ConvertOptions {
  std::string model_dir;  // the teacher (a softmax model, or a partly converted one)
  std::string maps;       // a distill output (maps.safetensors)
  std::string out;        // the converted model directory
  std::string layers;     // "" or "all": every layer the maps hold; else a list such as "0,2-3"
  // Accept maps distilled from another model than model_dir (their teacher digest differs). Off by default:
  // maps fit the teacher they were distilled from, not another model of the same shape.
  bool force = false;
  // Head-level placement: heads that keep softmax attention. "" none; "auto:K" the K heads (of the converted
  // layers) whose distilled student fits worst — the highest held-out KL distill measured; or a list of
  // LAYER.HEAD such as "3.1,4.0". A layer with some heads kept runs the mixed kind (mixed_kernel.h); a layer with
  // all heads kept stays softmax.
  std::string keep_softmax;
};

struct ConvertResult {
  std::string out;
  std::vector<int64_t> layers;  // converted
  std::string summary;          // models::attention_summary of the result
  bool teacher_checked = false; // the maps' teacher digest was known and matched (false: unknown, or forced)
  std::string warning;          // set when the teacher could not be checked or was forced
  nlohmann::json placement;     // null, or what keep_softmax chose and why (also in mimic.json's provenance)
};

// Swaps the maps' kernels into `model` (in memory) for `layers` ("" = all the maps hold). Checks heads, head
// size, layer range and the teacher digest (unless force); throws mimic::Error naming what does not fit.
// Records the conversion in model.provenance().
ConvertResult convert_model(models::Model& model, const std::string& model_name, const distill::DistilledMaps& maps,
                            const std::string& layers, bool force, const std::string& keep_softmax = "");

// Loads, converts and saves.
ConvertResult convert(const ConvertOptions& options);

}  // namespace mimic::convert
