// mimic report --record FILE.h5 [--maps A.safetensors ... --baseline elu ... --model DIR] --out DIR — entropy, KL,
// CE, monotonicity and top-k mass of linear attention against its softmax teacher, per layer and head: CSV, JSON,
// figures (PNG + SVG) and report.html. docs/report.md.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <tuple>

#include "mimic/attention/feature_map.h"
#include "cli.h"
#include "mimic/core/error.h"
#include "mimic/core/mean.h"
#include "mimic/core/words.h"
#include "mimic/io/output_lock.h"
#include "mimic/report/pareto.h"
#include "mimic/report/report.h"
#include "ranges.h"

namespace mimic::cli {
namespace {

struct ReportArgs {
  Common common;
  report::ReportOptions o;
  std::string pareto;
  std::set<std::string> given;  // options given on the command line (a default clamped to the record is said nowhere)
};

// model_dir_arg for "[LABEL=]DIR|NAME": the directory resolved, the label kept
CLI::Validator labelled_model_dir_arg() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::string label, dir;
        if (auto why = path_problem(s); !why.empty()) return why;  // before split_labelled asks the file system (above)
        try {
          std::tie(label, dir) = report::split_labelled(s);
          if (auto why = path_problem(dir); !why.empty()) return why;
          dir = resolve_model_dir(dir);
        } catch (const Error& e) {
          return e.what();
        }
        s = label.empty() ? dir : label + "=" + dir;
        return {};
      },
      "[LABEL=]DIR|NAME");
}

// input_file_arg for "[LABEL=]FILE"
CLI::Validator labelled_input_file_arg(const std::string& what) {
  return CLI::Validator(
      [what](std::string& s) -> std::string {
        // the whole entry first: split_labelled asks the file system whether it names a file, which throws on a
        // name too long for it (a filesystem_error, past CLI11, that named no option)
        if (auto why = path_problem(s); !why.empty()) return why;
        try {
          return input_file_problem(report::split_labelled(s).second, what);
        } catch (const std::exception& e) {
          return e.what();
        }
      },
      "[LABEL=]FILE");
}

void run(ReportArgs& a) {
  start(a.common);
  io::OutputLock lock;
  {
    std::vector<std::pair<std::string, std::string>> inputs = {{"--record", a.o.record}, {"--pareto", a.pareto}};
    auto path_of = [](const std::string& e) { return report::split_labelled(e).second; };
    for (const auto& m : a.o.maps) inputs.push_back({"--maps", path_of(m)});
    for (const auto& m : a.o.models) inputs.push_back({"--model", path_of(m)});
    for (const auto& e : a.o.evals) inputs.push_back({"--eval", path_of(e)});
    refuse_out_over_inputs(a.o.out, inputs);
    // the folder locked before it is checked and held to the end: checked first and locked at the write, a report and an
    // export started together both passed the check and both wrote (the tenth probe)
    lock = io::lock_output_dir(a.o.out);
    refuse_foreign_output(a.o.out, OutputKind::Report);
  }
  MIMIC_USAGE_CHECK(a.o.record.empty() != a.pareto.empty(), "give --record (the attention report) or --pareto (a trade-off figure from a table), one of them");
  if (!a.pareto.empty()) {
    const auto files = report::write_pareto(a.pareto, a.o.out);
    if (a.common.json) return print_json({{"files", files}});
    std::printf("wrote %s and %s\n", files.at(0).c_str(), files.at(1).c_str());
    return;
  }
  a.o.seed = a.common.seed;
  a.o.progress = !a.common.json;
  auto r = report::report(a.o);
  if (!r.record_note.empty()) print_note(r.record_note);
  if (a.o.samples > static_cast<int64_t>(r.samples.size()))  // clamped to the record, and said so
    std::fprintf(stderr, "mimic: note: --samples %lld: the record holds %zu samples; reporting all of them\n",
                 static_cast<long long>(a.o.samples), r.samples.size());
  // only for what was asked: a default fitted to a short record printed notes of options never given (the eighteenth probe)
  if (a.given.count("--mass-k")) note_clamped("--mass-k", a.o.top_k, r.mass_k, "the record's tokens per sample");
  if (a.given.count("--plot-tokens")) note_clamped("--plot-tokens", a.o.plot_tokens, r.plot_tokens, "the record's tokens per sample");
  if (a.given.count("--local-window")) note_clamped("--local-window", a.o.local_window, r.local_window, "the record's tokens per sample");
  // a label that names no --model makes a row of its own beside the model's empty one: a typo, or a file's name taken as
  // the label, looked like two models (the newcomer probe of 2026-12-01)
  std::string model_names;
  for (const auto& s : r.sources)
    if (s.at("kind") == "model") model_names += (model_names.empty() ? "" : ", ") + s.at("name").get<std::string>();
  if (!model_names.empty())
    for (const auto& q : r.quality) {
      const auto label = q.at("label").get<std::string>();
      const bool a_model = std::any_of(r.sources.begin(), r.sources.end(),
                                       [&](const nlohmann::json& s) { return s.at("kind") == "model" && s.at("name") == label; });
      if (!a_model && label != "teacher" && !q.at("files").empty())
        std::fprintf(stderr, "mimic: note: --eval '%s' names no --model of this report (%s): its numbers stand in a row of their own; "
                     "LABEL=FILE with a model's label joins them\n", label.c_str(), model_names.c_str());
    }
  if (a.common.json) return print_json(r.to_json());
  if (!r.quality.empty()) {
    const bool any_accuracy = std::any_of(r.quality.begin(), r.quality.end(), [](const nlohmann::json& q) { return q.contains("accuracy"); });
    std::printf("%-24s %12s %18s %s%s\n", "quality", "perplexity", "copy gain", any_accuracy ? "accuracy (95% interval) [cls: F1, MCC]      " : "",
                "passkey ranked first");
    for (const auto& q : r.quality) {
      const auto has = [&](const char* k) { return q.contains(k) && !q[k].is_null(); };
      char ppl[32] = "-", gain[48] = "-";
      if (has("perplexity")) std::snprintf(ppl, sizeof ppl, "%.1f", q["perplexity"]["value"].get<double>());
      if (has("copy_gain"))
        std::snprintf(gain, sizeof gain, "%.2f ± %.2f", q["copy_gain"]["value"].get<double>(), q["copy_gain"]["ci95"].get<double>());
      std::string pk;
      if (has("passkey"))
        for (const auto& c : q["passkey"])
          pk += (pk.empty() ? "" : " · ") + std::to_string(c["ranked_first"].get<int64_t>()) + "/" + std::to_string(c["trials"].get<int64_t>()) +
                " at " + std::to_string(c["length"].get<int64_t>());
      std::string acc;
      if (any_accuracy) {
        char cell[96] = "-";
        if (has("accuracy")) {
          const auto& x = q["accuracy"];
          std::snprintf(cell, sizeof cell, "%s %.3f (%.3f-%.3f)", x["task"].get<std::string>().c_str(), x["value"].get<double>(),
                        x["ci95"][0].get<double>(), x["ci95"][1].get<double>());
          if (x.contains("mcc"))
            std::snprintf(cell + std::strlen(cell), sizeof cell - std::strlen(cell), " F1 %.3f MCC %.3f", x["f1"].get<double>(), x["mcc"].get<double>());
        }
        char padded[112];
        std::snprintf(padded, sizeof padded, "%-43s ", cell);
        acc = padded;
      }
      std::printf("%-24s %12s %18s %s%s\n", q["label"].get<std::string>().c_str(), ppl, gain, acc.c_str(), pk.empty() ? "-" : pk.c_str());
    }
  }
  // top-k named with its k (the CSV's column says top_8_mass; "top-k" alone did not: helper-87's probe)
  std::printf("%-24s %6s %9s %9s %9s %9s\n", "source (mean of layers)", "", "entropy", "KL", "spearman", ("top-" + std::to_string(r.mass_k)).c_str());
  bool undefined = false;
  for (const auto& s : r.sources) {
    const auto name = s.at("name").get<std::string>();
    // each over the layers that have it, as the page's mean (a layer without a Spearman dropped its entropy too)
    DefinedMean e, kl, rho, top;
    for (const auto& row : r.rows)
      if (row.at("source") == name && row.at("head") == -1) {
        auto get = [&](const char* k) { return row.at(k).is_null() ? NAN : row.at(k).get<double>(); };
        e.add(get("entropy")), kl.add(get("kl")), rho.add(get("spearman")), top.add(get("top_k_mass"));
      }
    std::printf("%-24s %6s %s %s %s %s\n", name.c_str(), "", metric_cell(e.value()).c_str(), metric_cell(kl.value()).c_str(),
                metric_cell(rho.value()).c_str(), metric_cell(top.value()).c_str());
    undefined = undefined || !std::isfinite(e.value()) || !std::isfinite(kl.value()) || !std::isfinite(top.value());
  }
  std::printf("(entropy and KL in nats; top-%lld: the weight on each query's %lld largest)\n", static_cast<long long>(r.mass_k),
              static_cast<long long>(r.mass_k));
  if (undefined)
    std::printf("(-: undefined for a student whose weights are no distribution, such as delta's; its induction, previous_token and "
                "local_mass in the files are sums of signed weights, not shares)\n");
  const auto count = [](size_t n, const char* one) { return count_of(static_cast<int64_t>(n), one); };
  std::printf("%s, %s, %s: %s in %s (open report.html), %.1f s\n", count(r.samples.size(), "sample").c_str(), count(r.layers.size(), "layer").c_str(),
              count(r.heads.size(), "head").c_str(), count(r.files.size(), "file").c_str(), r.out.c_str(), r.seconds);
}

}  // namespace

void register_report(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  std::string maps;
  for (const auto& m : attention::feature_maps()) maps += (maps.empty() ? "" : ", ") + m.name;
  auto* sub = app.add_subcommand("report", "Entropy, KL and monotonicity of linear attention against softmax: tables, figures, report.html");
  sub->add_option("--record", a->o.record, "Attention record of the teacher (mimic record); required unless --pareto")->check(input_file_arg("the .h5 file record wrote"));
  sub->add_option("--pareto", a->pareto, "Instead: draw OUT/pareto.{png,svg} from a table of results (one curve per method; "
                                         "format in src/report/pareto.h, recipes/gpt2-recall.sh writes one)")
      ->check(input_file_arg("the table of results"));
  sub->add_option("--maps", a->o.maps, "A distill output to compare (repeatable; LABEL=FILE names it)")->check(labelled_input_file_arg("the maps file distill wrote"));
  sub->add_option("--baseline", a->o.baselines, "An untrained feature map to compare (repeatable): " + maps);
  sub->add_option("--model", a->o.models, "A converted model directory (or embedded name): its linear-attention layers (repeatable; LABEL=DIR names it)")
      ->transform(labelled_model_dir_arg());
  sub->add_option("--eval", a->o.evals,
                  "What `mimic eval --json` printed of a model (--task lm, copy, passkey, cls or mqar), shown in the report's Quality section "
                  "(repeatable; LABEL=FILE: one row per label, so a model's --model label joins its numbers)")
      ->check(labelled_input_file_arg("the file eval --json wrote"));
  sub->add_option("--out", a->o.out, "Output directory")->required()->check(out_dir_arg());
  sub->add_option("--samples", a->o.samples, "Report the last N samples of the record (0: the last 10%, what distill holds out)")
      ->capture_default_str()
      ->transform(range::count(0));
  sub->add_option("--layers", a->o.layers, "Layers: all (recorded), or a list like 0,2,4-5")->capture_default_str()->transform(range::index_list());
  sub->add_option("--heads", a->o.heads, "Heads: all, or a list like 0-3")->capture_default_str()->transform(range::index_list());
  auto* mass_k = sub->add_option("--mass-k", a->o.top_k, "k of the top-k mass (the weight on each query's k largest)")
                     ->capture_default_str()
                     ->transform(range::tokens(1));
  retire_spelling(*sub, sub->add_option("--top-k", a->o.top_k)->transform(range::tokens(1)), mass_k);
  sub->add_option("--local-window", a->o.local_window,
                  "W of the local mass: the weight on keys within W positions (a hybrid kernel's window share)")
      ->capture_default_str()
      ->transform(range::integer(1, 65536));
  sub->add_option("--plot-sample", a->o.plot_sample, "Record index of the sample drawn (default: the first reported)")->transform(range::integer(0, range::kMaxCount));
  sub->add_option("--plot-layers", a->o.plot_layers, "Layers drawn (default: first, middle and last)")->transform(range::index_list());
  sub->add_option("--plot-heads", a->o.plot_heads, "Heads drawn in the heatmaps (default: the first 4; the first one also in the monotonicity plot)")->transform(range::index_list());
  sub->add_option("--plot-tokens", a->o.plot_tokens, "Heatmaps show the first N queries and keys")->capture_default_str()->transform(range::tokens(2));
  add_common_options(*sub, a->common);
  sub->callback([a, sub]() {
    for (const char* name : {"--mass-k", "--top-k", "--plot-tokens", "--local-window"})
      if (sub->get_option(name)->count() > 0) a->given.insert(std::string(name) == "--top-k" ? "--mass-k" : name);
    run(*a);
  });
}

}  // namespace mimic::cli
