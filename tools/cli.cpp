#include "cli.h"

#include <filesystem>
#include <iostream>

#include "mimic/core/error.h"
#include "mimic/core/paths.h"
#include "mimic/core/runtime.h"
#include "mimic/io/atomic_file.h"
#include "mimic/io/safetensors.h"
#include "mimic/models/family.h"
#include "ranges.h"

namespace mimic::cli {

void add_common_options(CLI::App& sub, Common& common) {
  sub.add_option("--threads", common.threads, "Threads for LibTorch (0, the default: all cores)")->check(range::threads());
  sub.add_option("--seed", common.seed, "Random seed")->capture_default_str()->check(range::seed());
  sub.add_flag("--json", common.json, "Print the result as JSON on stdout");
}

void start(const Common& common) {
  init_runtime(common.threads);
  seed_everything(common.seed);
}

void print_json(const nlohmann::json& j) { std::cout << j.dump(2) << std::endl; }

std::string read_text_input(const std::optional<std::string>& text, const std::optional<std::string>& file) {
  MIMIC_CHECK(text.has_value() != file.has_value(), "give exactly one of --text and --file");
  if (file) return io::read_text_file(*file);  // refuses a missing file, a directory or a FIFO in one line
  return *text;
}

std::optional<io::DType> storage_dtype_arg(const std::string& name) {
  if (name.empty() || name == "keep") return std::nullopt;
  if (name == "f32") return io::DType::F32;
  if (name == "f16") return io::DType::F16;
  if (name == "bf16") return io::DType::BF16;
  fail("--dtype must be f32, f16, bf16 or keep, not '", name, "'");
}

std::string resolve_model_dir(const std::string& arg) {
  if (std::filesystem::is_directory(arg)) return arg;
  for (const models::Family* f : models::families())
    if (arg == f->tokenizer_asset) return asset_path(arg);
  if (is_embedded_model_name(arg)) return embedded_model_dir(arg);
  fail("model directory not found: ", arg, " (give a HF-layout directory or an embedded model: gpt2-mini, bert-mini, bert-mini-spam, bert-mini-sotu-era)");
}

CLI::Validator model_dir_arg() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        try {
          s = resolve_model_dir(s);
          return {};
        } catch (const Error& e) {
          return e.what();
        }
      },
      "DIR|NAME");
}

}  // namespace mimic::cli
