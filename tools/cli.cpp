#include "cli.h"

#include <cmath>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <utility>

#include "mimic/core/error.h"
#include "mimic/data/corpus.h"
#include "mimic/core/paths.h"
#include "mimic/core/precision.h"
#include "mimic/core/runtime.h"
#include "mimic/data/batches.h"
#include "mimic/core/json_keys.h"
#include "mimic/core/words.h"
#include "mimic/distill/distill.h"
#include "mimic/distributed/environment.h"
#include "mimic/io/atomic_file.h"
#include "mimic/io/safetensors.h"
#include "mimic/models/model.h"
#include "mimic/models/tokenizer.h"
#include "mimic/report/report.h"
#include "mimic/train/trainer.h"
#include "ranges.h"

namespace mimic::cli {

namespace {
// The commands that take a GPU, for the refusal of the others.
constexpr const char* kDeviceCommands = "record, distill, convert, finetune, eval, generate, pretrain, bench attention and bench train";
}  // namespace

void add_precision_option(CLI::App& sub, Precision& precision, Common& common) {
  common.precision = &precision;
  sub.add_option_function<std::string>(
         "--precision", [&precision](const std::string& v) { precision = parse_precision(v); },
         "Arithmetic of the forward passes (and of the training steps): fp32, or bf16 mixed precision (autocast; the weights, the optimizer "
         "and the training LM-head loss stay fp32). For a GPU; on a CPU bf16 is faster only where it has bf16 instructions (AVX512-BF16, AMX)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->default_str("fp32");
}

void add_common_options(CLI::App& sub, Common& common, Devices devices) {
  common.command = sub.get_name();
  for (const CLI::App* p = sub.get_parent(); p != nullptr && p->get_parent() != nullptr; p = p->get_parent())
    common.command = p->get_name() + " " + common.command;
  sub.add_option("--threads", common.threads, "Threads for LibTorch (0, the default: all cores; on a machine other work keeps busy, fewer run faster: docs/cli.md)")->transform(range::threads());
  sub.add_option("--seed", common.seed, "Random seed")->capture_default_str()->transform(range::seed());
  sub.add_flag("--json", common.json, "Print the result as JSON on stdout");
  common.devices = devices;
  // the command as typed: "bench generate", not "generate" (which takes a GPU)
  const CLI::App* parent = sub.get_parent();
  const std::string name = parent != nullptr && parent->get_parent() != nullptr ? parent->get_name() + " " + sub.get_name() : sub.get_name();
  sub.add_option("--device", common.device,
                 devices == Devices::Any ? "Where to compute: auto (a CUDA GPU when one is visible, else the CPU), cpu, cuda, cuda:N; or cpu-checked, the CPU "
                                           "behind a stand-in device, which stops at a tensor left on the CPU (for developers without a GPU)"
                                         : "Where to compute: this command computes on the CPU (auto and cpu); " + std::string(kDeviceCommands) +
                                               " take a GPU")
      ->capture_default_str()
      ->check(CLI::Validator(
          [devices, name](std::string& v) -> std::string {
            try {
              const auto d = resolve_device(v, distributed::environment().local_rank);
              if (devices == Devices::CpuOnly && v != "auto" && !d.is_cpu())
                return name + " computes on the CPU so far (auto or cpu); " + kDeviceCommands + " take a GPU";
            } catch (const Error& e) {
              std::string why = e.what();  // "--device X: ...": CLI11 names the option itself
              if (why.rfind("--device", 0) == 0) why = why.substr(why.find(": ") == std::string::npos ? 0 : why.find(": ") + 2);
              return why;
            }
            return "";
          },
          "DEVICE"));
}

void add_allreduce_options(CLI::App& sub, bool& overlap, double& bucket_mb) {
  // In one process they change nothing: said once, not refused (one command line serves one process and a launch).
  auto single_process_note = [](const std::string& name) {
    return [name](const std::string&) {
      bool single = true;
      try {
        single = !distributed::environment().distributed();
      } catch (const Error&) {
        // a bad environment is start()'s one-line error
      }
      if (single)
        std::fprintf(stderr, "mimic: note: %s applies to runs of several ranks (mimic launch, WORLD_SIZE > 1); this run is one process\n",
                     name.c_str());
    };
  };
  sub.add_option_function<std::string>(
         "--allreduce", [&overlap](const std::string& v) { overlap = v == "overlap"; },
         "Distributed runs: average the gradients while backward runs (overlap, the default) or after it (sync, the reference)")
      ->check(CLI::IsMember({"overlap", "sync"}))
      ->each(single_process_note("--allreduce"));
  sub.add_option("--bucket-mb", bucket_mb, "Distributed runs: the largest gradient bucket, one all-reduce each (MB)")
      ->capture_default_str()
      ->transform(range::real(0, 4096, /*open_low=*/true))
      ->each(single_process_note("--bucket-mb"));
}

void add_copy_options(CLI::App& sub, data::CopyCurriculum& copy, const std::string& fraction_default) {
  auto* fraction = sub.add_option("--copy-fraction", copy.fraction,
                                  "Copy curriculum: the fraction of training blocks in which an earlier span recurs later (docs/data.md)" +
                                      (fraction_default.empty() ? "" : "; default " + fraction_default))
                       ->transform(range::fraction());
  if (fraction_default.empty()) fraction->capture_default_str();
  sub.add_option_function<std::vector<int64_t>>(
         "--copy-span",
         [&copy](const std::vector<int64_t>& v) {
           MIMIC_USAGE_CHECK(v.size() == 2, "--copy-span takes MIN,MAX (two token counts), got ", v.size(), " value", v.size() == 1 ? "" : "s");
           MIMIC_USAGE_CHECK(v[0] <= v[1], "--copy-span ", v[0], ",", v[1], ": MIN must not exceed MAX");
           copy.min_span = v[0];
           copy.max_span = v[1];
         },
         "Copy curriculum: MIN,MAX tokens of a copied span (log-uniform; default " + std::to_string(copy.min_span) + "," +
             std::to_string(copy.max_span) + ")")
      ->delimiter(',')
      ->transform(range::tokens(1));
  sub.add_option("--copy-repeats", copy.copies, "Copy curriculum: how many times the span recurs after its source")
      ->capture_default_str()
      ->transform(range::integer(1, 64));
  sub.add_option("--copy-random", copy.random_fraction,
                 "Copy curriculum: the share of copied spans that are random tokens instead of prose (docs/data.md)")
      ->capture_default_str()
      ->transform(range::fraction());
  sub.add_option("--copy-random-vocab", copy.random_vocab, "Copy curriculum: random spans draw from the train split's N most frequent tokens")
      ->capture_default_str()
      ->transform(range::integer(2, 65536))
      ->needs("--copy-random");  // it shapes the random spans alone
}

namespace {
struct Retired {
  const CLI::App* sub;
  std::string old_name, new_name;
};
std::vector<Retired>& retired() {
  static std::vector<Retired> all;
  return all;
}
}  // namespace

void retire_spelling(CLI::App& sub, CLI::Option* old, CLI::Option* current) {
  // Listed last in --help under a heading of its own rather than hidden: CLI11 gives a hidden option no name, so
  // its errors would not say which option a bad value was given to.
  old->group(kRetiredGroup)->excludes(current);
  // and what the current spelling excludes or needs: `info --model m --maps` listed the maps and dropped the model,
  // where --feature-maps is refused beside --model (helper-101's probe). So retire a spelling after the options
  // that exclude its current one are declared.
  for (auto* other : current->get_excludes())
    if (other != old) old->excludes(other);
  for (auto* other : current->get_needs()) old->needs(other);
  old->description("the old spelling of " + current->get_name());
  retired().push_back({&sub, old->get_name(), current->get_name()});
}

void refuse_out_over_inputs(const std::string& out, const std::vector<std::pair<std::string, std::string>>& inputs,
                            const std::string& what) {
  namespace fs = std::filesystem;
  if (out.empty()) return;
  const std::string named = what.empty() ? "--out " + out : what;
  std::error_code ec;
  const fs::path o = fs::weakly_canonical(fs::absolute(out), ec);
  if (ec) return;  // an unresolvable --out is refused by the command's own checks
  // `inner` equals `outer` or lies below it
  auto within = [](const fs::path& inner, const fs::path& outer) {
    auto i = inner.begin(), e = inner.end();
    for (auto p = outer.begin(); p != outer.end(); ++p, ++i)
      if (i == e || *i != *p) return false;
    return true;
  };
  for (fs::path up = o.parent_path(); !up.empty(); up = up.parent_path()) {
    if (distill::is_checkpoint_folder(up.string()))
      fail(named, " lies inside ", up.string(), ", a distillation's checkpoint folder: distill keeps only its own files there "
           "(another result there stops it resuming); write the result elsewhere");
    // a file written into a training run's folder (forward, record, distill, bench peer: the eighth probe of
    // 2026-11-29; the folder writers were refused there already), known by its checkpoint or its log's first line
    if (const std::string run = train::checkpoint_command(up.string()); !run.empty())
      fail(named, " lies inside the training run in ", up.string(), " (a ", run, " run: its checkpoint or log is there): that folder "
           "holds the run's own result; write the result elsewhere");
    if (up == up.root_path()) break;
  }
  for (const auto& [option, value] : inputs) {
    if (value.empty() || !fs::exists(value, ec)) continue;
    const fs::path in = fs::canonical(value, ec);
    if (ec) continue;
    if (in == o) fail(named, " is the input ", option, " ", value, " itself: write the result elsewhere");
    // a hard link is the same file under another name (its write replaced the name only, so the input survived by luck)
    if (fs::is_regular_file(in, ec) && fs::is_regular_file(o, ec) && fs::equivalent(in, o, ec))
      fail(named, " is the input ", option, " ", value, " itself (a hard link to it): write the result elsewhere");
    if (within(in, o)) fail(named, " holds the input ", option, " ", value, ": write the result elsewhere");
    if (within(o, in)) fail(named, " lies inside the input ", option, " ", value, ": write the result elsewhere");
    // a folder of links (an HF hub snapshot is one) whose files lie in --out: export wrote through them, changing the
    // input's weights (the fifth probe of 2026-11-27)
    if (fs::is_directory(in, ec))
      for (const auto& e : fs::directory_iterator(in, ec)) {
        if (!e.is_symlink(ec)) continue;
        const fs::path target = fs::weakly_canonical(e.path(), ec);
        if (!ec && within(target, o))
          fail(named, " holds ", e.path().filename().string(), " of the input ", option, " ", value, " (linked from it): write the result elsewhere");
      }
  }
}

void refuse_foreign_output(const std::string& out, OutputKind kind, const std::string& command) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (out.empty()) return;
  // a training run's folder holds that run's result, its subfolders (last/, step-N/, best/) included: an export or a
  // conversion into a finished run's last/ left a BERT beside the run's GPT-2 (the fifth probe of 2026-11-27)
  // Any folder above --out, not only its parent: a conversion into RUN/step-2/deep was accepted, and the run's next
  // fresh start removed it (the sixth probe of 2026-11-28). A training run is known by its checkpoint, or by its log
  // beside what it exports (a log.jsonl alone is a name anybody may use).
  if (kind != OutputKind::TrainingRun) {
    // Above the parent, only a checkpoint of mimic's training format counts (a file named checkpoint.safetensors, or a
    // log.jsonl, in a home folder must not block every output below it).
    const fs::path full = fs::weakly_canonical(fs::absolute(out), ec);
    const fs::path parent = full.parent_path();
    auto training_checkpoint = [](const fs::path& dir) {
      std::error_code e;
      if (!fs::is_regular_file(dir / "checkpoint.safetensors", e)) return false;
      try {
        const auto md = io::SafeTensorsFile::open((dir / "checkpoint.safetensors").string()).metadata();
        return md.count("format") && md.at("format") == "mimic-train-checkpoint-1";
      } catch (const Error&) {
        return false;
      }
    };
    for (fs::path up = parent; !ec && !up.empty(); up = up.parent_path()) {
      const bool run = up == parent ? fs::exists(up / "checkpoint.safetensors", ec) || fs::exists(up / "log.jsonl", ec)
                                    : training_checkpoint(up);
      if (run)
        fail("--out ", out, " lies inside the training run in ", up.string(), " (its checkpoint or log is there): that folder holds "
             "the run's own result; choose another --out");
      if (up == up.root_path()) break;
    }
  }
  if (!fs::is_directory(out, ec)) return;
  struct Marker {
    const char* file;
    const char* what;
    bool model, report, training;  // whether a writer of that kind may find it there
    const char* begins = "";       // what the file begins with, where the name alone says too little
  };
  static const Marker markers[] = {
      {"checkpoint.safetensors", "a training run", false, false, true},
      {"log.jsonl", "a training run", false, false, true},
      {"done.safetensors", "a distillation's checkpoint folder", false, false, false},
      {"report.html", "a report", false, true, false},
      // a report killed while it drew its figures has no page yet (it comes last), and a model written beside its
      // figures and table was accepted (helper-66's review of 2026-12-05); a metrics.csv of somebody else's is no report
      {"metrics.csv", "a report", false, true, false, report::kMetricsCsvHead},
      {"config.json", "a model", true, false, true},
  };
  // a file result of mimic's (forward's tensors, distill's maps, a record) under a model's weights name is another
  // command's: a model written there replaced it, or removed it as a stale shard, exit 0 (the thirteenth probe)
  if (kind != OutputKind::Report) models::refuse_odd_model_file_names(out);
  // a training run's folder holds its model beside its checkpoint or log; a model alone there is another command's
  // result (an export, a converted model), which finetune and pretrain replaced (the fourth probe of 2026-11-27)
  const bool run_files = fs::exists(fs::path(out) / "checkpoint.safetensors", ec) || fs::exists(fs::path(out) / "log.jsonl", ec);
  for (const auto& m : markers) {
    if (!fs::exists(fs::path(out) / m.file, ec)) continue;
    if (*m.begins) {
      std::ifstream in(fs::path(out) / m.file, std::ios::binary);
      std::string head(std::char_traits<char>::length(m.begins), '\0');
      if (!in.read(head.data(), static_cast<std::streamsize>(head.size())) || head != m.begins) continue;
    }
    bool allowed = kind == OutputKind::Model ? m.model : kind == OutputKind::Report ? m.report : m.training;
    if (kind == OutputKind::TrainingRun && std::string(m.file) == "config.json" && !run_files) allowed = false;
    if (!allowed)
      fail("--out ", out, " holds ", m.what, " (", m.file, "): what this command writes would mix with it; choose another --out, "
           "or move that out of the way first (no option, --fresh or --force included, removes another command's result)");
  }
  // a model a writer of models may replace is one mimic wrote (its weights carry kWrittenByKey): a user's checkpoint
  // given as --out to convert or export was overwritten, its other files left beside the new model (the probe of
  // 2026-12-01)
  if (kind == OutputKind::Model && fs::exists(fs::path(out) / "config.json", ec) && !models::written_by_mimic(out))
    fail("--out ", out, " holds a model mimic did not write (config.json, and no weights with mimic's mark): what this command "
         "writes would replace it; choose another --out, or move that model out of the way first");
  // weights without a config.json beside them: a user's checkpoint of weights alone (model.safetensors, or shards and
  // their index) was overwritten, or removed as stale, with exit 0 (helper-77's probe of 2026-12-06); mimic's carry
  // its mark. (A training run's folder holds its own promoted model.)
  if ((kind == OutputKind::Model || (kind == OutputKind::TrainingRun && !run_files)) && !fs::exists(fs::path(out) / "config.json", ec)) {
    const auto foreign = models::unmarked_weights_files(out);
    std::string names;
    for (const auto& n : foreign) names += (names.empty() ? "" : ", ") + n;
    if (!foreign.empty())
      fail("--out ", out, " holds weights mimic did not write (", names, ", no config.json): what this command writes would replace or "
           "remove them; choose another --out, or move them out of the way first");
  }
  // a log.jsonl that is no training log of mimic's (its first line not a JSON object with an integer step) is somebody
  // else's file, which a fresh run's log replaced (the eighth probe of 2026-11-29)
  if (kind == OutputKind::TrainingRun && fs::is_regular_file(fs::path(out) / "log.jsonl", ec) &&
      !fs::exists(fs::path(out) / "checkpoint.safetensors", ec)) {
    const bool ours = fs::file_size(fs::path(out) / "log.jsonl", ec) == 0 || train::read_log_head(out).mimic;  // empty: nothing to lose
    MIMIC_CHECK(ours, "--out ", out, " holds log.jsonl, which is not a mimic training log: what this command writes would replace it; "
                "choose another --out, or move that file out of the way first");
  }
  if (kind == OutputKind::TrainingRun && !command.empty()) {
    const std::string theirs = train::checkpoint_command(out);
    if (!theirs.empty() && theirs != command)
      fail("--out ", out, " holds a ", theirs, " run (", fs::exists(fs::path(out) / "checkpoint.safetensors", ec) ? "checkpoint.safetensors" : "log.jsonl",
           "): ", command, " neither resumes nor replaces "
           "another command's run, --fresh included; choose another --out, or move that run out of the way first");
  }
}

void refuse_foreign_file(const std::string& out, const std::string& what,
                         const std::function<bool(const std::map<std::string, std::string>& metadata)>& ours,
                         const std::string& option) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (out.empty() || !fs::is_regular_file(out, ec)) return;  // a directory or a device is the writer's own refusal
  bool mine = false;
  try {
    mine = ours(io::SafeTensorsFile::open(out).metadata());
  } catch (const Error&) {
    mine = false;  // not a safetensors file at all
  }
  MIMIC_CHECK(mine, option, " ", out, " exists and is not ", what, ": this command replaces only its own earlier result; "
              "choose another ", option, ", or move that file out of the way first");
}

std::string resumed_note(int64_t resumed_from) {
  return resumed_from > 0 ? " (resumed from " + std::to_string(resumed_from) + ")" : "";
}

void print_note(const std::string& sentence) { std::fprintf(stderr, "mimic: note: %s\n", sentence.c_str()); }

void note_unreadable_tokenizer(const std::string& model_dir, const std::string& result) {
  std::string why;
  if (!models::try_load_tokenizer(model_dir, why))
    print_note(model_dir + " has no tokenizer mimic reads (" + why + "): " + result + " has none either; commands that read text will refuse it");
}

void note_clamped(const std::string& option, int64_t asked, int64_t used, const std::string& what) {
  if (const auto sentence = clamped_note(option, asked, used, what); !sentence.empty()) print_note(sentence);
}

std::string fit_warmup(const CLI::Option* warmup_option, int64_t& warmup, int64_t steps) {
  if (warmup <= steps) return "";  // the peak is reached at step `warmup` (optimizer.h), at the last step at the latest
  MIMIC_USAGE_CHECK(warmup_option == nullptr || warmup_option->count() == 0, "--warmup ", warmup, " must be at most --steps ", steps,
              " (a longer warm-up never reaches the peak learning rate)");
  const int64_t was = warmup;
  warmup = steps / 10;
  // "cut to 1 steps", "cut to 0 steps" (helper-94's probe): said as counted
  return (warmup == 0 ? std::string("no warm-up") : "warm-up cut to " + count_of(warmup, "step")) + ": the default " + std::to_string(was) +
         " is longer than --steps " + std::to_string(steps);
}

void start(Common& common) {
  for (const auto& r : retired())
    if (r.sub->parsed() && r.sub->count(r.old_name) > 0)
      std::fprintf(stderr, "mimic: note: %s is now %s (the old spelling still works)\n", r.old_name.c_str(), r.new_name.c_str());
  // Reads (and checks) the distributed environment before any work: a malformed RANK is refused at once, and the
  // default thread count divides the cores among this machine's ranks.
  init_runtime(common.threads > 0 ? common.threads : distributed::default_threads(available_cores()));
  const int world = distributed::environment().world_size;
  // a usage error, which rank 0 alone says: under a launch each rank said it (helper-56's probe of 2026-12-04)
  MIMIC_USAGE_CHECK(common.ranks || world == 1, common.command, " runs as one process, not as one of WORLD_SIZE=", world,
              " ranks (mimic launch, torchrun): run it alone; finetune, pretrain and distill are the commands that train as ranks of one run");
  seed_everything(common.seed);
  common.on = common.devices == Devices::Any ? resolve_device(common.device, distributed::environment().local_rank) : c10::Device(c10::kCPU);
  // the line alone decides it (auto resolves to a device bf16 runs on): a usage error (helper-58's probe: exit 1)
  if (common.precision != nullptr) usage_checked([&] { check_precision_on(*common.precision, common.on); });
}

// Text a model generated may hold bytes that are not UTF-8 (GPT-2's byte tokens, cut mid-character): they print as
// U+FFFD rather than failing the whole command after its work (the probe of 2026-11-27: nlohmann's type_error.316).
void print_json(const nlohmann::json& j) { std::cout << json_dump(j) << std::endl; }

std::string metric_cell(double x) {
  if (!std::isfinite(x)) return "        -";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%9.4f", x);
  return buf;
}

std::string read_text_input(const std::optional<std::string>& text, const std::optional<std::string>& file) {
  MIMIC_USAGE_CHECK(text.has_value() != file.has_value(), "give exactly one of --text and --file");
  if (!file) return *text;
  auto s = io::read_text_file(*file);  // refuses a missing file, a directory or a FIFO in one line
  // as --data refuses it: a binary file (a record, a model) given by mistake was tokenized byte by byte for minutes
  // (the probe of 2026-11-27)
  MIMIC_CHECK(data::is_valid_utf8(s), "--file ", *file, ": not valid UTF-8 (--file takes UTF-8 text)");
  // read as --data reads a file (line endings as \n, no byte-order mark); the rest stays as it is (spaces, blank lines:
  // --file is the text as given)
  return text_with_newlines(s);
}

std::optional<io::DType> storage_dtype_arg(const std::string& name) {
  if (name.empty() || name == "keep") return std::nullopt;
  if (name == "f32") return io::DType::F32;
  if (name == "f16") return io::DType::F16;
  if (name == "bf16") return io::DType::BF16;
  fail("--dtype must be f32, f16, bf16 or keep, not '", name, "'");
}

namespace {
// The command argv names (a command's own command too: bench train), and the index of its first option; nullptr
// when argv names none (CLI11, or main, names that).
const CLI::App* named_command(const CLI::App& app, int argc, char** argv, int* first) {
  if (argc < 2) return nullptr;
  const CLI::App* cmd = nullptr;
  for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; }))
    if (c->check_name(argv[1])) cmd = c;
  if (cmd == nullptr) return nullptr;
  *first = 2;
  if (argc > 2)
    for (const CLI::App* c : cmd->get_subcommands([](const CLI::App*) { return true; }))
      if (c->check_name(argv[2])) cmd = c, *first = 3;
  return cmd;
}

}  // namespace

std::string unknown_option(const CLI::App& app, int argc, char** argv) {
  int i = 0;
  const CLI::App* cmd = named_command(app, argc, argv, &i);
  if (cmd == nullptr) return "";
  const std::string command = cmd->get_parent() != &app ? cmd->get_parent()->get_name() + " " + cmd->get_name() : cmd->get_name();
  const CLI::Option* awaiting = nullptr;  // an option given without '=' whose value is the next word
  for (; i < argc && std::string(argv[i]) != "--"; ++i) {  // launch: the words after -- are the ranks' command
    const std::string word = argv[i];
    const CLI::Option* value_of = std::exchange(awaiting, nullptr);
    // Only a word CLI11 reads as an option: a dash and a letter, or two and a letter. A dash and a digit is a value
    // (`--nproc -1`, `--temperature -0.5`), which its range check names.
    auto letter = [&](size_t at) { return word.size() > at && std::isalpha(static_cast<unsigned char>(word[at])); };
    if (word[0] != '-' || !(letter(1) || (word.size() > 1 && word[1] == '-' && letter(2)))) continue;
    const std::string name = word.substr(0, word.find('='));
    const CLI::Option* known = nullptr;
    for (const CLI::Option* o : cmd->get_options())
      if (o->check_name(name)) known = o;
    if (known) {
      // `export --out --json` made a folder named --json (the eleventh probe): an option where a value is due
      if (value_of)
        return command + ": " + value_of->get_name() + " needs a value, and the word after it, " + name + ", is an option (a value " +
               "that starts with a dash is given as " + value_of->get_name() + "=VALUE)";
      if (word.find('=') == std::string::npos && std::min(known->get_type_size_min(), known->get_items_expected_min()) > 0) awaiting = known;  // CLI11 takes the next word, whatever it is
      continue;
    }
    // `--prompt -x`: CLI11 takes it as the value. A word of two dashes and a name is an option mistyped (`--out --jsonx`
    // wrote a file named --jsonx: the twelfth probe), refused as the option names are
    if (value_of && word.rfind("--", 0) != 0) continue;
    if (value_of)
      return command + ": " + value_of->get_name() + " needs a value, and the word after it, " + name + ", looks like an option (a " +
             "value that starts with dashes is given as " + value_of->get_name() + "=VALUE)";
    if (command == "launch")
      return "launch: unknown option '" + name + "' (launch takes --nproc, --master-port, --master-addr and --timeout; the command "
             "each rank runs follows --)";
    // CLI11 said "The following arguments were not expected: 0.5 --min-lr-ratio", the words in reverse (the tenth
    // probe of 2026-11-29): the option by name, and the nearest one the command has
    std::vector<std::string> names;
    for (const CLI::Option* o : cmd->get_options())
      for (const auto& long_name : o->get_lnames()) names.push_back("--" + long_name);
    const std::string nearest = nearest_name(name, names);
    return command + ": unknown option '" + name + "'" + (nearest.empty() ? "" : " (did you mean " + nearest + "?)") + "; mimic " + command +
           " --help lists its options";
  }
  return "";
}

std::string list_item_problem(const CLI::App& app, int argc, char** argv) {
  int i = 0;
  const CLI::App* cmd = named_command(app, argc, argv, &i);
  if (cmd == nullptr) return "";  // CLI11 names an unknown command
  for (; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;  // launch: the words after it are the ranks' command, checked when each rank parses it
    if (word.rfind("--", 0) != 0) continue;
    const auto eq = word.find('=');
    const std::string name = word.substr(0, eq);
    const CLI::Option* opt = nullptr;
    for (const CLI::Option* o : cmd->get_options())
      if (o->check_name(name)) opt = o;
    if (opt == nullptr || opt->get_delimiter() == '\0') continue;
    if (eq == std::string::npos && i + 1 >= argc) continue;  // CLI11 says the value is missing
    const std::string value = eq != std::string::npos ? word.substr(eq + 1) : std::string(argv[i + 1]);
    const char d = opt->get_delimiter();
    if (!value.empty() && (value.front() == d || value.back() == d || value.find(std::string(2, d)) != std::string::npos))
      return name + ": '" + value + "' has an empty item; give items separated by single '" + std::string(1, d) + "' (e.g. 128" + d + "256)";
    if (opt->check_name("--copy-span")) continue;  // a MIN,MAX pair (8,8 is one span length), not a set of items
    std::set<std::string> seen;
    std::stringstream items(value);
    for (std::string item; std::getline(items, item, d);) {
      std::string key = item;  // a number by its value: 64 and 064 are one length
      if (!key.empty() && key.find_first_not_of("0123456789") == std::string::npos) key.erase(0, std::min(key.find_first_not_of('0'), key.size() - 1));
      if (!seen.insert(key).second) return name + ": '" + value + "' names " + item + " twice: give each item once";
    }
  }
  return "";
}

std::string copy_shape_option_given(const CLI::App& sub) {
  for (const char* name : {"--copy-span", "--copy-repeats", "--copy-random", "--copy-random-vocab"})
    if (sub.get_option(name)->count() > 0) return name;
  return "";
}

void refuse_copy_shape_without_copies(const std::string& given, const data::CopyCurriculum& copy) {
  MIMIC_USAGE_CHECK(given.empty() || copy.fraction > 0, given, " shapes the copy curriculum, which is off here: give --copy-fraction F > 0 "
              "as well, or leave ", given, " out");
  copy.validate();
}

}  // namespace mimic::cli
