// The registry of attention kinds (kinds.def): what each kind is, how it is built from its saved options,
// and the questions stages ask of a kernel — is it the softmax reference? can it be distilled? — answered
// here, never by comparing kind names or casting in a stage.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mimic/attention/attention.h"

namespace mimic::attention {

class DistillableKernel;

enum class KindRole { Reference, Distillable };

struct AttentionKindInfo {
  std::string name;
  KindRole role;
  std::string summary;
  std::string options;  // the keys its options take, ", "-separated ("" for none)
  bool takes_option(const std::string& key) const;
};

// Every registered kind, in kinds.def order.
const std::vector<AttentionKindInfo>& attention_kinds();
// The kind of this name; an unknown name is a mimic::Error listing the known ones.
const AttentionKindInfo& attention_kind(const std::string& name);

// The refusal of a key the kind's options do not take, listing those they do (kinds.def): every kind's parser says it so.
[[noreturn]] void fail_unknown_option(const std::string& kind, const std::string& key);

// Builds a kernel of a registered kind from its options (a kernel's config_json() read back); unknown kinds
// and options are errors.
AttentionKernel make_attention_kernel(const std::string& kind, const nlohmann::json& options, int64_t n_head, int64_t head_dim);

// The options as the kind saves them (defaults filled in): what config_json() of the built kernel returns.
nlohmann::json canonical_options(const std::string& kind, const nlohmann::json& options, int64_t n_head, int64_t head_dim);

// True when the kernel is of the reference kind (softmax).
bool is_reference(const AttentionKernelImpl& kernel);

// The kernel as a distillable one; a kernel of a kind that is not distillable is a mimic::Error naming
// `what` (e.g. "layer 3") and the kind.
std::shared_ptr<DistillableKernel> as_distillable(const AttentionKernel& kernel, const std::string& what);

// A kind with options from a command-line spec "KIND[:key=value,...]" (e.g. "hybrid:window=64,mix=fixed"):
// the kind must be registered; each value is read as JSON when it parses (numbers, true, false) and as a string
// otherwise. The options are checked when the kernel is built, not here.
struct KindSpec {
  std::string kind;
  nlohmann::json options = nlohmann::json::object();
};
KindSpec parse_kind_spec(const std::string& spec);
// The options part alone ("key=value[,key=value...]", as after a kind's colon), read as parse_kind_spec reads it;
// `spec` names the whole in errors.
nlohmann::json parse_spec_options(const std::string& options, const std::string& spec);

// A kernel from a command-line spec, for models built with an attention other than softmax from the start
// (pretrain --attention): the short forms "linear:<map>" (a feature map of the registry, row normalisation) and
// "sla:<map>" (the same with SLA head gates), or any kind of the registry as parse_kind_spec reads it ("softmax",
// "delta", "hybrid:window=64", "linear:feature_map=elu,norm=l2"). Anything else is a mimic::Error listing the forms.
AttentionKernel kernel_from_spec(const std::string& spec, int64_t n_head, int64_t head_dim);

}  // namespace mimic::attention
