// mimic info PATH | --system | --feature-maps — describe a model directory or a safetensors file, or the system.
#include <filesystem>
#include <iostream>
#include <map>

#include "mimic/attention/feature_map.h"
#include "mimic/attention/kinds.h"
#include "cli.h"
#include "mimic/core/error.h"
#include "mimic/core/runtime.h"
#include "mimic/io/safetensors.h"
#include "mimic/io/tensor_store.h"
#include "mimic/core/paths.h"
#include "mimic/models/model.h"
#include "mimic/models/tokenizer.h"

namespace mimic::cli {
namespace {

struct InfoArgs {
  Common common;
  std::string path;
  bool system = false;
  bool maps = false;
  bool tensors = false;
};

nlohmann::json describe_tensors(const io::TensorStore& f) {
  nlohmann::json list = nlohmann::json::array();
  std::map<std::string, int64_t> per_dtype;
  int64_t total = 0;
  const auto tensors = f.tensors();
  for (const auto& t : tensors) {
    list.push_back({{"name", t.name}, {"dtype", io::dtype_name(t.dtype)}, {"shape", t.shape}});
    if (f.sharded()) list.back()["shard"] = std::filesystem::path(f.file_of(t.name)).filename().string();
    per_dtype[io::dtype_name(t.dtype)] += t.numel();
    total += t.numel();
  }
  return {{"file", f.path()}, {"count", tensors.size()}, {"elements", total}, {"elements_by_dtype", per_dtype},
          {"metadata", f.metadata()}, {"tensors", list}};
}

void run(InfoArgs& a) {
  start(a.common);
  if (a.maps) {  // the registries: feature maps and attention kinds
    // both registries in --json too (it held the feature maps alone, where the text lists the kinds: helper-54's probe)
    nlohmann::json maps = nlohmann::json::array(), kinds = nlohmann::json::array();
    for (const auto& m : attention::feature_maps()) maps.push_back({{"name", m.name}, {"summary", m.summary}});
    for (const auto& k : attention::attention_kinds())
      kinds.push_back({{"name", k.name}, {"role", k.role == attention::KindRole::Reference ? "reference" : "distillable"}, {"summary", k.summary},
                       {"options", k.options}});
    if (a.common.json) return print_json({{"feature_maps", maps}, {"attention_kinds", kinds}});
    // the text prints what the JSON holds, so the two cannot disagree
    auto column = [](const std::string& name) { return "  " + name + std::string(18 - std::min<size_t>(17, name.size()), ' '); };
    for (const auto& m : maps) std::cout << column(m["name"].get<std::string>()) << m["summary"].get<std::string>() << "\n";
    std::cout << "attention kinds:\n";
    for (const auto& k : kinds)
      std::cout << column(k["name"].get<std::string>()) << "[" << k["role"].get<std::string>() << "] " << k["summary"].get<std::string>()
                << (k["options"].get<std::string>().empty() ? std::string(" (no options)") : " (options: " + k["options"].get<std::string>() + ")") << "\n";
    return;
  }
  if (a.system) {
    auto s = system_info();
    nlohmann::json j = {{"mimic_version", s.mimic_version}, {"torch_version", s.torch_version}, {"threads", s.threads},
                        {"cores", s.cores},
                        {"blas", s.blas},
                        {"openmp", s.openmp},
                        {"parallel_info", s.parallel_info},
                        {"cpu_allocator", s.cpu_allocator}};
    if (a.common.json) return print_json(j);
    std::cout << "mimic        " << s.mimic_version << "\nlibtorch     " << s.torch_version << "\nthreads      " << s.threads
              << " (cores: " << s.cores << ")\nallocator    " << s.cpu_allocator
              << " (MIMIC_CPU_ALLOCATOR chooses)\nBLAS         " << s.blas << "\nOpenMP       " << s.openmp << "\n\n"
              << s.parallel_info;
    return;
  }
  MIMIC_USAGE_CHECK(!a.path.empty(), "give a model directory or a .safetensors file (or --system)");
  namespace fs = std::filesystem;
  if (!fs::exists(a.path) && is_embedded_model_name(a.path)) a.path = embedded_model_dir(a.path);
  MIMIC_USAGE_CHECK(fs::exists(a.path), "no such file or directory: ", a.path);
  // a FIFO or a device would reach the model loader and be called a missing model (the fifth probe, F15)
  MIMIC_CHECK(fs::is_directory(a.path) || fs::is_regular_file(a.path), a.path,
              ": neither a file nor a folder (give a model directory or a .safetensors file)");
  if (fs::is_regular_file(a.path) && fs::path(a.path).filename() != io::kIndexFile) {
    auto f = io::TensorStore::open_file(a.path);
    auto j = describe_tensors(f);
    if (a.common.json) return print_json(j);
    std::cout << a.path << ": " << j["count"] << " tensors, " << j["elements"] << " elements\n";
    // one line each: a maps file's metrics (every head's numbers, kilobytes) filled screens, and an empty value read as
    // a missing one (helper-59's probe of 2026-12-04); --json gives every value whole
    constexpr size_t kShown = 160;
    for (const auto& [k, v] : f.metadata()) {
      std::cout << "  metadata " << k << " = ";
      if (v.empty()) std::cout << "(empty)";
      else if (v.size() <= kShown) std::cout << v;
      else {
        size_t cut = kShown;
        while (cut > 0 && (static_cast<unsigned char>(v[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
        std::cout << v.substr(0, cut) << "… (" << v.size() << " bytes; --json shows it whole)";
      }
      std::cout << "\n";
    }
    for (const auto& t : j["tensors"]) std::cout << "  " << t["name"].get<std::string>() << "  " << t["dtype"].get<std::string>() << " " << t["shape"].dump() << "\n";
    return;
  }
  auto model = models::load_model(a.path);
  auto s = model->summary();
  const std::string dir = fs::is_directory(a.path) ? a.path : fs::path(a.path).parent_path().string();
  auto f = io::TensorStore::open_dir(dir.empty() ? "." : dir);
  const std::string weights = f.path();
  nlohmann::json j = {{"path", a.path},         {"model_type", s.model_type},    {"head", s.head},
                      {"n_layer", s.n_layer},   {"n_head", s.n_head},            {"d_model", s.d_model},
                      {"d_ff", s.d_ff},         {"vocab_size", s.vocab_size},    {"max_positions", s.max_positions},
                      {"n_kv_head", s.n_kv_head}, {"head_dim", s.head_dim},
                      {"parameters", s.parameters}};
  if (s.head == "cls") j["num_labels"] = s.num_labels;
  if (!s.context_note.empty()) j["context_note"] = s.context_note;
  if (!s.rotary.empty()) j["rotary"] = s.rotary;
  j["attention"] = models::attention_summary(*model);
  j["attention_layers"] = models::attention_layers(*model);
  if (!model->provenance().empty()) j["provenance"] = model->provenance();
  auto tj = describe_tensors(f);
  j["weights"] = {{"file", weights}, {"tensors", tj["count"]}, {"elements_by_dtype", tj["elements_by_dtype"]}};
  if (f.sharded()) j["weights"]["shards"] = f.files();
  if (a.tensors) j["tensors"] = tj["tensors"];
  // the tokenizer the commands that read text will load, or why none (a folder without vocab.json described as
  // complete, and then refused by generate: helper-54's probe of 2026-12-04)
  std::string no_tokenizer;
  // (the folder's: an index file's path names the folder holding it, as the model's loading does)
  const auto tok = models::try_load_tokenizer(dir.empty() ? "." : dir, no_tokenizer);
  if (tok) j["tokenizer"] = {{"kind", tok->kind()}, {"vocab_size", tok->vocab_size()}};
  else j["tokenizer"] = nullptr, j["tokenizer_problem"] = no_tokenizer;
  if (a.common.json) return print_json(j);
  std::cout << a.path << "\n  architecture  " << s.model_type << " (head: " << s.head << ")\n  layers        " << s.n_layer
            << "\n  heads         " << s.n_head << " (head dim " << s.head_dim
            << (s.n_kv_head != s.n_head ? ", " + std::to_string(s.n_kv_head) + " key/value heads" : std::string()) << ")\n  width         "
            << s.d_model << " (ffn " << s.d_ff << ")\n  vocabulary    " << s.vocab_size << "\n  context       " << s.max_positions
            << (s.context_note.empty() ? std::string() : " (" + s.context_note + ")")
            << (s.rotary.empty() ? std::string() : "\n  rotary        " + s.rotary)
            << "\n  parameters    " << s.parameters << "\n  weights       " << weights << " (" << tj["count"] << " tensors, "
            << tj["elements_by_dtype"].dump() << (f.sharded() ? ", " + std::to_string(f.files().size()) + " shards" : "") << ")\n";
  // the shards by name, and each tensor's below, as formats.md says (the JSON alone had them: helper-80's probe)
  if (f.sharded())
    for (const auto& file : f.files()) std::cout << "  shard         " << std::filesystem::path(file).filename().string() << "\n";
  if (s.head == "cls") std::cout << "  labels        " << s.num_labels << "\n";
  std::cout << "  tokenizer     "
            << (tok ? tok->kind() + ", " + std::to_string(tok->vocab_size()) + " tokens" : "none: " + j["tokenizer_problem"].get<std::string>()) << "\n";
  std::cout << "  attention     " << models::attention_summary(*model) << "\n";
  if (a.tensors)
    for (const auto& t : tj["tensors"])
      std::cout << "  " << t["name"].get<std::string>() << "  " << t["dtype"].get<std::string>() << " " << t["shape"].dump()
                << (t.contains("shard") ? "  " + t["shard"].get<std::string>() : std::string()) << "\n";
}

}  // namespace

void register_info(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  auto* sub = app.add_subcommand("info", "Describe a model directory, a .safetensors file, or the system (--system)");
  auto* path = sub->add_option("PATH", args->path, "Model directory or embedded model name (config.json + model.safetensors or a sharded checkpoint's index and shards) or a .safetensors file")->check(path_arg());
  // every other command that reads a model takes --model: so does info (a newcomer typed `info --model gpt2-mini`)
  auto* model = sub->add_option("--model", args->path, "The same as PATH, spelled as every other command spells it")->check(path_arg())->excludes(path);
  // one thing described per call: --system, --feature-maps or a model (--tensors lists its tensors); a second was
  // ignored without a word (the fourth probe of 2026-11-27)
  auto* system = sub->add_flag("--system", args->system, "Threads, BLAS actually loaded, LibTorch version")->excludes(path)->excludes(model);
  auto* registry = sub->add_flag("--feature-maps", args->maps, "The registered feature maps (names for --feature-map) and attention kinds")
                       ->excludes(system)->excludes(path)->excludes(model);
  sub->add_flag("--tensors", args->tensors, "List every tensor of a model directory")->excludes(system)->excludes(registry);
  retire_spelling(*sub, sub->add_flag("--maps", args->maps), registry);  // after every option --feature-maps excludes
  add_common_options(*sub, args->common);
  args->common.ranks = true;  // it computes nothing: it reports what each rank sees (threads, environment)
  sub->callback([args]() { run(*args); });
}

}  // namespace mimic::cli
