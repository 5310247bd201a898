// Shared pieces of the `mimic` command line: common options and the subcommand registry.
#pragma once
#include <CLI/CLI.hpp>
#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "mimic/core/error.h"

namespace mimic::io {
enum class DType;
}
namespace mimic {
enum class Precision;
}
namespace mimic::data { struct CopyCurriculum; }

// MIMIC_USAGE_CHECK(cond, "message ", value, ...): a mistake the command line alone shows, found in a command's callback
// or an option's function (after CLI11's own checks, before any work). It leaves as CLI11's usage errors do — one line,
// exit 2 (mimic.cpp) — where mimic::Error is a failure found while working (exit 1): `--warmup` above `--steps`,
// `--mse-weight` without `--loss ce+mse` and `--copy-span 8` exited 1 (the thirteenth and fourteenth probes).
#define MIMIC_USAGE_CHECK(cond, ...)                                                     \
  do {                                                                                    \
    if (!(cond)) throw ::CLI::ValidationError(::mimic::detail::concat(__VA_ARGS__));      \
  } while (0)

namespace mimic::cli {

// Runs `check`, a library function whose refusal depends on the command line alone (a --seq-len against the task's),
// and leaves with that refusal as a usage error (exit 2), as MIMIC_USAGE_CHECK does
template <class F>
auto usage_checked(F&& check) -> decltype(check()) {
  try {
    return check();
  } catch (const Error& e) {
    throw CLI::ValidationError(e.what());
  }
}

// Where a command can compute: the stages moved to a device (record, distill, convert, finetune, eval, generate,
// pretrain, bench attention, bench train), or the CPU alone (report, and the commands that compute nothing to speak
// of: export, info, tokenize, forward, bench generate, bench peer).
enum class Devices { CpuOnly, Any };

// Options every subcommand takes.
struct Common {
  int threads = 0;      // 0 = all cores
  uint64_t seed = 0;
  bool json = false;    // machine-readable result on stdout
  std::string device = "auto";  // --device as given
  Devices devices = Devices::CpuOnly;
  c10::Device on = c10::Device(c10::kCPU);  // the device resolved by start()
  const Precision* precision = nullptr;      // the command's --precision (add_precision_option), checked against `on` by start()
  // Whether the command runs as the ranks of one data-parallel run (finetune, pretrain, distill; and info, which
  // reports what a rank sees): the others refuse WORLD_SIZE > 1 in start(), where every rank of
  // `launch -- mimic record` wrote the same file.
  bool ranks = false;
  std::string command;  // its name, as the user types it (bench train)
};

// Adds --threads, --seed, --json and --device to a subcommand. --device is auto (the default: cuda:LOCAL_RANK when
// LibTorch sees a CUDA device and the command can use it, else the CPU), cpu, cuda or cuda:N; checked while parsing
// (mimic::resolve_device): a device that is not there, or a GPU for a command that computes on the CPU alone, is a
// one-line error.
void add_common_options(CLI::App& sub, Common& common, Devices devices = Devices::CpuOnly);

// Adds --precision fp32|bf16 to a command that trains or runs a model forward (mimic/core/precision.h): bf16 is autocast on the device the
// command computes on (a GPU; on the CPU LibTorch's CPU autocast, faster than fp32 only with bf16 instructions).
void add_precision_option(CLI::App& sub, Precision& precision, Common& common);

// Adds --allreduce overlap|sync and --bucket-mb to a training subcommand: how a distributed run averages the
// gradients (train::TrainOptions::overlap_allreduce, bucket_mb; docs/distributed.md).
void add_allreduce_options(CLI::App& sub, bool& overlap, double& bucket_mb);

// Adds the copy curriculum's options (data::CopyCurriculum; docs/data.md) to an LM training subcommand: --copy-fraction,
// --copy-span MIN,MAX, --copy-repeats, --copy-random, --copy-random-vocab. pretrain and finetune take the same.
// `fraction_default` is what --help gives as --copy-fraction's default where a preset decides it (finetune: 0.5
// under kd); empty: the value `copy` holds.
void add_copy_options(CLI::App& sub, data::CopyCurriculum& copy, const std::string& fraction_default = "");

// The first copy-curriculum option that shapes the copied spans (--copy-span, --copy-repeats, --copy-random,
// --copy-random-vocab) given on `sub`'s command line, or "". A command refuses one when the curriculum ends up off
// (no --copy-fraction, and no preset's): it was accepted and ignored without a word (the probe of 2026-11-27).
std::string copy_shape_option_given(const CLI::App& sub);
void refuse_copy_shape_without_copies(const std::string& given, const data::CopyCurriculum& copy);

// Retires an option's old spelling (docs/cli.md, "Option vocabulary"): `old` is the old name's option, bound to the
// same variable with the same checks as `current`; --help lists it last, under kRetiredGroup; it excludes the current spelling, and
// start() prints one line on stderr naming the new spelling when the old one was used.
void retire_spelling(CLI::App& sub, CLI::Option* old, CLI::Option* current);
inline constexpr const char* kRetiredGroup = "Retired spellings (still accepted)";

// What a command writes into its --out folder, and so which other results it must not mix with (docs/reliability.md,
// "One run's result per folder"): a model (convert, export), a report, or a training run (finetune, pretrain: its
// checkpoint, log and the model it promotes).
enum class OutputKind { Model, Report, TrainingRun };
// Refuses, in one line before any work, an --out folder that holds another kind's result — a training run's
// checkpoint under a converted model (the rerun of that run then reported the converted model as its own), a model
// under a report, a distillation's checkpoint folder — naming the file that shows it.
// A training run's folder also names the command whose run it holds (`command`: "pretrain", "finetune"): another
// command's run is refused, with --fresh too (finetune --fresh wiped a pretrain run's checkpoint: issue 38).
void refuse_foreign_output(const std::string& out, OutputKind kind, const std::string& command = "");

// The same for a command writing one safetensors file (distill's maps, forward's tensors): an existing --out is
// replaced only when its metadata says this command wrote it (`ours`); anything else there — a record, another
// command's maps, a file that is no safetensors — is refused in one line (distill replaced a record, forward a
// maps file, both exit 0: the probe of 2026-11-27).
// `option` names the output in the message (bench peer writes its --inputs).
void refuse_foreign_file(const std::string& out, const std::string& what,
                         const std::function<bool(const std::map<std::string, std::string>& metadata)>& ours,
                         const std::string& option = "--out");

// Refuses an --out that is one of the command's inputs, holds one, or lies inside one (paths resolved through
// symlinks; inputs that name no file, such as a corpus, are skipped): no command ever overwrites, deletes or writes
// into what it reads. `inputs` pairs an option's name with its value. Called before any work. `what` names the output
// in the message (default "--out OUT"): a command that also writes beside OUT (distill's OUT.ckpt) checks that too.
// Every command writing an --out calls it, so it also refuses an --out inside a distillation's checkpoint folder
// (OUT.ckpt, distill::is_checkpoint_folder): distill neither resumes into nor empties (--fresh) a folder holding another
// command's result (`report --out maps.safetensors.ckpt/rep` stopped that distillation: the seventh probe of 2026-11-29).
void refuse_out_over_inputs(const std::string& out, const std::vector<std::pair<std::string, std::string>>& inputs,
                            const std::string& what = "");

// One line on stderr, "mimic: note: SENTENCE": what a run says and goes on (a library stage's notes come here).
void print_note(const std::string& sentence);

// A model folder whose tokenizer files mimic cannot read is written with them as they are (a model trained on a recall
// task has none by design): said in one note naming `result` (helper-54's probe for export, helper-72's for convert).
void note_unreadable_tokenizer(const std::string& model_dir, const std::string& result);

// A count asked for and cut to what exists (issue 38: a request larger than what exists is clamped with a line saying
// so): when `used` < `asked`, one line on stderr, "mimic: note: OPTION ASKED is more than WHAT (USED): using USED".
void note_clamped(const std::string& option, int64_t asked, int64_t used, const std::string& what);

// " (resumed from N)" for a run that continued from step or sample N, "" for one that started fresh (a fresh run
// said "resumed from 0": the fourth probe of 2026-11-27).
std::string resumed_note(int64_t resumed_from);

// A warm-up longer than the run never reaches the peak learning rate: a --warmup the user gave above --steps is
// refused; the command's default warm-up is cut to a tenth of the steps. Returns the note saying so ("" when
// nothing was cut), which the trainer says as the training begins (TrainOptions::start_notes): after every check
// that may refuse the run — an error the library finds later (a config, a model) was the second line after it (the
// seventh probe of 2026-11-29) — and not after the run's end, hours late (helper-68's probe).
std::string fit_warmup(const CLI::Option* warmup_option, int64_t& warmup, int64_t steps);

// Applies the common options (threads, malloc tuning, seed). Every subcommand calls it first.
void start(Common& common);

// Prints a JSON result on stdout (one document, pretty-printed).
void print_json(const nlohmann::json& j);

// A metric as a 9-character table cell: "-" where it is undefined (NaN: the entropy and KL of a student whose weights
// are no distribution, the delta kind's).
std::string metric_cell(double x);

// Reads --text or --file into a string; exactly one must be given (an empty --text counts as given).
std::string read_text_input(const std::optional<std::string>& text, const std::optional<std::string>& file);

// THE resolver of model arguments (--model, --teacher, --init of every command): a directory, a family's
// fetched tokenizer asset (models::Family::tokenizer_asset: "gpt2", "bert-base-uncased"), or an embedded
// model's name (gpt2-mini, bert-mini, bert-mini-spam, bert-mini-sotu-era); anything else is a mimic::Error.
std::string resolve_model_dir(const std::string& arg);
// resolve_model_dir as a CLI11 transform: every model option takes ->transform(model_dir_arg()), which
// replaces the argument by its directory or fails parsing with resolve_model_dir's message.
CLI::Validator model_dir_arg();

// An --attention spec checked while parsing (attention::kernel_from_spec; `student`: a distillable kind's spec as
// distill reads it, feature-map keys left to distill), by a dry build at 64 heads of width 64: the options' own
// ranges (hybrid:window=0) were refused only after a record or config had been read (the fifth probe). Checks that
// depend on the model's widths still wait for the model.
CLI::Validator attention_spec_arg(bool student);

// A feature map of the registry (attention::feature_maps), checked while parsing: bench generate built its model
// before an unknown --feature-map was refused (issue 38).
CLI::Validator feature_map_arg();

// A list option's default as it is typed, "128,256,512" (`sep` between the values): CLI11 shows a vector's default with
// spaces, a form the help's examples do not use (helper-81's probe).
template <class T>
std::string typed_list(const std::vector<T>& values, const char* sep = ",") {
  std::string out;
  for (const auto& v : values) {
    if (!out.empty()) out += sep;
    if constexpr (std::is_same_v<T, std::string>) out += v;
    else out += std::to_string(v);
  }
  return out;
}

// A corpus split (train, validation or val, test), checked while parsing: a misspelt one was refused only after the
// model had loaded (the sixth probe of 2026-11-28).
CLI::Validator split_arg();

// Paths the file system can hold. std::filesystem throws a raw "File name too long [...]" on a path longer than
// PATH_MAX or a name (file or folder) longer than NAME_MAX; every path option takes one of these validators, so
// such a path is refused while parsing, in one line naming the option. out_file_arg and out_dir_arg (below) leave
// room for what mimic adds to an output name (OUT.ckpt, NAME.tmp.PID) and for the files it writes inside an output
// directory.
// path_problem: "" for a path that fits, else why not (`reserve_name`, `reserve_path`: characters kept free).
std::string path_problem(const std::string& path, size_t reserve_name = 0, size_t reserve_path = 0);
CLI::Validator path_arg();
// An output file (--out of record, distill, forward): also not an existing folder (distill found one only after every
// layer had trained: the sixth probe of 2026-11-28) or FIFO, nor an existing file whose
// write permission was taken away (no write bit at all: the user protected it; mimic's rename would replace it all
// the same, and a resumed record read "damaged"). An output folder (--out of convert, export, finetune, pretrain,
// report): not an existing file ("cannot create the output directory x: Not a directory" named no option).
CLI::Validator out_file_arg();
CLI::Validator out_dir_arg();

// An input file (--record, --maps, --file, --config, ...): a path that fits, exists and is a file, checked while
// parsing so that a missing one is refused in one line naming the option ("--record: no such file: r.h5"). The
// stages found it only after loading a model, in words that named the path alone (the probe of 2026-12-01).
// input_file_problem: "" for such a file, else why not; `what` says what to give instead of a folder.
std::string input_file_problem(const std::string& path, const std::string& what);
CLI::Validator input_file_arg(const std::string& what);

// --data of the commands that read data (record, distill, finetune, eval): a data set mimic knows by name (a corpus,
// a classification set, a recall task) or an existing file or folder, checked while parsing. Which of them a
// command or task takes is the stage's to say; a path that names nothing was "unknown corpus 'x.txt'" (finetune,
// exit 1, after the model had loaded).
CLI::Validator data_arg();
// The same for an option that models text only (convert's --probe-data): a corpus or an existing file or folder;
// a classification set or a recall task is refused by name, and the message lists the corpora alone.
CLI::Validator text_data_arg();

// A --dtype value for saved weights: "f32", "f16" or "bf16"; "" or "keep" → unset (each tensor as loaded).
std::optional<io::DType> storage_dtype_arg(const std::string& name);

// One subcommand: `setup` adds it to the app and binds its callback.
using Register = void (*)(CLI::App& app);

// An option the command argv names does not know (for launch, among the words before --), as a one-line message
// naming it and the nearest option the command has ("" when none). Checked before CLI11 parses: CLI11 reports it by
// listing the words it did not expect in reverse order, values first ("0.5 --min-lr-ratio"), and for launch the
// words after -- (the command's own).
std::string unknown_option(const CLI::App& app, int argc, char** argv);

// A list option (one CLI11 splits at a delimiter, e.g. --lengths 128,256) given an empty item — "32,", ",64",
// "32,,64" — or one item twice ("64,64", "64,064"), as a one-line message naming it ("" when none). Checked before
// CLI11 parses: CLI11 drops empty items, so "--lengths 32," ran as "--lengths 32" without a word (the probe of
// 2026-11-27), and a length, width or kind given twice was measured twice (the eighth probe of 2026-11-29).
std::string list_item_problem(const CLI::App& app, int argc, char** argv);
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
void register_launch(CLI::App& app);

}  // namespace mimic::cli
