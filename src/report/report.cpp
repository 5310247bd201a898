#include "mimic/report/report.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <regex>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "mimic/analysis/induction.h"
#include "mimic/analysis/metrics.h"
#include "mimic/attention/feature_map.h"
#include "mimic/attention/distillable.h"
#include "mimic/attention/kinds.h"
#include "mimic/core/error.h"
#include "mimic/core/layers.h"
#include "mimic/core/progress.h"
#include "mimic/distill/distill.h"
#include "mimic/distill/maps_file.h"
#include "mimic/io/atomic_file.h"
#include "mimic/io/output_lock.h"
#include "mimic/models/model.h"
#include "mimic/record/record.h"
#include "mimic/report/figures.h"
#include "mimic/report/quality.h"

namespace fs = std::filesystem;

namespace mimic::report {

using attention::DistillableKernel;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A student: its kernel per layer. A missing layer: the source has nothing for it (metrics null); a null
// kernel: the layer runs the reference kind (softmax; a converted model's unconverted layer): it equals the teacher.
struct Student {
  std::string name, kind, path, feature_map;
  std::string attention;  // a --model's attention, as eval describes it (models::attention_summary)
  std::map<int64_t, std::shared_ptr<DistillableKernel>> kernels;
  std::map<int64_t, std::set<int64_t>> kept;  // a converted model's layer → the heads that kept softmax there
};

std::vector<int64_t> parse_list(const std::string& spec, int64_t n, const char* what) {
  try {
    return parse_layers(spec, n);
  } catch (const Error&) {
    // "of heads 0-7" for --plot-heads too (it said "of plot-heads 0-7": helper-57's probe)
    const std::string option = what, noun = option.substr(option.rfind('-') + 1);
    fail("--", what, " '", spec, "': give all, or a list like 0,2,4-5 of ", noun, " 0-", n - 1);
  }
}

// Keeps the entries of `want` that are in `among`, or errors naming the first that is not.
std::vector<int64_t> subset(const std::vector<int64_t>& want, const std::vector<int64_t>& among, const char* what) {
  for (auto w : want)
    MIMIC_CHECK(std::find(among.begin(), among.end(), w) != among.end(), "--", what, ": ", w, " is not among the reported ones (",
                nlohmann::json(among).dump(), ")");
  return want;
}

std::string unique_name(std::string name, const std::vector<Student>& taken, const std::string& path) {
  auto used = [&](const std::string& n) {
    return n == "softmax" || std::any_of(taken.begin(), taken.end(), [&](const Student& s) { return s.name == n; });
  };
  if (used(name) && !path.empty()) name += " (" + fs::path(path).stem().string() + ")";
  for (int i = 2; used(name); ++i) name = name.substr(0, name.rfind(" #")) + " #" + std::to_string(i);
  return name;
}

}  // namespace

std::pair<std::string, std::string> split_labelled(const std::string& entry) {
  const auto eq = entry.find('=');
  if (eq == std::string::npos || fs::exists(entry)) return {"", entry};
  // "=FILE" named nothing and was taken as FILE unlabelled (the eighth probe of 2026-11-29)
  MIMIC_CHECK(eq > 0, "'", entry, "': the label before '=' is empty: give LABEL=PATH, or the path alone");
  return {entry.substr(0, eq), entry.substr(eq + 1)};
}

namespace {

std::vector<Student> open_students(const ReportOptions& o, const record::RecordReader& rec, const std::vector<int64_t>& layers) {
  std::vector<Student> out;
  const int64_t nh = rec.n_head(), hd = rec.head_dim();
  for (const auto& entry : o.maps) {
    const auto [label, path] = split_labelled(entry);
    MIMIC_CHECK(fs::exists(path), "--maps: no file ", path);
    auto maps = distill::DistilledMaps::open(path);
    MIMIC_CHECK(maps.n_head() == nh && maps.head_dim() == hd, path, ": maps for ", maps.n_head(), " heads of ", maps.head_dim(),
                " dimensions, the record has ", nh, " of ", hd);
    maps.check_teacher(rec.model_digest(), "the teacher of " + o.record, "report compares maps on the record of the teacher they were distilled from");
    Student s;
    s.kind = "maps";
    s.path = path;
    s.feature_map = maps.feature_map();
    // named by its map, or by its kind where the kind runs none (delta's maps were named "identity")
    const std::string base = maps.attention().contains("feature_map") ? maps.feature_map() : maps.kind();
    s.name = unique_name(label.empty() ? base + (maps.sla() ? "+sla" : "") : label, out, path);
    for (auto l : layers)
      if (maps.has_layer(l)) s.kernels[l] = maps.kernel(l);
    MIMIC_CHECK(!s.kernels.empty(), path, ": no maps for the reported layers ", nlohmann::json(layers).dump(), " (it has ",
                nlohmann::json(maps.layers()).dump(), ")");
    out.push_back(std::move(s));
  }
  for (const auto& name : o.baselines) {
    attention::make_feature_map({name, 1, 2, nlohmann::json::object()});  // an unknown name is an error listing the known ones
    Student s;
    s.kind = "baseline";
    s.feature_map = name;
    s.name = unique_name(name + " (untrained)", out, "");
    for (auto l : layers) s.kernels[l] = distill::untrained_student("linear", {{"feature_map", name}}, nh, hd, o.seed, l);
    out.push_back(std::move(s));
  }
  for (const auto& entry : o.models) {
    const auto [label, dir] = split_labelled(entry);
    auto model = models::load_model(dir);
    const auto sum = model->summary();
    MIMIC_CHECK(sum.n_head == nh && sum.head_dim == hd, dir, ": ", sum.n_head, " heads of ", sum.head_dim,
                " dimensions, the record has ", nh, " of ", hd);
    // a converted model is compared on the record of a teacher it was converted from (any of its conversions'), where
    // its provenance says (helper-50's probe of 2026-12-04: another model's record gave a full table)
    const auto teachers = models::conversion_teachers(*model);
    MIMIC_CHECK(models::may_be_teacher(teachers, rec.model_digest()), dir, " was converted from a teacher of digest ", teachers.front(), ", not from the teacher of ", o.record, " (digest ",
                rec.model_digest(), "): report compares a converted model on the record of the teacher it was converted from");
    Student s;
    s.kind = "model";
    s.path = dir;
    s.attention = models::attention_summary(*model);
    // "conv/" names the folder conv, as "conv" does (its empty file name made the label "model")
    const fs::path folder = fs::path(dir).lexically_normal();
    const std::string base = (folder.has_filename() ? folder : folder.parent_path()).filename().string();
    s.name = unique_name(label.empty() ? base : label, out, dir);
    if (s.name.empty()) s.name = "model";
    for (auto l : layers) {
      MIMIC_CHECK(l < sum.n_layer, dir, ": no layer ", l, " (", sum.n_layer, " layers)");
      auto kernel = model->attention_kernel(l);
      // a layer that kept softmax is the teacher, not the model's linear attention: absent, as a layer a maps file
      // lacks (its KL 0 entered the model's mean, which then read far better than the same maps': the eighth probe)
      if (attention::is_reference(*kernel)) continue;
      // so are a mixed layer's heads that kept softmax: their KL 0 entered the layer's mean (helper-50's probe)
      for (auto h : kernel->softmax_heads(sum.n_head)) s.kept[l].insert(h);
      auto k = attention::as_distillable(kernel, dir + ": layer " + std::to_string(l));
      k->eval();
      if (s.feature_map.empty()) s.feature_map = k->feature_map();
      s.kernels[l] = k;
    }
    MIMIC_CHECK(!s.kernels.empty(), dir, ": no layer among the reported ones ", nlohmann::json(layers).dump(),
                " runs linear attention (it computes softmax there): --model compares a converted model's linear-attention layers");
    out.push_back(std::move(s));
  }
  return out;
}

// What the figures need of the drawn sample, gathered while streaming.
void keep_plot_data(PlotData& pd, size_t src, int64_t layer, const at::Tensor& w, const at::Tensor& scores,
                    const at::Tensor& vis, const std::vector<int64_t>& plot_heads, int64_t tokens) {
  const int64_t p = std::min<int64_t>(tokens, w.size(-1));
  auto shown = torch::where(vis, w, torch::full_like(w, std::numeric_limits<double>::quiet_NaN()));  // NaN: keys not seen
  for (size_t hi = 0; hi < plot_heads.size(); ++hi) {
    auto crop = shown[0][plot_heads[hi]].narrow(0, 0, p).narrow(1, 0, p).to(torch::kDouble).contiguous();
    pd.heat[{layer, src, hi}] = std::vector<double>(crop.data_ptr<double>(), crop.data_ptr<double>() + p * p);
  }
  pd.heat_tokens = p;
  // monotonicity: every visible (query, key) of the first drawn head, relative to the row's maximum
  const int64_t h = plot_heads.front();
  auto v = vis[0][0];
  auto s = scores[0][h].to(torch::kDouble);
  auto ww = w[0][h].to(torch::kDouble);
  const double inf = std::numeric_limits<double>::infinity();
  auto smax = std::get<0>(torch::where(v, s, torch::full_like(s, -inf)).max(-1, true));
  auto wmax = std::get<0>(torch::where(v, ww, torch::full_like(ww, -inf)).max(-1, true));
  auto keep = v & (v.sum(-1, true) >= 2) & (wmax > 0);  // rows with at least two keys
  auto x = (s - smax).masked_select(keep).contiguous();
  auto y = (ww / wmax).masked_select(keep).contiguous();
  auto& m = pd.mono[{layer, src}];
  m.x.assign(x.data_ptr<double>(), x.data_ptr<double>() + x.numel());
  m.y.assign(y.data_ptr<double>(), y.data_ptr<double>() + y.numel());
}

std::string fmt(double v, int digits = 4) {
  if (!std::isfinite(v)) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

nlohmann::json ReportResult::to_json() const {
  return {{"out", out},     {"samples", samples}, {"layers", layers},   {"heads", heads},
          {"sources", sources}, {"files", files}, {"uniform_entropy", uniform_entropy},
          {"seconds", seconds}, {"metrics", rows}, {"quality", quality}};
}

ReportResult report(const ReportOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  MIMIC_CHECK(!o.record.empty(), "report: --record FILE.h5 is required");
  MIMIC_CHECK(!o.out.empty(), "report: --out DIR is required");
  MIMIC_CHECK(o.top_k >= 1, "--mass-k must be >= 1, got ", o.top_k);
  MIMIC_CHECK(o.plot_tokens >= 2, "--plot-tokens must be >= 2, got ", o.plot_tokens);
  MIMIC_CHECK(o.samples >= 0, "--samples must be >= 0, got ", o.samples);
  for (const auto& b : o.baselines) attention::make_feature_map({b, 1, 2, nlohmann::json::object()});  // typos first
  auto quality = read_quality(o.evals);  // the --eval files, read before any heavy work
  record::RecordReader rec(o.record);
  const int64_t n = rec.samples(), nh = rec.n_head();
  MIMIC_CHECK(n > 0, o.record, ": the record holds no complete sample");

  // what to report
  ReportResult res;
  res.out = o.out;
  res.record_note = rec.unfinished();
  res.mass_k = std::min(o.top_k, rec.seq_len());  // a query's top k of at most seq_len keys
  res.plot_tokens = std::min(o.plot_tokens, rec.seq_len());
  res.local_window = std::min(o.local_window, rec.seq_len());  // a window of the whole sample is every key
  const auto& recorded = rec.layers();
  if (o.layers.empty() || o.layers == "all") {
    res.layers = recorded;
  } else {
    const int64_t top = *std::max_element(recorded.begin(), recorded.end()) + 1;
    res.layers = parse_list(o.layers, top, "layers");
    for (auto l : res.layers)
      MIMIC_CHECK(std::find(recorded.begin(), recorded.end(), l) != recorded.end(), "--layers: layer ", l, " is not in ", o.record,
                  " (recorded layers: ", nlohmann::json(recorded).dump(), ")");
  }
  res.heads = parse_list(o.heads, nh, "heads");
  const int64_t count = o.samples > 0 ? std::min(o.samples, n) : std::max<int64_t>(1, std::llround(0.1 * static_cast<double>(n)));
  for (int64_t s = n - count; s < n; ++s) res.samples.push_back(s);
  const int64_t plot_sample = o.plot_sample >= 0 ? o.plot_sample : res.samples.front();
  MIMIC_CHECK(std::find(res.samples.begin(), res.samples.end(), plot_sample) != res.samples.end(), "--plot-sample ", plot_sample,
              " is not among the reported samples (", res.samples.front(), "-", res.samples.back(), ")");
  std::vector<int64_t> plot_layers;
  if (o.plot_layers.empty()) {
    for (size_t i : {size_t{0}, res.layers.size() / 2, res.layers.size() - 1})
      if (std::find(plot_layers.begin(), plot_layers.end(), res.layers[i]) == plot_layers.end()) plot_layers.push_back(res.layers[i]);
  } else {
    plot_layers = subset(parse_list(o.plot_layers, 1 << 20, "plot-layers"), res.layers, "plot-layers");
  }
  std::vector<int64_t> plot_heads;  // indices into res.heads
  if (o.plot_heads.empty()) {
    for (size_t i = 0; i < std::min<size_t>(4, res.heads.size()); ++i) plot_heads.push_back(static_cast<int64_t>(i));
  } else {
    for (auto h : subset(parse_list(o.plot_heads, nh, "plot-heads"), res.heads, "plot-heads"))
      plot_heads.push_back(std::find(res.heads.begin(), res.heads.end(), h) - res.heads.begin());
  }

  auto students = open_students(o, rec, res.layers);
  // a --model's row of --eval results is its own: another model's numbers under its label were shown as its own (a
  // converted model's perplexity beside a mixed model of that label: helper-57's probe of 2026-12-04), as two results
  // of other attentions under one label are refused
  for (const auto& st : students)
    for (const auto& q : quality)
      MIMIC_CHECK(st.kind != "model" || q.label != st.name || q.attention.empty() || q.attention == st.attention, "--eval ", q.label, "=",
                  q.files.front(), ": its model computes ", q.attention, ", while --model ", st.path, " (the label '", st.name, "') computes ",
                  st.attention, ": one label per model (give each model's own eval --json under its label)");
  const size_t n_src = students.size() + 1;  // 0: the teacher
  res.sources.push_back({{"name", "softmax"}, {"kind", "teacher"}, {"path", rec.source()}, {"feature_map", nullptr}});
  for (const auto& s : students)
    res.sources.push_back({{"name", s.name}, {"kind", s.kind}, {"path", s.path}, {"feature_map", s.feature_map}});
  const auto lock = io::lock_output_dir(o.out);

  // stream: one sample × one layer at a time
  torch::NoGradGuard no_grad;
  std::vector<std::vector<analysis::MetricsAccumulator>> acc(n_src);
  std::vector<std::vector<analysis::InductionAccumulator>> ind(n_src);
  for (size_t si = 0; si < n_src; ++si)
    for (auto l : res.layers) {
      acc[si].emplace_back(l, static_cast<int64_t>(res.heads.size()), o.top_k);
      ind[si].emplace_back(static_cast<int64_t>(res.heads.size()), o.local_window);
    }
  auto head_index = torch::tensor(res.heads, torch::kLong);
  double uniform_sum = 0, uniform_rows = 0;
  PlotData pd;
  Progress bar("report", count * static_cast<int64_t>(res.layers.size()), "layer");
  if (!o.progress) bar.disable();
  for (auto s : res.samples) {
    const auto mask = rec.attention_mask(s, 1);
    const auto ids = rec.input_ids(s, 1);
    for (size_t li = 0; li < res.layers.size(); ++li) {
      const int64_t layer = res.layers[li];
      analysis::TeacherBatch b;
      b.q = rec.read(layer, "q", s, 1);
      b.k = rec.read(layer, "k", s, 1);
      b.v = rec.read(layer, "v", s, 1);  // an L2- or RMS-normalised student's weights depend on the values
      b.mask = mask;
      b.scale = rec.scale(layer);
      b.causal = rec.causal();
      attention::AttentionContext ctx;
      ctx.causal = b.causal;
      ctx.key_padding_mask = b.mask;
      ctx.scale = b.scale;
      const auto vis = analysis::visible(b);
      if (li == 0) {
        auto cnt = vis.sum(-1).to(torch::kDouble);  // [1, 1, T]; 0 in padded rows
        uniform_sum += cnt.clamp_min(1).log().sum().item<double>();
        uniform_rows += (cnt > 0).sum().item<double>();
      }
      auto a = analysis::teacher_weights(b);
      auto scores = torch::matmul(b.q, b.k.transpose(-1, -2)) * b.scale;
      auto sel = [&](const at::Tensor& t) { return t.index_select(1, head_index); };
      auto a_sel = sel(a), scores_sel = sel(scores);
      const bool drawn = s == plot_sample && std::count(plot_layers.begin(), plot_layers.end(), layer);
      acc[0][li].add_weights(a_sel, a_sel.clamp_min(std::numeric_limits<float>::min()).log(), scores_sel, b);
      ind[0][li].add(a_sel, ids, mask);
      if (drawn) keep_plot_data(pd, 0, layer, a_sel, scores_sel, vis, plot_heads, o.plot_tokens);
      for (size_t si = 0; si < students.size(); ++si) {
        auto it = students[si].kernels.find(layer);
        if (it == students[si].kernels.end()) continue;
        at::Tensor w, log_w;
        it->second->weights_quadratic(b.q, b.k, b.v, ctx, &w, &log_w);
        w = sel(w), log_w = sel(log_w);
        acc[si + 1][li].add_weights(a_sel, log_w, scores_sel, b, it->second->weights_may_be_negative() ? w : at::Tensor());
        ind[si + 1][li].add(w, ids, mask);
        if (drawn) keep_plot_data(pd, si + 1, layer, w * vis.to(w.dtype()), scores_sel, vis, plot_heads, o.plot_tokens);
      }
      bar.advance(1);
    }
  }
  bar.finish();
  res.uniform_entropy = uniform_rows > 0 ? uniform_sum / uniform_rows : kNaN;

  // the table: one row per source × layer × head, and the mean over heads (head -1)
  Metrics m;  // for the figures: [source][layer index][head index or mean]
  m.sources.push_back("softmax");
  for (const auto& s : students) m.sources.push_back(s.name);
  m.layers = res.layers;
  m.heads = res.heads;
  m.top_k = res.mass_k;
  m.uniform_entropy = res.uniform_entropy;
  res.rows = nlohmann::json::array();
  for (size_t si = 0; si < n_src; ++si) {
    m.values.emplace_back();
    for (size_t li = 0; li < res.layers.size(); ++li) {
      const bool present = si == 0 || students[si - 1].kernels.count(res.layers[li]);
      const auto r = acc[si][li].result();
      const auto sc = ind[si][li].result();
      // a head that kept softmax in a converted model is the teacher's: no row, and out of the layer's mean
      static const std::set<int64_t> no_kept;
      const std::set<int64_t>* kept_heads = &no_kept;
      if (si > 0)
        if (auto it = students[si - 1].kept.find(res.layers[li]); it != students[si - 1].kept.end()) kept_heads = &it->second;
      const auto& kept = *kept_heads;
      std::vector<HeadValues> per;
      for (size_t hi = 0; hi <= res.heads.size(); ++hi) {
        HeadValues v;
        if (hi == res.heads.size()) {
          // the mean over the heads that have each value: an unweighted mean over heads, as the accumulators' own,
          // leaving out the kept heads (no values) and a head without a Spearman
          v = mean_where_defined(per);
        } else if (present && !kept.count(res.heads[hi])) {
          const auto& x = r.heads[hi];
          v.entropy = si == 0 ? x.entropy_softmax : x.entropy_linear;
          v.kl = si == 0 ? 0.0 : x.kl;
          v.ce = si == 0 ? x.entropy_softmax : x.ce;
          v.spearman = x.spearman;
          v.top_k = si == 0 ? x.top_k_softmax : x.top_k_linear;
          v.induction = sc.induction[hi];
          v.previous_token = sc.previous_token[hi];
          v.local_mass = sc.local_mass[hi];
        }
        per.push_back(v);
        res.rows.push_back({{"source", m.sources[si]},
                            {"layer", res.layers[li]},
                            {"head", hi < res.heads.size() ? res.heads[hi] : -1},
                            {"entropy", number(v.entropy)},
                            {"kl", number(v.kl)},
                            {"ce", number(v.ce)},
                            {"spearman", number(v.spearman)},
                            {"top_k_mass", number(v.top_k)},
                            {"induction", number(v.induction)},
                            {"previous_token", number(v.previous_token)},
                            {"local_mass", number(v.local_mass)}});
      }
      m.values.back().push_back(per);
    }
  }

  // files. The page and metrics.json of an earlier report here go first and come last: a report killed while it wrote
  // its figures left the old page showing the new figures beside the old ones, with nothing to say the folder was
  // half written (helper-63's probe of 2026-12-05). The folder holds a page only once all it shows is this run's.
  for (const char* name : {"report.html", "metrics.json"}) fs::remove(fs::path(o.out) / name);
  auto add = [&](const std::vector<std::string>& paths) {
    for (const auto& p : paths) res.files.push_back(fs::path(p).filename().string());
  };
  {
    std::ostringstream csv;
    csv << kMetricsCsvHead << "entropy,kl,ce,spearman,top_" << res.mass_k << "_mass,induction,previous_token,local_mass_" << res.local_window << "\n";
    size_t i = 0;
    for (const auto& r : res.rows) {
      const size_t si = i++ / (res.layers.size() * (res.heads.size() + 1));
      auto cell = [&](const char* k) { return r.at(k).is_null() ? std::string() : fmt(r.at(k).get<double>(), 6); };
      const int64_t head = r.at("head").get<int64_t>();
      csv << '"' << r.at("source").get<std::string>() << "\"," << res.sources[si].at("kind").get<std::string>() << ','
          << r.at("layer").get<int64_t>() << ',' << (head < 0 ? std::string("mean") : std::to_string(head)) << ',' << cell("entropy")
          << ',' << cell("kl") << ',' << cell("ce") << ',' << cell("spearman") << ',' << cell("top_k_mass") << ',' << cell("induction")
          << ',' << cell("previous_token") << ',' << cell("local_mass") << '\n';
    }
    io::write_text_atomically((fs::path(o.out) / "metrics.csv").string(), csv.str());
    res.files.push_back("metrics.csv");
  }
  Figures figs;
  figs.heatmaps = write_heatmaps(o.out, m, pd, plot_layers, plot_heads, plot_sample);
  figs.entropy = write_entropy(o.out, m);
  figs.monotonicity = write_monotonicity(o.out, m, pd, plot_layers, plot_heads.front(), plot_sample);
  if (!students.empty()) figs.kl_grid = write_kl_grid(o.out, m);
  figs.induction_grid = write_induction_grid(o.out, m);
  for (const auto& f : figs.heatmaps) add(f.files);
  add(figs.entropy.files);
  add(figs.monotonicity.files);
  add(figs.kl_grid.files);
  add(figs.induction_grid.files);
  res.files.push_back("metrics.json");
  res.files.push_back("report.html");
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json info = {{"record", fs::absolute(o.record).lexically_normal().string()},
                         {"teacher", rec.source()},
                         {"causal", rec.causal()},
                         {"seq_len", rec.seq_len()},
                         {"n_head", nh},
                         {"head_dim", rec.head_dim()},
                         {"top_k", o.top_k},
                         {"plot_sample", plot_sample}};
  // Quality: the --eval results, and a row (no numbers) for each model given without one, so that the page shows
  // what was not measured.
  for (const auto& st : students)
    if (st.kind == "model" && std::none_of(quality.begin(), quality.end(), [&](const QualityRow& q) { return q.label == st.name; })) {
      QualityRow q;
      q.label = st.name;
      q.attention = st.attention;  // the row says which model it is, as a row of results does
      quality.push_back(q);
    }
  res.quality = quality_json(quality);
  auto j = res.to_json();
  j["record"] = info;
  // One report per folder: the files of an earlier report here that this one did not write (figures of other
  // layers) go, before the page that would list them; files a report never writes stay (docs/reliability.md, "One
  // run's result per folder").
  static const std::regex ours(R"((heatmaps_layer\d+|entropy|monotonicity|kl_grid|induction_grid)\.(png|svg)|metrics\.(csv|json)|report\.html)");
  const std::set<std::string> written(res.files.begin(), res.files.end());
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(o.out)) {
    const auto name = e.path().filename().string();
    if (e.is_regular_file() && std::regex_match(name, ours) && !written.count(name)) stale.push_back(e.path());
  }
  for (const auto& p : stale) fs::remove(p);
  io::write_text_atomically((fs::path(o.out) / "metrics.json").string(), j.dump(1) + "\n");
  io::write_text_atomically((fs::path(o.out) / "report.html").string(), render_html(info, res.to_json(), m, figs, quality_html(quality)));
  return res;
}

}  // namespace mimic::report
