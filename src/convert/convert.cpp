#include "mimic/convert/convert.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>

#include "mimic/attention/distillable.h"
#include "mimic/attention/mixed_kernel.h"
#include "mimic/core/error.h"
#include "mimic/core/layers.h"
#include "mimic/distill/maps_file.h"
#include "mimic/models/model.h"
#include "mimic/record/record.h"

namespace mimic::convert {

namespace fs = std::filesystem;

namespace {

struct KeptHead {
  int64_t layer, head;
  double kl;
};

// The heads that keep softmax (see ConvertOptions::keep_softmax), with their held-out KL; and the placement
// record written into mimic.json.
std::vector<KeptHead> choose_heads(const std::string& spec, const distill::DistilledMaps& maps, const std::vector<int64_t>& layers,
                                   int64_t n_head, nlohmann::json& placement) {
  std::vector<KeptHead> all;
  for (auto l : layers) {
    const auto kl = maps.head_kl(l);
    for (int64_t h = 0; h < n_head; ++h) all.push_back({l, h, kl[static_cast<size_t>(h)]});
  }
  std::vector<KeptHead> kept;
  if (spec.rfind("auto:", 0) == 0) {
    int64_t k = 0;
    try {
      size_t used = 0;
      k = std::stoll(spec.substr(5), &used);
      MIMIC_CHECK(used == spec.size() - 5, "");
    } catch (const std::exception&) {
      fail("--keep-softmax ", spec, ": expected auto:K with K a number of heads");
    }
    MIMIC_CHECK(k >= 1 && k <= static_cast<int64_t>(all.size()), "--keep-softmax ", spec, ": K must be in [1, ", all.size(),
                "] (the heads of the converted layers)");
    std::stable_sort(all.begin(), all.end(), [](const KeptHead& a, const KeptHead& b) { return a.kl > b.kl; });
    kept.assign(all.begin(), all.begin() + k);
    placement = {{"rule", "auto:" + std::to_string(k)},
                 {"reason", "the K heads whose distilled student fits the teacher worst: highest held-out KL(softmax || student) "
                            "measured by distill"},
                 {"next_kl", k < static_cast<int64_t>(all.size()) ? nlohmann::json(all[static_cast<size_t>(k)].kl) : nlohmann::json()}};
  } else {
    size_t at = 0;
    while (at <= spec.size()) {
      const size_t comma = std::min(spec.find(',', at), spec.size());
      const std::string item = spec.substr(at, comma - at);
      const auto dot = item.find('.');
      int64_t l = -1, h = -1;
      try {
        MIMIC_CHECK(dot != std::string::npos, "");
        size_t u1 = 0, u2 = 0;
        l = std::stoll(item.substr(0, dot), &u1);
        h = std::stoll(item.substr(dot + 1), &u2);
        MIMIC_CHECK(u1 == dot && u2 == item.size() - dot - 1, "");
      } catch (const std::exception&) {
        fail("--keep-softmax: '", item, "' is not LAYER.HEAD (or use auto:K)");
      }
      auto it = std::find_if(all.begin(), all.end(), [&](const KeptHead& x) { return x.layer == l && x.head == h; });
      MIMIC_CHECK(it != all.end(), "--keep-softmax: head ", item, " is not a head of a converted layer (", n_head, " heads; layers ",
                  nlohmann::json(layers).dump(), ")");
      MIMIC_CHECK(std::none_of(kept.begin(), kept.end(), [&](const KeptHead& x) { return x.layer == l && x.head == h; }),
                  "--keep-softmax: head ", item, " given twice");
      kept.push_back(*it);
      at = comma + 1;
    }
    placement = {{"rule", "list"}, {"reason", "chosen by hand (--keep-softmax " + spec + ")"}};
  }
  nlohmann::json heads = nlohmann::json::array();
  for (const auto& x : kept) heads.push_back({{"layer", x.layer}, {"head", x.head}, {"kl", x.kl}});
  placement["kept"] = heads;
  placement["candidates"] = all.size();
  return kept;
}

}  // namespace

ConvertResult convert_model(models::Model& model, const std::string& model_name, const distill::DistilledMaps& maps,
                            const std::string& layers, bool force, const std::string& keep_softmax) {
  const auto s = model.summary();
  const int64_t head_dim = s.d_model / s.n_head;
  MIMIC_CHECK(maps.n_head() == s.n_head && maps.head_dim() == head_dim, maps.path(), " holds maps for ", maps.n_head(), " heads of ",
              maps.head_dim(), " dimensions, but ", model_name, " has ", s.n_head, " heads of ", head_dim,
              ": maps fit only the model they were distilled from");
  ConvertResult r;
  const std::string digest = models::model_digest(model);
  if (maps.model_digest().empty()) {
    r.warning = maps.path() + " does not name its teacher's digest (an older distill output): the maps could not be checked against " +
                model_name;
  } else if (maps.model_digest() != digest) {
    MIMIC_CHECK(force, maps.path(), " was distilled from ", maps.source().empty() ? "another model" : maps.source(), " (digest ",
                maps.model_digest(), "), not from ", model_name, " (digest ", digest,
                "): convert the teacher the maps were distilled from, distill maps for this model, or pass --force");
    r.warning = "--force: " + maps.path() + " was distilled from " + maps.source() + " (digest " + maps.model_digest() + "), not from " +
                model_name + " (digest " + digest + ")";
  } else {
    r.teacher_checked = true;
  }
  if (layers.empty() || layers == "all") {
    r.layers = maps.layers();
  } else {
    r.layers = parse_layers(layers, s.n_layer);  // its errors name --layers
  }
  MIMIC_CHECK(!r.layers.empty(), maps.path(), " holds no layers");
  std::string held;
  for (auto l : maps.layers()) held += (held.empty() ? "" : ",") + std::to_string(l);
  for (auto l : r.layers) {
    MIMIC_CHECK(l >= 0 && l < s.n_layer, maps.path(), " holds maps for layer ", l, ", but ", model_name, " has ", s.n_layer, " layers");
    MIMIC_CHECK(maps.has_layer(l), "--layers: ", maps.path(), " holds no maps for layer ", l, " (it holds layers ", held, ")");
  }
  std::vector<KeptHead> kept;
  if (!keep_softmax.empty()) kept = choose_heads(keep_softmax, maps, r.layers, s.n_head, r.placement);
  std::vector<int64_t> converted;
  for (auto l : r.layers) {
    std::vector<int64_t> heads;
    for (const auto& x : kept)
      if (x.layer == l) heads.push_back(x.head);
    std::sort(heads.begin(), heads.end());
    if (static_cast<int64_t>(heads.size()) == s.n_head) continue;  // every head kept: the layer stays softmax
    converted.push_back(l);
    if (heads.empty()) {
      model.set_attention_kernel(l, maps.kernel(l));
    } else {
      model.set_attention_kernel(l, std::make_shared<attention::MixedAttention>(heads, maps.kernel(l), s.n_head));
    }
  }
  r.layers = converted;
  model.module().eval();
  auto& prov = model.provenance();
  if (!prov.contains("conversions")) prov["conversions"] = nlohmann::json::array();
  prov["conversions"].push_back({{"teacher", model_name},
                                 {"teacher_digest", digest},
                                 {"maps", fs::absolute(maps.path()).lexically_normal().string()},
                                 {"maps_teacher", maps.source()},
                                 {"feature_map", maps.feature_map()},
                                 {"sla", maps.sla()},
                                 {"layers", r.layers},
                                 {"teacher_checked", r.teacher_checked}});
  if (!r.placement.is_null()) prov["conversions"].back()["placement"] = r.placement;
  r.summary = models::attention_summary(model);
  return r;
}

ConvertResult convert(const ConvertOptions& o) {
  MIMIC_CHECK(!o.model_dir.empty() && !o.maps.empty() && !o.out.empty(), "convert needs --model, --maps and --out");
  if (fs::exists(o.out) && fs::exists(o.model_dir))
    MIMIC_CHECK(!fs::equivalent(o.out, o.model_dir), "--out ", o.out, " is the model directory itself: write the converted model elsewhere");
  auto maps = distill::DistilledMaps::open(o.maps);
  auto model = models::load_model(o.model_dir);
  auto r = convert_model(*model, o.model_dir, maps, o.layers, o.force, o.keep_softmax);
  model->save(o.out);
  r.out = o.out;
  return r;
}

}  // namespace mimic::convert
