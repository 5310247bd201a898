// report.html: one page, no scripts, no network; images beside it, referenced by relative names.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "mimic/report/figures.h"

namespace fs = std::filesystem;

namespace mimic::report {

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

namespace {

std::string esc(const std::string& s) { return html_escape(s); }

std::string num(double v, int digits) {
  if (!std::isfinite(v)) return "&ndash;";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string name(const std::string& path) { return esc(fs::path(path).filename().string()); }

void figure_html(std::ostringstream& h, const Figure& f) {
  if (f.files.empty()) return;
  h << "<figure><h3>" << esc(f.title) << "</h3>\n<a href=\"" << name(f.files[1]) << "\"><img src=\"" << name(f.files[0])
    << "\" alt=\"" << esc(f.title) << "\"></a>\n<figcaption>" << esc(f.caption) << " <a href=\"" << name(f.files[1])
    << "\">SVG</a></figcaption></figure>\n";
}

}  // namespace

std::string render_html(const nlohmann::json& info, const nlohmann::json& result, const Metrics& m, const Figures& figs,
                        const std::string& quality) {
  std::ostringstream h;
  const auto k = std::to_string(m.top_k);
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>mimic report</title>\n<style>\n"
       "body{font-family:'DejaVu Sans',Arial,sans-serif;max-width:1200px;margin:24px auto;padding:0 16px;color:#222;line-height:1.45}\n"
       "table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #ccc;padding:3px 9px;text-align:right}\n"
       "th{background:#f2f2f2}td.l,th.l{text-align:left}tr.teacher td{background:#fafafa}\n"
       "figure{margin:18px 0 30px}img{max-width:100%;border:1px solid #ddd}figcaption{max-width:900px;color:#333}\n"
       "code{background:#f4f4f4;padding:0 3px}\n</style></head><body>\n";
  h << "<h1>Attention fidelity report</h1>\n<p>Teacher: <code>" << esc(info.at("teacher").get<std::string>())
    << "</code>, record <code>" << esc(info.at("record").get<std::string>()) << "</code> (" << (info.at("causal").get<bool>() ? "causal" : "bidirectional")
    << ", " << info.at("seq_len").get<int64_t>() << " tokens per sample, " << info.at("n_head").get<int64_t>() << " heads of "
    << info.at("head_dim").get<int64_t>() << "). Samples " << result.at("samples").front().get<int64_t>() << "&ndash;"
    << result.at("samples").back().get<int64_t>() << " (" << result.at("samples").size() << "), layers "
    << esc(result.at("layers").dump()) << ", heads " << esc(result.at("heads").dump())
    << ". Every student computes its weights from the teacher's own q and k (teacher-forced), so the differences below are the "
       "attention maps' alone.</p>\n";
  if (!quality.empty())
    h << quality;
  else
    h << "<h2>Quality</h2>\n<p>No quality results given: <code>mimic report --eval LABEL=FILE</code> (repeatable) shows beside "
         "these metrics what <code>mimic eval --json</code> measured of each model &mdash; perplexity, copy gain, passkey "
         "(docs/report.md).</p>\n";
  h << "<h2>Sources</h2>\n<table><tr><th class=l>name</th><th class=l>kind</th><th class=l>file</th></tr>\n";
  for (const auto& s : result.at("sources"))
    h << "<tr><td class=l>" << esc(s.at("name").get<std::string>()) << "</td><td class=l>" << esc(s.at("kind").get<std::string>())
      << "</td><td class=l>" << (s.at("path").get<std::string>().empty() ? std::string("&ndash;") : "<code>" + esc(s.at("path").get<std::string>()) + "</code>")
      << "</td></tr>\n";
  h << "</table>\n";

  h << "<h2>Metrics</h2>\n<p>Per query row, over the keys it sees, then averaged over rows, samples and heads. <b>entropy</b>: "
       "&minus;&Sigma;<sub>j</sub> w<sub>ij</sub> log w<sub>ij</sub> (nats; lower = spikier; uniform weights give "
    << num(m.uniform_entropy, 3)
    << " here); <b>KL</b>(softmax&nbsp;&Vert;&nbsp;source) = CE &minus; the teacher's entropy (0 = identical weights); <b>CE</b>: "
       "&minus;&Sigma;<sub>j</sub> a<sub>ij</sub> log w<sub>ij</sub>, the distillation loss; <b>Spearman</b>: rank correlation of "
       "q&middot;k and the weights along the row (1 = monotone); <b>top-"
    << k << " mass</b>: the weight of the row's " << k << " largest entries; <b>induction</b>: the weight on the positions right after "
       "earlier occurrences of the query's token (rows that have one; 1 = a perfect induction head); <b>prev</b>: the weight on the "
       "previous token. Files: <a href=\"metrics.csv\">metrics.csv</a> (every head), "
    << "<a href=\"metrics.json\">metrics.json</a>.</p>\n";
  auto header = [&](const char* first) {
    h << "<table><tr><th class=l>" << first << "</th><th class=l>source</th><th>entropy</th><th>KL</th><th>CE</th><th>Spearman</th><th>top-"
      << k << " mass</th><th>induction</th><th>prev</th></tr>\n";
  };
  auto row = [&](const std::string& label, size_t s, const HeadValues& v) {
    h << "<tr" << (s == 0 ? " class=teacher" : "") << "><td class=l>" << label << "</td><td class=l>" << esc(m.sources[s]) << "</td><td>"
      << num(v.entropy, 3) << "</td><td>" << num(v.kl, 4) << "</td><td>" << num(v.ce, 3) << "</td><td>" << num(v.spearman, 3)
      << "</td><td>" << num(v.top_k, 3) << "</td><td>" << num(v.induction, 3) << "</td><td>" << num(v.previous_token, 3)
      << "</td></tr>\n";
  };
  h << "<h3>Mean over layers</h3>\n";
  header("layers");
  for (size_t s = 0; s < m.sources.size(); ++s) {
    std::vector<HeadValues> present;
    for (size_t l = 0; l < m.layers.size(); ++l) {
      const auto& v = m.mean(s, l);
      if (std::isfinite(v.entropy) || std::isfinite(v.spearman)) present.push_back(v);  // else absent
    }
    row(present.size() == m.layers.size() ? "all" : "those present", s, mean_where_defined(present));
  }
  h << "</table>\n<p>Per layer: <a href=\"#per-layer\">the table below the figures</a>.</p>\n";

  h << "<h2>Figures</h2>\n<p>Click a figure for its SVG.</p>\n";
  figure_html(h, figs.entropy);
  figure_html(h, figs.kl_grid);
  figure_html(h, figs.induction_grid);
  for (const auto& f : figs.heatmaps) figure_html(h, f);
  figure_html(h, figs.monotonicity);

  h << "<h2 id=\"per-layer\">Per layer (mean over heads)</h2>\n";
  header("layer");
  for (size_t l = 0; l < m.layers.size(); ++l)
    for (size_t s = 0; s < m.sources.size(); ++s) row(std::to_string(m.layers[l]), s, m.mean(s, l));
  h << "</table>\n";
  h << "<p>Made by <code>mimic report</code> in " << num(result.at("seconds").get<double>(), 1)
    << " s. See docs/report.md for the definitions.</p>\n</body></html>\n";
  return h.str();
}

}  // namespace mimic::report
