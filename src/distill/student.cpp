#include "mimic/distill/student.h"

#include <torch/torch.h>

#include <map>

#include "mimic/attention/attention.h"
#include "mimic/attention/kinds.h"
#include "mimic/core/error.h"

namespace mimic::distill {

using attention::DistillableKernel;

namespace {

// Copies tensors named `prefix + name` from `get` into the student; names the first missing or misshapen one.
template <typename Get>
void restore(DistillableKernel& m, const std::string& where, const std::string& prefix, Get get) {
  torch::NoGradGuard no_grad;
  auto load = [&](const std::string& name, at::Tensor dst) {
    at::Tensor t = get(prefix + name);
    MIMIC_CHECK(t.defined(), where, ": no tensor '", prefix, name, "'");
    MIMIC_CHECK(t.sizes() == dst.sizes(), where, ": tensor '", prefix, name, "' has shape ", t.sizes(), ", expected ", dst.sizes());
    dst.copy_(t);
  };
  for (auto& p : m.named_parameters()) load(p.key(), p.value());
  for (auto& b : m.named_buffers()) load(b.key(), b.value());
}

}  // namespace

StudentSpec student_spec(const DistillOptions& o, int64_t n_head, int64_t head_dim) {
  StudentSpec s;
  const nlohmann::json map_options = o.map_options.is_null() ? nlohmann::json::object() : o.map_options;
  MIMIC_CHECK(map_options.is_object(), "--map-options must be a JSON object, got ", map_options.dump());
  auto ks = attention::parse_kind_spec(o.attention);
  MIMIC_CHECK(attention::attention_kind(ks.kind).role == attention::KindRole::Distillable, "--attention ", o.attention,
              ": the kind '", ks.kind, "' is the teacher's, not a student's");
  for (const char* key : {"feature_map", "map_options", "gates"})
    MIMIC_CHECK(!ks.options.contains(key), "--attention ", o.attention, ": give '", key,
                "' with --feature-map, --map-options or --sla, not in the attention spec");
  s.kind = ks.kind;
  auto options = ks.options;
  // A kind that runs a feature map saves one among its options (linear, hybrid); one that does not (delta: q and k
  // enter L2-normalised) takes no --feature-map or --map-options. A kind with SLA head gates saves `gates` (linear,
  // hybrid, delta); one without refuses --sla.
  const auto defaults = attention::canonical_options(s.kind, ks.options, n_head, head_dim);
  // Without --feature-map the kind's own default map (the hybrid's is hedgehog_softmax, not the linear kind's hedgehog)
  if (defaults.contains("feature_map")) {
    if (!o.feature_map.empty()) options["feature_map"] = o.feature_map;
    options["map_options"] = map_options;
  } else {
    MIMIC_CHECK(o.feature_map.empty(), "--attention ", o.attention, ": the kind '", s.kind, "' runs no feature map: it takes no --feature-map");
    MIMIC_CHECK(map_options.empty(), "--attention ", o.attention, ": the kind '", s.kind, "' runs no feature map: it takes no --map-options");
  }
  if (defaults.contains("gates"))
    options["gates"] = o.sla;
  else
    MIMIC_CHECK(!o.sla, "--attention ", o.attention, ": the kind '", s.kind, "' has no SLA head gates: it takes no --sla");
  s.options = attention::canonical_options(s.kind, options, n_head, head_dim);
  const std::string train = o.train.empty() ? (o.sla ? "both" : "maps") : o.train;
  MIMIC_CHECK(train == "maps" || train == "gates" || train == "both", "--train must be maps, gates or both, got '", train, "'");
  MIMIC_CHECK(o.sla || train == "maps", "--train ", train, " needs SLA gates (--sla)");
  s.train_maps = train != "gates";
  s.train_gates = train != "maps";
  return s;
}

std::shared_ptr<DistillableKernel> make_student(const StudentSpec& s, int64_t n_head, int64_t head_dim, uint64_t seed, int64_t layer,
                                                c10::Device device) {
  auto student = untrained_student(s.kind, s.options, n_head, head_dim, seed, layer);
  if (!device.is_cpu()) student->to(device);
  return student;
}

NamedTensors trainable(DistillableKernel& m, const StudentSpec& s) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (auto& p : m.named_parameters()) {
    const bool gate = m.parameter_group(p.key()) == "gates";
    const bool on = gate ? s.train_gates : s.train_maps;
    p.value().set_requires_grad(on);
    if (on) out.emplace_back(p.key(), p.value());
  }
  return out;
}

NamedTensors snapshot(DistillableKernel& m) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& p : m.named_parameters()) out.emplace_back(p.key(), p.value().detach().clone());
  for (const auto& b : m.named_buffers()) out.emplace_back(b.key(), b.value().detach().clone());
  return out;
}

void set_state(DistillableKernel& m, const NamedTensors& state) {
  std::map<std::string, at::Tensor> by_name(state.begin(), state.end());
  restore(m, "distill", "", [&](const std::string& n) {
    auto it = by_name.find(n);
    return it == by_name.end() ? at::Tensor() : it->second;
  });
}

std::shared_ptr<DistillableKernel> untrained_student(const std::string& kind, const nlohmann::json& options, int64_t n_head,
                                                     int64_t head_dim, uint64_t seed, int64_t layer) {
  torch::manual_seed(seed * 1000003ull + static_cast<uint64_t>(layer));  // the same initial maps for a layer, whatever ran before
  return attention::as_distillable(attention::make_attention_kernel(kind, options, n_head, head_dim), "a distillation student");
}

std::string default_feature_map(const std::string& attention) {
  const auto kind = attention::parse_kind_spec(attention).kind;
  nlohmann::json defaults;
  try {
    defaults = attention::canonical_options(kind, nlohmann::json::object(), 1, 2);
  } catch (const Error&) {
    return {};  // a kind that needs options of its own (mixed) has no map at this level
  }
  return defaults.value("feature_map", std::string());
}

}  // namespace mimic::distill
