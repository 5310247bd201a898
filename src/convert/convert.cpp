#include "mimic/convert/convert.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "mimic/attention/distillable.h"
#include "mimic/attention/hybrid_kernel.h"
#include "mimic/attention/kinds.h"
#include "mimic/core/error.h"
#include "mimic/core/layers.h"
#include "mimic/distill/maps_file.h"
#include "mimic/models/model.h"
#include "mimic/models/family.h"
#include "mimic/record/record.h"
#include "mimic/models/tokenizer.h"

namespace mimic::convert {

namespace fs = std::filesystem;

namespace {

nlohmann::json kept_json(const std::vector<HeadRef>& kept, const distill::DistilledMaps& maps) {
  nlohmann::json heads = nlohmann::json::array();
  for (const auto& x : kept) heads.push_back({{"layer", x.layer}, {"head", x.head}, {"kl", maps.head_kl(x.layer)[static_cast<size_t>(x.head)]}});
  return heads;
}

// The heads kept by the highest held-out KL of distill (--placement kl).
std::vector<HeadRef> kl_placement(int64_t k, const std::vector<HeadRef>& candidates, const distill::DistilledMaps& maps,
                                  const std::string& option, nlohmann::json& placement) {
  MIMIC_CHECK(k <= static_cast<int64_t>(candidates.size()), option, " auto:", k, ": K must be in [1, ", candidates.size(),
              "] (the heads of the converted layers)");
  std::vector<std::pair<double, HeadRef>> all;
  for (const auto& c : candidates) {
    const double kl = maps.head_kl(c.layer)[static_cast<size_t>(c.head)];
    MIMIC_CHECK(std::isfinite(kl), "--placement kl: the maps hold no KL for layer ", c.layer, " head ", c.head,
                " (a student whose weights are no distribution, such as delta's): use --placement probe or list the heads");
    all.push_back({kl, c});
  }
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<HeadRef> kept;
  for (int64_t i = 0; i < k; ++i) kept.push_back(all[static_cast<size_t>(i)].second);
  placement = {{"placement", "kl"},
               {"reason", "the K heads whose distilled student fits the teacher worst: highest held-out KL(softmax || student) "
                          "measured by distill"},
               {"next_kl", k < static_cast<int64_t>(all.size()) ? nlohmann::json(all[static_cast<size_t>(k)].first) : nlohmann::json()}};
  return kept;
}

// The heads kept by measured effect (--placement probe), with the curve's passkey column measured at every step.
std::vector<HeadRef> probe_placement(const KeepSpec& spec, const PlacementOptions& p, models::Model& model, HeadPlacer& placer,
                                     nlohmann::json& placement) {
  MIMIC_CHECK(model.summary().family->causal, "--placement probe measures in-context copying and passkey retrieval of a causal LM; ",
              "this is a ", model.summary().model_type, " model: use --placement kl");
  ProbeCalibration cal;
  if (p.calibration_set) {
    cal = *p.calibration_set;
  } else {
    MIMIC_CHECK(p.tokenizer != nullptr, "--placement probe needs the model's tokenizer to build its calibration set");
    cal = probe_calibration(*p.tokenizer, model.summary().max_positions, model.summary().context_note, p.calibration);
  }
  GreedyOptions g;
  g.count = spec.kind == KeepSpec::Kind::Count ? spec.count : 0;
  g.share = spec.kind == KeepSpec::Kind::Share ? spec.share : 0;
  g.leaders = p.leaders;
  g.weights = p.weights;
  g.progress = p.progress;
  g.option = p.option();
  auto r = run_probe(model, placer, cal, g, p.batch_size);
  placement = r.record;
  return r.kept;
}

// The rule that ranks the heads for auto:K / auto:P% ("" for no placement or a hand-made list).
std::string ranking_rule(const PlacementOptions& p, const KeepSpec& spec, bool causal) {
  if (spec.kind != KeepSpec::Kind::Count && spec.kind != KeepSpec::Kind::Share) return "";
  const std::string rule = p.rule.empty() ? (causal ? "probe" : "kl") : p.rule;
  MIMIC_CHECK(rule == "probe" || rule == "kl", "--placement must be probe or kl, got '", rule, "'");
  return rule;
}

// The heads that keep softmax (PlacementOptions::keep_softmax), or the cache (cache_heads), and the placement record
// written into mimic.json.
std::vector<HeadRef> choose_heads(const PlacementOptions& p, models::Model& model, const distill::DistilledMaps& maps,
                                  const std::vector<int64_t>& layers, HeadPlacer& placer, nlohmann::json& placement) {
  const auto spec = parse_keep_spec(p.spec(), p.option());
  if (spec.kind == KeepSpec::Kind::None) return {};
  const auto candidates = placer.candidates();
  const int64_t n_head = model.summary().n_head;
  std::vector<HeadRef> kept;
  if (spec.kind == KeepSpec::Kind::List) {
    for (const auto& h : spec.heads)
      MIMIC_CHECK(std::find(candidates.begin(), candidates.end(), h) != candidates.end(), p.option(), ": head ", head_name(h),
                  " is not a head of a converted layer (", n_head, " heads; layers ", nlohmann::json(layers).dump(), ")");
    kept = spec.heads;
    placement = {{"rule", "list"}, {"reason", "chosen by hand (" + p.option() + " " + p.spec() + ")"}};
  } else {
    MIMIC_CHECK(spec.kind != KeepSpec::Kind::Count || spec.count <= static_cast<int64_t>(candidates.size()), p.option(), " auto:",
                spec.count, ": K must be in [1, ", candidates.size(), "] (the heads of the converted layers)");
    if (ranking_rule(p, spec, model.summary().family->causal) == "kl") {
      MIMIC_CHECK(spec.kind == KeepSpec::Kind::Count, p.option(), " ", p.spec(),
                  ": auto:P% is a share of the teacher's copy gain, which only --placement probe measures");
      kept = kl_placement(spec.count, candidates, maps, p.option(), placement);
    } else {
      kept = probe_placement(spec, p, model, placer, placement);
    }
    placement["rule"] = p.spec();
  }
  placement["kept"] = kept_json(kept, maps);
  placement["candidates"] = candidates.size();
  return kept;
}

// The hybrid kind's options that shape LoLA's sparse cache.
constexpr const char* kCacheOptions[] = {"cache", "cache_every", "cache_heads"};

// Attention options without the sparse cache (a JSON null removes a key of the maps' options: DistilledMaps::kernel).
nlohmann::json without_cache(nlohmann::json options) {
  for (const char* key : kCacheOptions) options[key] = nullptr;
  return options;
}

// A sparse cache asked of maps of another kind than hybrid (`what`: who asked), refused with the way to hybrid maps.
void require_hybrid_maps(const distill::DistilledMaps& maps, int64_t layer, const std::string& what) {
  auto plain = maps.kernel(layer);
  MIMIC_CHECK(dynamic_cast<const attention::HybridAttention*>(plain.get()), what, ": it needs hybrid maps (distill --attention hybrid:window=W); ",
              maps.path(), " holds maps of ", plain->kind(), " attention");
}

// The cache's size λ that --cache-heads hands out, from the students the maps and options build: a hybrid with a cache.
int64_t cache_size(const distill::DistilledMaps& maps, int64_t layer, const nlohmann::json& attention_options) {
  // the maps' kind first: linear maps with cache=N were refused as "unknown linear attention option 'cache'", which
  // did not say that --cache-heads wants hybrid maps (a probe of 2026-12-03)
  require_hybrid_maps(maps, layer, "--cache-heads gives some heads LoLA's sparse cache");
  auto student = maps.kernel(layer, attention_options);
  const auto* hybrid = dynamic_cast<const attention::HybridAttention*>(student.get());
  MIMIC_CHECK(hybrid && hybrid->hybrid_config().cache > 0, "--cache-heads gives some heads LoLA's sparse cache: it needs hybrid maps ",
              "and a cache size (--attention-options cache=N); ", maps.path(), " with these options builds ",
              hybrid ? "a hybrid without a cache" : student->kind() + " attention");
  return hybrid->hybrid_config().cache;
}

}  // namespace

ConvertResult convert_model(models::Model& model, const std::string& model_name, const distill::DistilledMaps& maps,
                            const std::string& layers, bool force, const PlacementOptions& placement,
                            const nlohmann::json& attention_options) {
  const auto s = model.summary();
  const int64_t head_dim = s.head_dim;
  MIMIC_CHECK(maps.n_head() == s.n_head && maps.head_dim() == head_dim, maps.path(), " holds maps for ", maps.n_head(), " heads of ",
              maps.head_dim(), " dimensions, but ", model_name, " has ", s.n_head, " heads of ", head_dim,
              ": maps fit only the model they were distilled from");
  ConvertResult r;
  const std::string digest = models::model_digest(model);
  if (maps.model_digest().empty()) {
    r.warning = maps.path() + " does not name its teacher's digest (an older distill output): the maps could not be checked against " +
                model_name;
  } else if (const auto mismatch = maps.teacher_mismatch(digest, model_name); !mismatch.empty()) {
    MIMIC_CHECK(force, mismatch, ": convert the teacher the maps were distilled from, distill maps for this model, or pass --force");
    r.warning = "--force: " + mismatch;
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
  // A converted model converted again: the maps replace the attention of its converted layers too, kept heads and
  // caches included — said, with the way to convert only the rest (helper-50's probe of 2026-12-04: the kept heads of
  // a probe placement were gone without a word).
  {
    std::string again, softmax_rest;
    for (auto l : r.layers) {
      auto& text = attention::is_reference(*model.attention_kernel(l)) ? softmax_rest : again;
      text += (text.empty() ? "" : ",") + std::to_string(l);
    }
    if (!again.empty()) {
      const std::string note = model_name + " runs converted attention in layer(s) " + again + " (" + models::attention_summary(model) +
                               "): the maps replace it, its kept heads and caches included" +
                               (softmax_rest.empty() ? std::string() : "; --layers " + softmax_rest + " converts only its softmax layers");
      r.warning = r.warning.empty() ? note : r.warning + "; " + note;
    }
  }
  MIMIC_CHECK(!(placement.caches() && !placement.keep_softmax.empty()), "--cache-heads and --keep-softmax both place heads: give one ",
              "(the cache keeps a head's recall at a constant state, softmax with a KV cache that grows)");
  // With --cache-heads the placement runs on the hybrid without its cache (the probe restores heads to softmax: what a
  // cache would hold, measured at the cost of a forward), and the chosen heads get the cache afterwards.
  const int64_t lambda = placement.caches() ? cache_size(maps, r.layers.front(), attention_options) : 0;
  std::map<int64_t, std::shared_ptr<attention::DistillableKernel>> students;
  for (auto l : r.layers) students[l] = maps.kernel(l, placement.caches() ? without_cache(attention_options) : attention_options);
  // layers outside --layers that already run converted attention stay so while the probe measures: its "teacher"
  // (every head of the converted layers softmax) is then the model as given, and its shares are of that model's
  // values (94% of a model keeping 4% of the softmax model's copy gain: helper-93's probe)
  std::string converted_elsewhere;
  for (int64_t l = 0; l < s.n_layer; ++l)
    if (std::find(r.layers.begin(), r.layers.end(), l) == r.layers.end() && !attention::is_reference(*model.attention_kernel(l)))
      converted_elsewhere += (converted_elsewhere.empty() ? "" : ",") + std::to_string(l);
  HeadPlacer placer(model, students);
  const auto kept = choose_heads(placement, model, maps, r.layers, placer, r.placement);
  if (!converted_elsewhere.empty() && r.placement.is_object() && r.placement.value("placement", "") == "probe") {
    r.placement["reference"] = model_name + " as given, whose layer(s) " + converted_elsewhere + " run converted attention";
    const std::string note = "the probe's reference is " + model_name + " as given, whose layer(s) " + converted_elsewhere +
                             " already run converted attention: its shares are of that model's copy gain and passkey, not of the "
                             "softmax model it was converted from";
    r.warning = r.warning.empty() ? note : r.warning + "; " + note;
  }
  // a probe whose heads cannot be trusted says so where the user reads (mimic.json keeps it too)
  if (const auto caveat = r.placement.is_object() ? r.placement.value("caveat", "") : ""; !caveat.empty())
    r.warning = r.warning.empty() ? caveat : r.warning + "; " + caveat;
  if (placement.caches()) {
    std::map<int64_t, std::shared_ptr<attention::DistillableKernel>> cached;
    for (auto l : r.layers) {
      const auto heads = heads_in_layer(kept, l);
      auto options = attention_options;
      if (!heads.empty()) options["cache_heads"] = heads;
      cached[l] = maps.kernel(l, heads.empty() ? without_cache(attention_options) : options);
    }
    r.layers = HeadPlacer(model, cached).place({});
    if (!r.placement.is_null()) r.placement["keeps"] = "a sparse cache of " + std::to_string(lambda) + " keys";
  } else {
    r.layers = placer.place(kept);
    if (!r.placement.is_null()) r.placement["keeps"] = "softmax";
    // said, not refused: auto:P% may need every head after a probe of minutes (a GQA probe of 2026-12-03 kept all 16
    // heads by auto:16 and printed "converted 0 layers" without a word)
    if (r.layers.empty()) {
      const std::string every = "every head of the layers to convert keeps softmax (--keep-softmax " + placement.keep_softmax +
                                "): nothing is converted, and the output computes what " + model_name + " does";
      r.warning = r.warning.empty() ? every : r.warning + "; " + every;
    }
  }
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
  if (!attention_options.empty()) prov["conversions"].back()["attention_options"] = attention_options;
  if (!r.placement.is_null()) prov["conversions"].back()["placement"] = r.placement;
  r.summary = models::attention_summary(model);
  return r;
}

ConvertResult convert(const ConvertOptions& o) {
  MIMIC_CHECK(!o.model_dir.empty() && !o.maps.empty() && !o.out.empty(), "convert needs --model, --maps and --out");
  if (fs::exists(o.out) && fs::exists(o.model_dir))
    MIMIC_CHECK(!fs::equivalent(o.out, o.model_dir), "--out ", o.out, " is the model directory itself: write the converted model elsewhere");
  auto maps = distill::DistilledMaps::open(o.maps);
  // --attention-options against the maps' own kind, before the model is read: "unknown linear attention option
  // 'cache'" named neither the option nor the kind's origin (helper-60's probe of 2026-12-04)
  if (!o.attention_options.empty() && !maps.layers().empty()) {
    const auto options = maps.options_with(o.attention_options);  // its refusal says what to do
    try {
      attention::make_attention_kernel(maps.kind(), options, maps.n_head(), maps.head_dim());
    } catch (const Error& e) {
      for (const char* key : kCacheOptions)
        if (o.attention_options.contains(key))
          require_hybrid_maps(maps, maps.layers().front(), "--attention-options " + o.attention_options.dump() + ": LoLA's sparse cache is the hybrid kind's");
      // another kind's advice only where an option is not this kind's (a window of 0 read "another kind's options need
      // maps distilled for it": helper-83's probe of 2026-12-06)
      const auto& kind = attention::attention_kind(maps.kind());
      bool foreign = false;
      for (const auto& [key, value] : o.attention_options.items()) foreign = foreign || !kind.takes_option(key);
      if (!foreign) fail("--attention-options ", o.attention_options.dump(), ": ", e.what());
      fail("--attention-options ", o.attention_options.dump(), ": ", e.what(), " (", o.maps, " holds maps of ", maps.kind(),
           " attention; another kind's options need maps distilled for it: distill --attention KIND)");
    }
    // a kernel the options make without a place for a trained tensor: said whole by kernel(), not as another kind's
    // option (it read "--attention-options {..}: --attention-options {..}: ... another kind's options need maps
    // distilled for it", advice that did not apply)
    maps.kernel(maps.layers().front(), o.attention_options);
  }
  auto model = models::load_model(o.model_dir, o.device);
  auto placement = o.placement;
  std::unique_ptr<text::Tokenizer> tok;
  const bool probe = ranking_rule(placement, parse_keep_spec(placement.spec(), placement.option()), model->summary().family->causal) == "probe";
  if (probe && !placement.tokenizer && !placement.calibration_set) {
    // the probe's calibration set is text of the training split; a model without a tokenizer is said to need one
    // for the probe, with the placements that need none (helper-50's probe of 2026-12-04: "no tokenizer in DIR")
    try {
      tok = models::load_tokenizer(o.model_dir);
    } catch (const Error& e) {
      fail(e.what(), "; ", placement.option(), " ", placement.spec(), " ranks heads by the probe, which reads text: ",
           "give a model folder with its tokenizer, or --placement kl, or the heads as a list (", placement.option(), " 1.0,3.2)");
    }
    placement.tokenizer = tok.get();
  }
  auto r = convert_model(*model, o.model_dir, maps, o.layers, o.force, placement, o.attention_options);
  model->save(o.out);
  r.out = o.out;
  return r;
}

}  // namespace mimic::convert
