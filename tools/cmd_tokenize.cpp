// mimic tokenize --model DIR (--text S | --file F) — token ids as the model's tokenizer produces them.
#include <iostream>

#include "cli.h"
#include "mimic/models/tokenizer.h"

namespace mimic::cli {
namespace {

struct TokenizeArgs {
  Common common;
  std::string model;
  std::optional<std::string> text, file;
  bool no_special = false, tokens = false;
};

void run(TokenizeArgs& a) {
  start(a.common);
  auto input = read_text_input(a.text, a.file);
  auto tok = models::load_tokenizer(a.model);
  auto ids = tok->encode(input, !a.no_special);
  if (a.common.json) {
    nlohmann::json j = {{"ids", ids}};
    if (a.tokens) {
      nlohmann::json pieces = nlohmann::json::array();
      for (auto id : ids) pieces.push_back(tok->id_to_token(id));
      j["tokens"] = pieces;
    }
    return print_json(j);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    std::cout << (i ? " " : "") << ids[i];
    if (a.tokens) std::cout << ":" << tok->id_to_token(ids[i]);
  }
  std::cout << "\n";
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* sub = app.add_subcommand("tokenize", "Token ids of a text with a model's tokenizer");
  sub->add_option("--model", args->model, "Model directory, or 'gpt2' / 'bert-base-uncased' (fetched tokenizer files)")->required()->transform(model_dir_arg());
  sub->add_option("--text", args->text, "Text to tokenize");
  sub->add_option("--file", args->file, "File to tokenize")->check(input_file_arg("a text file"));
  sub->add_flag("--no-special", args->no_special, "Do not add the tokenizer's special tokens (BERT's [CLS] ... [SEP], a tokenizer.json's post-processor, e.g. <s>)");
  sub->add_flag("--tokens", args->tokens, "Also print the token strings");
  add_common_options(*sub, args->common);
  sub->callback([args]() { run(*args); });
}

}  // namespace mimic::cli
