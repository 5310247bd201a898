// mimic forward --model DIR (--text S | --file F) --out OUT.safetensors — run a model on one sequence.
#include <torch/torch.h>

#include <iostream>

#include "cli.h"
#include "ranges.h"
#include "mimic/core/error.h"
#include "mimic/core/words.h"
#include "mimic/io/output_lock.h"
#include "mimic/io/safetensors.h"
#include "mimic/models/model.h"
#include "mimic/models/tokenizer.h"

namespace mimic::cli {
namespace {

const char* kForwardFormat = "mimic-forward-1";

struct ForwardArgs {
  Common common;
  std::string model, out;
  std::optional<std::string> text, file;
};

void run(ForwardArgs& a) {
  start(a.common);
  refuse_out_over_inputs(a.out, {{"--model", a.model}, {"--file", a.file.value_or("")}});
  // its own earlier output (older ones carry model_type and head, no format)
  refuse_foreign_file(a.out, "a forward output (mimic forward's tensors)", [](const auto& md) {
    return (md.count("format") && md.at("format") == kForwardFormat) || (!md.count("format") && md.count("model_type") && md.count("head"));
  });
  // held for the run: another command writing the same file (a record being recorded) refuses, and this one refuses it
  const auto lock = io::lock_output_file(a.out);
  auto input = read_text_input(a.text, a.file);
  auto tok = models::load_tokenizer(a.model);
  auto model = models::load_model(a.model);
  auto s = model->summary();
  auto ids = tok->encode(input);
  MIMIC_CHECK(!ids.empty(), "the text gives no tokens");
  MIMIC_CHECK(static_cast<int64_t>(ids.size()) <= s.max_positions, "the text has ", ids.size(), " tokens, more than ",
              models::context_words(s), ": shorten it");
  torch::NoGradGuard no_grad;
  auto input_ids = torch::tensor(ids, torch::kLong).unsqueeze(0);
  auto out = model->forward({input_ids, {}, {}, {}});
  std::vector<std::pair<std::string, at::Tensor>> tensors = {{"input_ids", input_ids},
                                                             {"last_hidden_state", out.last_hidden_state.contiguous()}};
  if (out.logits.defined()) tensors.emplace_back("logits", out.logits.contiguous());
  if (out.pooled.defined()) tensors.emplace_back("pooler_output", out.pooled.contiguous());
  io::SaveOptions opt;
  opt.metadata = {{"format", kForwardFormat}, {"model", a.model}, {"model_type", s.model_type}, {"head", s.head}};
  io::save_safetensors(a.out, tensors, opt);
  nlohmann::json j = {{"out", a.out}, {"tokens", ids.size()}, {"head", s.head}};
  for (const auto& [name, t] : tensors) j["shapes"][name] = t.sizes().vec();
  if (a.common.json) return print_json(j);
  std::cout << "wrote " << a.out << ": " << count_of(static_cast<int64_t>(ids.size()), "token");
  for (const auto& [name, t] : tensors) std::cout << ", " << name << " " << nlohmann::json(t.sizes().vec()).dump();
  std::cout << "\n";
}

}  // namespace

void register_forward(CLI::App& app) {
  auto args = std::make_shared<ForwardArgs>();
  auto* sub = app.add_subcommand("forward", "Run a model on one text; write input_ids, logits and hidden states");
  sub->add_option("--model", args->model, "Model directory")->required()->transform(model_dir_arg());
  sub->add_option("--text", args->text, "Input text")->check(range::non_empty_text("give the text to run, or --file FILE"));
  sub->add_option("--file", args->file, "Input file")->check(input_file_arg("a text file"));
  sub->add_option("--out", args->out, "Output .safetensors file")->required()->check(out_file_arg());
  add_common_options(*sub, args->common);
  sub->callback([args]() { run(*args); });
}

}  // namespace mimic::cli
