#include "mimic/convert/convert.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>

#include "mimic/attention/distillable.h"
#include "mimic/core/error.h"
#include "mimic/core/layers.h"
#include "mimic/distill/maps_file.h"
#include "mimic/models/model.h"
#include "mimic/record/record.h"

namespace mimic::convert {

namespace fs = std::filesystem;

ConvertResult convert_model(models::Model& model, const std::string& model_name, const distill::DistilledMaps& maps,
                            const std::string& layers, bool force) {
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
  for (auto l : r.layers) model.set_attention_kernel(l, maps.kernel(l));
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
  r.summary = models::attention_summary(model);
  return r;
}

ConvertResult convert(const ConvertOptions& o) {
  MIMIC_CHECK(!o.model_dir.empty() && !o.maps.empty() && !o.out.empty(), "convert needs --model, --maps and --out");
  if (fs::exists(o.out) && fs::exists(o.model_dir))
    MIMIC_CHECK(!fs::equivalent(o.out, o.model_dir), "--out ", o.out, " is the model directory itself: write the converted model elsewhere");
  auto maps = distill::DistilledMaps::open(o.maps);
  auto model = models::load_model(o.model_dir);
  auto r = convert_model(*model, o.model_dir, maps, o.layers, o.force);
  model->save(o.out);
  r.out = o.out;
  return r;
}

}  // namespace mimic::convert
