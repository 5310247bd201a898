// mimic export --model DIR --out DIR2 [--dtype f32|f16|bf16|keep] [--shard-embeddings] — write a model directory
// again (config, tokenizer files, weights) in another storage type and/or as a sharded checkpoint.
#include <filesystem>
#include <iostream>
#include <map>

#include "cli.h"
#include "mimic/core/error.h"
#include "mimic/io/output_lock.h"
#include "mimic/io/tensor_store.h"
#include "mimic/models/model.h"
#include "mimic/models/tokenizer.h"

namespace mimic::cli {
namespace {

namespace fs = std::filesystem;

struct ExportArgs {
  Common common;
  std::string model, out, dtype;
  bool shard_embeddings = false;
};

void run(ExportArgs& a) {
  start(a.common);
  refuse_out_over_inputs(a.out, {{"--model", a.model}});
  // the folder locked before it is checked and held to the end: checked first and locked at the write, a report and an
  // export started together both passed the check and both wrote (the tenth probe)
  const auto lock = io::lock_output_dir(a.out);
  refuse_foreign_output(a.out, OutputKind::Model);
  auto model = models::load_model(a.model);
  // the export carries the folder's tokenizer files as they are: one it cannot read is said before the copy is found
  // without one by generate (helper-54's probe of 2026-12-04); a model trained on a recall task has none by design
  note_unreadable_tokenizer(a.model, "the export");
  models::SaveOptions so;
  so.dtype = storage_dtype_arg(a.dtype);
  if (a.shard_embeddings) so.shards = {models::embeddings_group()};
  model->save(a.out, so);

  // Read the result back: it is checked like any model directory, and described from what is on disk.
  auto store = io::TensorStore::open_dir(a.out);
  models::load_model(a.out);
  nlohmann::json files = nlohmann::json::array();
  uintmax_t bytes = 0;
  std::map<std::string, int64_t> per_dtype;
  for (const auto& f : store.files()) {
    int64_t n = 0;
    for (const auto& t : store.tensors())
      if (store.file_of(t.name) == f) ++n;
    files.push_back({{"file", fs::path(f).filename().string()}, {"tensors", n}, {"bytes", fs::file_size(f)}});
    bytes += fs::file_size(f);
  }
  for (const auto& t : store.tensors()) per_dtype[io::dtype_name(t.dtype)] += t.numel();
  nlohmann::json j = {{"model", a.model},  {"out", a.out},       {"sharded", store.sharded()},
                      {"files", files},    {"bytes", bytes},     {"elements_by_dtype", per_dtype},
                      {"tensors", store.names().size()}};
  if (a.common.json) return print_json(j);
  // the elements by storage type in words ("12417216 F16 elements"), not a JSON object after the bytes, where its
  // number read as bytes (helper-68's probe)
  std::string elements;
  for (const auto& [dtype, n] : per_dtype) elements += (elements.empty() ? "" : ", ") + std::to_string(n) + " " + dtype + " elements";
  std::cout << "exported " << a.model << " to " << a.out << ": " << store.names().size() << " tensors, " << bytes << " bytes (" << elements
            << ")\n";
  for (const auto& f : files)
    std::cout << "  " << f["file"].get<std::string>() << "  " << f["tensors"] << " tensors, " << f["bytes"] << " bytes\n";
  if (store.sharded()) std::cout << "  " << io::kIndexFile << "\n";
}

}  // namespace

void register_export(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* sub = app.add_subcommand("export", "Write a model directory again, in another storage type and/or sharded");
  sub->add_option("--model", a->model, "Model directory")->required()->transform(model_dir_arg());
  sub->add_option("--out", a->out, "Output directory")->required()->check(out_dir_arg());
  sub->add_option("--dtype", a->dtype, "Store floating tensors as f32, f16, bf16, or keep (each as loaded, the default)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "keep"}));
  sub->add_flag("--shard-embeddings", a->shard_embeddings,
                "Sharded checkpoint: the embeddings in model-00001-of-00002.safetensors, the rest in the second shard, "
                "plus model.safetensors.index.json");
  add_common_options(*sub, a->common);
  sub->callback([a]() { run(*a); });
}

}  // namespace mimic::cli
