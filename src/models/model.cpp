// load_model: config.json + model.safetensors (or a sharded checkpoint) → the network of the config's family
// (models/family.h), checked tensor by tensor.
#include "mimic/models/model.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include <unistd.h>

#include "mimic/attention/attention.h"
#include "mimic/attention/kinds.h"
#include "mimic/core/json_keys.h"
#include "mimic/core/paths.h"
#include "mimic/core/error.h"
#include "mimic/core/runtime.h"
#include "mimic/io/atomic_file.h"
#include "mimic/io/output_lock.h"
#include "mimic/io/safetensors.h"
#include "mimic/io/tensor_store.h"
#include "mimic/models/checkpoint.h"
#include "mimic/models/config.h"
#include "mimic/models/family.h"
#include "mimic/models/networks.h"

namespace mimic::models {

namespace fs = std::filesystem;

namespace {

// The files a saved model takes from the folder it was loaded from, as they are: its tokenizer's, and the generation
// config (its eos_token_id list is where generation stops: a converted Llama 3.1 lost it, the probe of 2026-12-01).
const char* const kTokenizerFiles[] = {"vocab.json", "merges.txt", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json",
                                      "tokenizer.json"};
const char* const kGenerationConfig = "generation_config.json";
const std::vector<std::string>& source_files() {
  static const std::vector<std::string> files = [] {
    std::vector<std::string> v(std::begin(kTokenizerFiles), std::end(kTokenizerFiles));
    v.push_back(kGenerationConfig);
    return v;
  }();
  return files;
}

// The 16-bit storage types' overflow: a float32 weight of magnitude at least `rounds_to_infinity` is stored as
// infinity (round to nearest, ties to even: the midpoint between the largest finite value and the next power, whose
// largest finite neighbour has an odd significand, rounds up). A float16 65519 is stored as 65504, not refused
// (helper-84's probe of 2026-12-06: the limit was the largest value itself), and bfloat16 storage was not checked
// at all (3.4e38 became infinite, and the written model was refused on loading "as if the run had diverged").
struct HalfRange {
  const char* name;
  double largest, rounds_to_infinity;
  const char* instead;
};
const HalfRange kFloat16Range{"float16", 65504.0, 65520.0, "bf16 or f32 (export's and finetune's --dtype bf16)"};
const HalfRange kBFloat16Range{"bfloat16", 3.3895313892515355e38, 3.3961514572424055e38, "f32 (export's and finetune's --dtype f32)"};

// Refuses weights that 16-bit storage would make infinite: every floating tensor under --dtype f16 or bf16
// (`store_as`), else those loaded as float16 or bfloat16, which keep their type; named with the largest magnitude
// where it is still known (a tensor already converted holds infinity in its place).
void refuse_beyond_half(const std::vector<std::pair<std::string, at::Tensor>>& weights, std::optional<io::DType> store_as) {
  for (const auto& [name, t] : weights) {
    if (!t.is_floating_point() || t.numel() == 0) continue;
    const bool to_half = store_as == io::DType::F16 || (!store_as && t.scalar_type() == at::kHalf);
    const bool to_bf16 = store_as == io::DType::BF16 || (!store_as && t.scalar_type() == at::kBFloat16);
    if (!to_half && !to_bf16) continue;
    const HalfRange& range = to_half ? kFloat16Range : kBFloat16Range;
    // (the ends, not abs(): no copy of a large table beside it)
    const double largest = std::max(-t.detach().min().item<double>(), t.detach().max().item<double>());
    // NaN: the load's and the training's checks name it; a tensor of the target type is refused only for an infinity
    const bool own_type = (to_half && t.scalar_type() == at::kHalf) || (to_bf16 && t.scalar_type() == at::kBFloat16);
    if (std::isnan(largest) || largest < (own_type ? std::numeric_limits<double>::infinity() : range.rounds_to_infinity)) continue;
    std::ostringstream magnitude;
    if (!own_type) magnitude << " of magnitude " << largest;
    fail("tensor '", name, "' holds a value", magnitude.str(), " that ", range.name, " storage makes infinite (its largest value is ",
         range.largest, "; from ", range.rounds_to_infinity, " on a value rounds to infinity): store the weights as ", range.instead);
  }
}

class HfModel final : public Model {
 public:
  // A fresh model from config.json content.
  HfModel(const std::string& config_json, const std::string& tokenizer_dir, bool fp16, const std::string& where) : dir_(tokenizer_dir) {
    config_ = parse_config(json_parse(config_json, where), where);
    // A fresh model is allocated from its config alone (a loaded one is bounded by its file), to be trained: its
    // float32 parameters, their gradients and AdamW's two moments (16 bytes a parameter) must fit in this machine's
    // memory, or the allocation dies minutes later instead of a line naming the sizes (the ninth probe: a 2 B model
    // passed a check of the weights alone and grew to 9 GB before it was stopped).
    // (embeddings, then per layer the four attention projections and the MLP's matrices — three when gated: every
    // family's bulk)
    const auto& c = config_;
    const double mlp = c.activation == Activation::Silu ? 3.0 : 2.0;
    const double numbers = static_cast<double>(c.vocab_size + c.max_positions) * c.d_model +
                           static_cast<double>(c.n_layer) * (4.0 * c.d_model * c.d_model + mlp * c.d_model * c.d_ff);
    const double memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
    MIMIC_CHECK(memory <= 0 || 16 * numbers <= memory, where, ": ", c.n_layer, " layers of width ", c.d_model, " make about ",
                static_cast<int64_t>(numbers / 1e6), " M parameters (", static_cast<int64_t>(16 * numbers / (1 << 30)),
                " GiB to train in float32: weights, gradients and AdamW's two moments), more than this machine's ",
                static_cast<int64_t>(memory / (1 << 30)), " GiB of memory");
    build(config_.family->new_head(config_), config_.head == Head::Cls || config_.head == Head::Pretraining);
    layout_.prefix = config_.family->new_prefix;
    layout_.metadata = {{"format", "pt"}};
    if (fp16)
      for (const auto& [key, t] : state_dict()) layout_.dtypes[key] = io::DType::F16;
    net_->eval();
  }

  HfModel(const std::string& dir, const LoadOptions& opt) : dir_(dir) {
    fs::path d(dir);
    // a path that exists but is no folder (a FIFO, a device, a text file) is named as such, not as missing
    MIMIC_CHECK(fs::exists(d), "model directory not found: ", dir);
    MIMIC_CHECK(fs::is_directory(d), dir, ": not a model directory (", fs::is_regular_file(d) ? "a file" : "neither a file nor a folder",
                "): a model is a folder holding config.json + model.safetensors");
    if (!fs::exists(d / "config.json")) {
      // a Hugging Face cache folder (models--OWNER--NAME) keeps the model one level down, in snapshots/REVISION/;
      // refs/main names the revision last downloaded (the folders are commit hashes: their order says nothing)
      std::vector<std::string> snapshots;
      std::error_code ec;
      if (fs::is_directory(d / "snapshots", ec))
        for (fs::directory_iterator it(d / "snapshots", ec), end; !ec && it != end; it.increment(ec))
          if (it->is_directory(ec) && fs::exists(it->path() / "config.json", ec)) snapshots.push_back(it->path().string());
      std::sort(snapshots.begin(), snapshots.end());
      std::string main_ref;
      std::ifstream(d / "refs" / "main") >> main_ref;
      const auto current = std::find(snapshots.begin(), snapshots.end(), (d / "snapshots" / main_ref).string());
      if (!main_ref.empty() && current != snapshots.end()) std::rotate(snapshots.begin(), current, current + 1);
      if (snapshots.empty() && io::TensorStore::has_weights(dir))
        fail(dir, ": no config.json beside its weights, as a save stopped before its end leaves a folder (mimic writes config.json "
                  "last): run the command that wrote it again");
      // a training run's folder before its end (stopped, or still running) holds its checkpoint and log; the model comes
      // when the run finishes. "no config.json" alone left the user to guess (helper-68's probe).
      if (snapshots.empty() && fs::exists(d / "checkpoint.safetensors", ec)) {
        const bool best = fs::exists(d / "best" / "config.json", ec);
        fail(dir, ": a training run's folder with no model yet (its model is written when the run finishes): run the same command again to "
                  "continue it",
             best ? "; its best model so far is " + (d / "best").string() : std::string());
      }
      // a tokenizer's folder (the asset `--model gpt2` names, which tokenize reads) was called a model without its
      // config, in a cache folder the user never named (helper-54's probe of 2026-12-04)
      if (snapshots.empty() && std::any_of(std::begin(kTokenizerFiles), std::end(kTokenizerFiles),
                                           [&](const char* f) { return fs::exists(d / f, ec); })) {
        const bool fetched = fs::path(dir).lexically_normal().parent_path() == fs::path(cache_dir() + "/assets").lexically_normal();
        fail(dir, ": a tokenizer without a model (no config.json, no weights)",
             fetched ? ", the one mimic fetched as " + fs::path(dir).filename().string() + ", which only tokenize reads" : "",
             ": give a model directory (config.json + model.safetensors) or an embedded model (", embedded_model_list(), ")");
      }
      fail(dir, ": no config.json (a model directory holds config.json + model.safetensors)",
           snapshots.empty() ? std::string()
                             : "; a Hugging Face cache folder: give its snapshot, " + snapshots.front() +
                                   (snapshots.size() > 1 ? " (or one of " + std::to_string(snapshots.size() - 1) + " more)" : ""));
    }
    config_ = load_config((d / "config.json").string());
    MIMIC_CHECK(io::TensorStore::has_weights(dir), dir, ": no model.safetensors (nor model.safetensors.index.json)",
                fs::exists(d / "pytorch_model.bin") ? " (pytorch_model.bin is a pickle, which mimic does not read: convert it to safetensors)" : "");
    auto f = io::TensorStore::open_dir(dir);
    LoadRules rules;
    const Family& family = *config_.family;
    check_config_against_weights(family, config_, f, (d / "config.json").string());
    const ClassifierHead& classifier = family.classifier;
    if (opt.head == "cls") {
      MIMIC_CHECK(!classifier.architecture.empty(), dir, ": sequence classification needs a BERT model");
      MIMIC_CHECK(opt.labels.size() >= 2, "sequence classification needs at least two labels");
      const int64_t k = static_cast<int64_t>(opt.labels.size());
      if (f.contains(classifier.weight)) {
        MIMIC_CHECK(f.info(classifier.weight).shape[0] == k, dir, ": its classifier has ", f.info(classifier.weight).shape[0],
                    " labels, the data has ", k);
        // its rows are its own labels, by id: the data's must come in that order (data::align_labels)
        MIMIC_CHECK(config_.labels.empty() || config_.labels == opt.labels, dir, ": its classifier's labels are ",
                    nlohmann::json(config_.labels).dump(), " by id, the data's ", nlohmann::json(opt.labels).dump(),
                    ": map the data through the model's label2id (data::align_labels)");
      }
      config_.labels = opt.labels;
      config_.num_labels = k;
      config_.head = Head::Cls;
      auto& raw = config_.raw;
      raw["architectures"] = {classifier.architecture};
      raw["num_labels"] = k;
      raw["id2label"] = nlohmann::json::object();
      raw["label2id"] = nlohmann::json::object();
      for (int64_t i = 0; i < k; ++i) {
        raw["id2label"][std::to_string(i)] = opt.labels[i];
        raw["label2id"][opt.labels[i]] = i;
      }
      if (opt.classifier_seq_len > 0) {
        config_.classifier_seq_len = opt.classifier_seq_len;
        raw[kClassifierSeqLenKey] = opt.classifier_seq_len;
      }
      rules.may_be_missing = classifier.new_tensors;
      rules.ignored = classifier.dropped;
      torch::manual_seed(opt.seed);
      build(Head::Cls, true);
    } else {
      MIMIC_CHECK(opt.head.empty(), "unknown head '", opt.head, "'");
      build(family.checkpoint_head(config_, f), family.checkpoint_pooler(f));
    }
    const bool converted = fs::exists(d / kConvertedFile);
    if (converted) {
      build_kernels((d / kConvertedFile).string());
      rules.ignored.push_back(kKernelPrefix);
    } else {
      for (const auto& n : f.names())
        MIMIC_CHECK(n.rfind(kKernelPrefix, 0) != 0, f.file_of(n), ": tensor '", n, "' belongs to a converted model, but ", dir, " has no ",
                    kConvertedFile, " describing its attention");
    }
    load_weights(family, f, parameters(), ties_, layout_, passthrough_, rules);
    if (converted) load_kernels(f);
    if (opt.head == "cls") {
      // the new tensors are saved in the checkpoint's float storage type
      const std::string reference = layout_.prefix + classifier.storage_reference;
      io::DType storage = layout_.dtypes.count(reference) ? layout_.dtypes.at(reference) : io::DType::F32;
      for (const auto& [key, t] : state_dict())
        if (!layout_.dtypes.count(key)) layout_.dtypes[key] = storage;
      auto dropped = [&](auto& p) {
        for (const auto& d : classifier.dropped)
          if (p.first.rfind(d, 0) == 0) return true;
        return false;
      };
      passthrough_.erase(std::remove_if(passthrough_.begin(), passthrough_.end(), dropped), passthrough_.end());
    }
    if (!opt.device.is_cpu()) net_->to(opt.device);
    net_->eval();
  }

  ModelSummary summary() const override {
    ModelSummary s;
    s.family = config_.family;
    s.model_type = config_.family->model_type;
    s.head = head_ == Head::Pretraining ? "mlm" : head_name(head_);
    s.n_layer = config_.n_layer;
    s.n_head = config_.n_head;
    s.d_model = config_.d_model;
    s.d_ff = config_.d_ff;
    s.n_kv_head = config_.kv_heads();
    s.head_dim = config_.head_dim();
    s.vocab_size = config_.vocab_size;
    s.max_positions = config_.max_positions;
    s.context_note = config_.context_note;
    if (config_.rope_theta > 0) {  // what was read of rope_theta / rope_scaling / rope_parameters, for `info` to show
      std::ostringstream r;
      const double theta = config_.rope_theta;  // 500000, not 5e+05
      if (theta == std::floor(theta) && theta < 1e15) r << "theta " << static_cast<int64_t>(theta); else r << "theta " << theta;
      if (!config_.rope_scaling.empty()) r << ", " << config_.rope_scaling << " scaling: factor " << config_.rope_factor;
      if (config_.rope_scaling == "llama3")
        r << ", low_freq_factor " << config_.rope_low_freq_factor << ", high_freq_factor " << config_.rope_high_freq_factor
          << ", original context " << config_.rope_original_positions;
      s.rotary = r.str();
    }
    s.qkv_bias = config_.qkv_bias;
    if (head_ == Head::Cls) s.num_labels = config_.num_labels, s.labels = config_.labels, s.classifier_seq_len = config_.classifier_seq_len;
    for (const auto& p : net_->parameters()) s.parameters += p.numel();
    return s;
  }

  ForwardOutputs forward(const ForwardInputs& in) override { return net_->forward(in); }

  std::vector<std::pair<std::string, at::Tensor>> state_dict() const override { return tensors(/*as_loaded=*/true); }
  // as_loaded = false: the values in memory (a save into one dtype converts them once, not twice).
  std::vector<std::pair<std::string, at::Tensor>> tensors(bool as_loaded) const {
    auto out = weights_to_save(*config_.family, parameters(), ties_, layout_, passthrough_, as_loaded);
    for (auto& kv : kernel_tensors()) out.push_back(std::move(kv));
    return out;
  }

  torch::nn::Module& module() override { return *net_; }
  at::Tensor lm_head_weight() override { return net_->lm_head_weight(); }

  using Model::save;
  void save(const std::string& dir, const SaveOptions& options) const override {
    // What `dir` held when the save began — nothing where the save makes it — and only those files are stale and
    // removed below. A file that appears while the model is written (copied into a training run's staging folder
    // meanwhile) is another writer's, and was removed as stale (the nineteenth probe of 2026-11-30; listed after the
    // lock had made the folder, the twentieth).
    std::set<std::string> before;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file(ec) && !e.is_symlink(ec)) before.insert(e.path().filename().string());
    const auto lock = io::lock_output_dir(dir);
    // A name a model's file takes holding something else (a folder made as config.json, a dangling link) was found
    // only after the weights had been written, leaving half a model (the tenth probe of 2026-11-29): checked first.
    refuse_odd_model_file_names(dir);
    // The weights as they will be stored, checked before any file changes: a value beyond float16's range became
    // infinite, and the written model was refused on loading as diverged (helper-54's probe of 2026-12-04).
    const auto weights = tensors(!options.dtype);
    refuse_beyond_half(weights, options.dtype);
    // config.json is what makes a folder a model (the load's first read), so it is removed before anything else is
    // replaced and written last: a save stopped halfway leaves no config.json, and the folder is refused, where a
    // convert killed over an earlier result left the new weights beside the old mimic.json, and the folder loaded as
    // the old kind (helper-50's probe of 2026-12-04).
    const fs::path config_path = fs::path(dir) / "config.json";
    if (before.count("config.json")) fs::remove(config_path);  // made durable by the weights' folder fsync
    io::SaveOptions opt;
    opt.metadata = layout_.metadata;
    opt.metadata[kWrittenByKey] = "mimic";
    auto config = config_.raw;
    if (options.dtype) {
      const auto t = *options.dtype;
      MIMIC_CHECK(t == io::DType::F32 || t == io::DType::F16 || t == io::DType::BF16, "weights can be saved as F32, F16 or BF16, not ",
                  io::dtype_name(t));
      opt.convert_floats = true;
      opt.store_as = t;
      config["torch_dtype"] = t == io::DType::F32 ? "float32" : t == io::DType::F16 ? "float16" : "bfloat16";
    }
    std::vector<std::string> written;
    if (options.shards.empty()) {
      io::save_safetensors((fs::path(dir) / io::kWeightsFile).string(), weights, opt);
      written = {io::kWeightsFile};
    } else {
      written = io::save_sharded(dir, weights, options.shards, opt);
      written.push_back(io::kIndexFile);
    }
    io::remove_stale_weights(dir, written, &before);
    const fs::path desc = fs::path(dir) / kConvertedFile;
    if (is_converted()) {
      nlohmann::json j = {{"format", kConvertedFormat}, {"summary", attention_summary(*this)}, {"attention", attention_layers(*this)}};
      if (!provenance_.empty()) j["provenance"] = provenance_;
      io::write_text_atomically(desc.string(), j.dump(2) + "\n");
    } else if (before.count(kConvertedFile)) {
      fs::remove(desc);
    }
    // The tokenizer is the source's, and only the source's: a tokenizer file another model left in `dir` (a GPT-2's
    // vocab.json beside a BERT) would be read as this model's (docs/reliability.md, "One run's result per folder"). A
    // model with no tokenizer (pretrain on a recall task) leaves none: a converted model's tokenizer.json in a fresh
    // run's last/ was read as the new model's (the tenth probe of 2026-11-29).
    if (dir_.empty() || (fs::is_directory(dir_) && !fs::equivalent(fs::path(dir), fs::path(dir_))))
      for (const std::string& name : source_files()) {
        const fs::path src = dir_.empty() ? fs::path() : fs::path(dir_) / name, dst = fs::path(dir) / name;
        if (!src.empty() && fs::exists(src)) io::copy_file_atomically(src.string(), dst.string());
        else if (before.count(name)) fs::remove(dst);
      }
    io::write_text_atomically(config_path.string(), config.dump(2) + "\n");
  }

  // A kernel is made on the CPU (a seed gives the same maps anywhere) and computes where the model does.
  void set_attention_kernel(int64_t layer, attention::AttentionKernel kernel) override {
    if (kernel) {
      const auto device = device_of(*this);
      if (!device.is_cpu()) kernel->to(device);
      kernel->fit_context(config_.max_positions);
    }
    net_->set_kernel(layer, kernel);
  }
  attention::AttentionKernel attention_kernel(int64_t layer) const override { return net_->kernel(layer); }
  void set_attention_capture(int64_t layer, attention::AttentionCapture* capture) override { net_->set_capture(layer, capture); }
  nlohmann::json& provenance() override { return provenance_; }
  const nlohmann::json& provenance() const override { return provenance_; }

 protected:
  at::Tensor forward_cached(const at::Tensor& ids, DecodeState& state) override {
    MIMIC_CHECK(config_.family->causal, "incremental decoding needs a causal LM (", causal_family_names(), "); this is a ", config_.family->display_name, " model");
    return net_->forward_cached(ids, state);
  }

 private:
  bool is_converted() const {
    for (int64_t l = 0; l < config_.n_layer; ++l)
      if (net_->kernel(l)->kind() != "softmax") return true;
    return false;
  }

  // Reads mimic.json and installs the kernels it describes.
  void build_kernels(const std::string& path) {
    const nlohmann::json j = json_parse(io::read_text_file(path), path);
    MIMIC_CHECK(j.is_object() && j.contains("format") && j["format"] == kConvertedFormat, path,
                ": not a mimic converted-model description (format ", kConvertedFormat, " expected)");
    MIMIC_CHECK(j.contains("attention") && j["attention"].is_array(), path, ": no \"attention\" list");
    const auto& layers = j["attention"];
    MIMIC_CHECK(static_cast<int64_t>(layers.size()) == config_.n_layer, path, ": describes ", layers.size(), " layers, the model has ",
                config_.n_layer);
    for (int64_t l = 0; l < config_.n_layer; ++l) {
      const auto& e = layers[static_cast<size_t>(l)];
      MIMIC_CHECK(e.is_object() && e.contains("kind") && e["kind"].is_string(), path, ": attention entry ", l, " has no \"kind\"");
      MIMIC_CHECK(!e.contains("layer") || e["layer"] == l, path, ": attention entry ", l, " is for layer ", e["layer"].dump(), ", not ", l);
      try {
        const auto& options = e.contains("options") ? e["options"] : nlohmann::json::object();
        // installed as every kernel is (set_attention_kernel: its device, the model's context), so the two cannot drift
        set_attention_kernel(l, attention::make_attention_kernel(e["kind"].get<std::string>(), options, config_.n_head, config_.head_dim()));
      } catch (const Error& err) {
        fail(path, ": layer ", l, ": ", err.what());
      }
    }
    provenance_ = j.contains("provenance") ? j["provenance"] : nlohmann::json::object();
  }

  // Copies mimic.attention.<layer>.<name> into the kernels; every expected tensor must be there with its shape,
  // and no other mimic.* tensor may be.
  void load_kernels(const io::TensorStore& f) {
    torch::NoGradGuard no_grad;
    std::set<std::string> used;
    for (auto& [key, dst] : kernel_tensor_refs()) {
      MIMIC_CHECK(f.contains(key), f.path(), ": missing tensor '", key, "' (mimic.json describes a kernel that has it)");
      const auto& info = f.info(key);
      MIMIC_CHECK(info.shape == dst.sizes().vec(), f.file_of(key), ": tensor '", key, "' has shape ", c10::IntArrayRef(info.shape),
                  ", expected ", dst.sizes());
      dst.copy_(f.load(key, dst.scalar_type()));
      used.insert(key);
    }
    for (const auto& n : f.names())
      MIMIC_CHECK(n.rfind(kKernelPrefix, 0) != 0 || used.count(n), f.file_of(n), ": unexpected tensor '", n,
                  "' (not part of the kernels mimic.json describes)");
  }

  // The kernels' parameters and buffers under their file keys (live tensors).
  std::vector<std::pair<std::string, at::Tensor>> kernel_tensor_refs() const {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (int64_t l = 0; l < config_.n_layer; ++l) {
      auto k = net_->kernel(l);
      if (attention::is_reference(*k)) continue;  // no tensors of its own
      const std::string prefix = kKernelPrefix + std::to_string(l) + ".";
      for (const auto& p : k->named_parameters()) out.emplace_back(prefix + p.key(), p.value());
      for (const auto& b : k->named_buffers()) out.emplace_back(prefix + b.key(), b.value());
    }
    return out;
  }

  std::vector<std::pair<std::string, at::Tensor>> kernel_tensors() const {
    auto out = kernel_tensor_refs();
    for (auto& kv : out) kv.second = kv.second.detach().to(at::kFloat);
    return out;
  }

  void build(Head head, bool pooler) {
    head_ = head;
    net_ = config_.family->make_network(config_, head_, pooler);
    ties_ = config_.family->ties(config_, head_);
  }

  // The network's own parameters (kernels excluded: they are saved by the conversion stage).
  std::vector<std::pair<std::string, at::Tensor>> parameters() const {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& p : net_->named_parameters())
      if (p.key().rfind("kernels.", 0) != 0) out.emplace_back(p.key(), p.value());
    return out;
  }

  std::string dir_;
  ModelConfig config_;
  Head head_ = Head::None;
  std::shared_ptr<NetworkImpl> net_;
  Ties ties_;
  KeyLayout layout_;
  Passthrough passthrough_;
  nlohmann::json provenance_ = nlohmann::json::object();
};

}  // namespace

DecodeState::DecodeState() = default;
DecodeState::~DecodeState() = default;
DecodeState::DecodeState(DecodeState&&) noexcept = default;
DecodeState& DecodeState::operator=(DecodeState&&) noexcept = default;

int64_t DecodeState::bytes() const {
  int64_t n = 0;
  for (const auto& c : layers) n += c->bytes();
  return n;
}

DecodeState DecodeState::clone() const {
  DecodeState s;
  for (const auto& c : layers) s.layers.push_back(c->clone());
  s.batch = batch;
  s.position_ = position_;
  return s;
}

std::unique_ptr<DecodeState> Model::new_decode_state() {
  auto s = summary();
  MIMIC_CHECK(s.family->causal, "incremental decoding needs a causal LM (", causal_family_names(), "); this is a ", s.model_type, " model");
  auto state = std::make_unique<DecodeState>();
  for (int64_t i = 0; i < s.n_layer; ++i) state->layers.push_back(attention_kernel(i)->new_cache());
  return state;
}

at::Tensor Model::forward_step(const at::Tensor& ids, DecodeState& state) {
  MIMIC_CHECK(ids.dim() == 2 && ids.size(1) >= 1, "forward_step takes token ids [batch, time] with time >= 1");
  MIMIC_CHECK(state.batch == 0 || state.batch == ids.size(0), "the decode state holds a batch of ", state.batch, ", got ", ids.size(0));
  torch::NoGradGuard no_grad;
  auto logits = forward_cached(ids, state);
  state.batch = ids.size(0);
  state.position_ += ids.size(1);
  return logits;
}

bool is_embedding(const std::string& name) {
  for (const Family* f : families())
    if (f->is_embedding(name)) return true;
  return false;
}

io::ShardGroup embeddings_group() { return {"embeddings", is_embedding}; }

bool is_model_file(const std::string& name) {
  if (name == "config.json" || name == kConvertedFile || io::is_weights_file(name)) return true;
  return std::find(source_files().begin(), source_files().end(), name) != source_files().end();
}

void refuse_odd_model_file_names(const std::string& dir, const std::function<bool(const std::string&)>& also) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!is_model_file(name) && !(also && also(name))) continue;
    MIMIC_CHECK(e.is_regular_file(ec), e.path().string(), " is ",
                e.is_directory(ec) ? "a directory" : e.is_symlink(ec) ? "a link to nothing" : "not a regular file",
                ", where the model's file of that name goes: remove it, or choose another folder");
    if (!io::is_weights_file(name)) continue;
    // what another command of mimic's writes, known by its bytes: a record (HDF5) or a safetensors file of a mimic-*
    // format (forward's tensors, maps, a checkpoint); anything else there is taken as an earlier model's file
    std::string what;
    const auto kind = io::file_kind(e.path().string());
    if (kind == io::kHdf5File) what = "an HDF5 file (a record)";
    else if (kind && kind->rfind("mimic-", 0) == 0) what = "a " + *kind + " file";
    MIMIC_CHECK(what.empty(), e.path().string(), " is ", what, " (another command's result), where the model's weights go: what this ",
                "command writes would replace or remove it; move it out of the way, or choose another folder");
  }
}

void remove_model_files(const std::string& dir) {
  if (!fs::is_directory(dir)) return;
  io::remove_stale_weights(dir, {});
  std::vector<std::string> describing = {"config.json", kConvertedFile};
  describing.insert(describing.end(), source_files().begin(), source_files().end());
  for (const auto& name : describing) {
    const fs::path p = fs::path(dir) / name;
    if (fs::is_regular_file(fs::symlink_status(p))) fs::remove(p);
  }
}

std::unique_ptr<Model> create_model(const std::string& config_json, const std::string& tokenizer_dir, bool fp16_storage,
                                    const std::string& where) {
  return std::make_unique<HfModel>(config_json, tokenizer_dir, fp16_storage, where);
}

std::unique_ptr<Model> load_model(const std::string& path, const LoadOptions& options) {
  std::string dir = path;
  if (fs::is_regular_file(path) && (fs::path(path).extension() == ".safetensors" || fs::path(path).filename() == io::kIndexFile))
    dir = fs::path(path).parent_path().string();
  return std::make_unique<HfModel>(dir.empty() ? "." : dir, options);
}

std::unique_ptr<Model> load_model(const std::string& dir, c10::Device device) {
  LoadOptions options;
  options.device = device;
  return load_model(dir, options);
}

at::Tensor token_row(const std::vector<int64_t>& ids, c10::Device device) {
  return torch::tensor(ids, torch::kLong).unsqueeze(0).to(device);
}

c10::Device device_of(Model& model) {
  for (const auto& p : model.module().parameters()) return p.device();
  return c10::Device(c10::kCPU);
}

}  // namespace mimic::models
