// The student a layer's distillation trains: which attention kind and options (from distill's options, canonical), and
// the tensors it trains, saves and restores. Internal to distill.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "mimic/attention/distillable.h"
#include "mimic/distill/distill.h"

namespace mimic::distill {

// The student: an attention kind of the registry (distill trains linear attention) and its options as the
// kind saves them (canonical: defaults filled in, so fingerprints and outputs do not depend on spelling).
struct StudentSpec {
  std::string kind = "linear";
  nlohmann::json options;
  bool train_maps = true, train_gates = false;
};

// From --attention, --feature-map, --map-options, --sla and --train; refuses what the kind does not take.
StudentSpec student_spec(const DistillOptions& o, int64_t n_head, int64_t head_dim);

// Initialised on the CPU (a seed gives the same maps on any device), then moved where the layer trains.
std::shared_ptr<attention::DistillableKernel> make_student(const StudentSpec& s, int64_t n_head, int64_t head_dim, uint64_t seed,
                                                           int64_t layer, c10::Device device);

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// The parameters the spec trains (maps, gates or both), with requires_grad set accordingly on all of them.
NamedTensors trainable(attention::DistillableKernel& m, const StudentSpec& s);
// Copies of every parameter and buffer, by name.
NamedTensors snapshot(attention::DistillableKernel& m);
// Copies a snapshot back; names the first tensor missing or of another shape.
void set_state(attention::DistillableKernel& m, const NamedTensors& state);

}  // namespace mimic::distill
