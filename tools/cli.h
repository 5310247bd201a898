// Shared pieces of the `mimic` command line: common options and the subcommand registry.
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace mimic::io {
enum class DType;
}

namespace mimic::cli {

// Options every subcommand takes.
struct Common {
  int threads = 0;      // 0 = all cores
  uint64_t seed = 0;
  bool json = false;    // machine-readable result on stdout
};

// Adds --threads, --seed, --json to a subcommand.
void add_common_options(CLI::App& sub, Common& common);

// Applies the common options (threads, malloc tuning, seed). Every subcommand calls it first.
void start(const Common& common);

// Prints a JSON result on stdout (one document, pretty-printed).
void print_json(const nlohmann::json& j);

// Reads --text or --file into a string; exactly one must be given (an empty --text counts as given).
std::string read_text_input(const std::optional<std::string>& text, const std::optional<std::string>& file);

// THE resolver of model arguments (--model, --teacher, --init of every command): a directory, a family's
// fetched tokenizer asset (models::Family::tokenizer_asset: "gpt2", "bert-base-uncased"), or an embedded
// model's name (gpt2-mini, bert-mini, bert-mini-spam, bert-mini-sotu-era); anything else is a mimic::Error.
std::string resolve_model_dir(const std::string& arg);
// resolve_model_dir as a CLI11 transform: every model option takes ->transform(model_dir_arg()), which
// replaces the argument by its directory or fails parsing with resolve_model_dir's message.
CLI::Validator model_dir_arg();

// A --dtype value for saved weights: "f32", "f16" or "bf16"; "" or "keep" → unset (each tensor as loaded).
std::optional<io::DType> storage_dtype_arg(const std::string& name);

// One subcommand: `setup` adds it to the app and binds its callback.
using Register = void (*)(CLI::App& app);

void register_info(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_forward(CLI::App& app);
void register_eval(CLI::App& app);
void register_pretrain(CLI::App& app);
void register_finetune(CLI::App& app);
void register_export(CLI::App& app);
void register_bench(CLI::App& app);
void register_record(CLI::App& app);
void register_distill(CLI::App& app);
void register_convert(CLI::App& app);
void register_generate(CLI::App& app);
void register_report(CLI::App& app);

}  // namespace mimic::cli
