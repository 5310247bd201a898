// The option validators every command shares (cli.h): paths that fit and are of the right kind, input files, data
// sets and corpora, model folders and names, splits, feature maps and attention specs. Each returns why a value is
// refused ("" when it is not), so that CLI11 names the option in one line before any work starts.
#include <algorithm>
#include <climits>
#include <filesystem>

#include "cli.h"
#include "mimic/attention/feature_map.h"
#include "mimic/attention/kinds.h"
#include "mimic/core/error.h"
#include "mimic/core/paths.h"
#include "mimic/data/classification.h"
#include "mimic/data/corpus.h"
#include "mimic/data/recall_tasks.h"
#include "mimic/models/family.h"
#include "mimic/models/model.h"

namespace mimic::cli {

// What an output name may need beyond the name given: ".ckpt" (distill's OUT.ckpt/), ".tmp." and a pid (atomic
// writes); and inside an output directory, paths like best/model.safetensors.index.json.tmp.PID.
constexpr size_t kOutputNameRoom = 32, kOutputPathRoom = 256;

std::string path_problem(const std::string& path, size_t reserve_name, size_t reserve_path) {
  const size_t max_path = PATH_MAX - 1 - reserve_path, max_name = NAME_MAX - reserve_name;
  // "" read as "no file " or "cannot open : No such file" (the sixth probe of 2026-11-28)
  if (path.empty()) return "an empty path; give a file or folder";
  // an output named with a newline or a tab split the lines that name it ("wrote …": the eighth probe of 2026-11-29)
  if (reserve_name > 0 && std::any_of(path.begin(), path.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    return "the output path has a control character (a newline, a tab): give a name without one";
  if (path.size() > max_path)
    return "the path has " + std::to_string(path.size()) + " characters; at most " + std::to_string(max_path) + " fit (PATH_MAX " +
           std::to_string(PATH_MAX) + (reserve_path ? ", less room for the files mimic writes inside it)" : ")");
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end - start > max_name)
      return "the name '" + path.substr(start, 16) + "...' in the path has " + std::to_string(end - start) + " characters; at most " +
             std::to_string(max_name) + " fit (NAME_MAX " + std::to_string(NAME_MAX) +
             (reserve_name ? ", less room for the .ckpt and .tmp.PID mimic adds to an output name)" : ")");
    start = end + 1;
  }
  return {};
}

CLI::Validator path_arg() {
  return CLI::Validator([](std::string& s) { return path_problem(s); }, "PATH");
}
CLI::Validator out_file_arg() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (auto why = path_problem(s, kOutputNameRoom, kOutputPathRoom); !why.empty()) return why;
        std::error_code ec;
        const auto st = std::filesystem::status(s, ec);
        if (std::filesystem::is_directory(st)) return s + " is a folder: give the name of the file to write";
        if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st))
          return s + " is not a regular file (a named pipe, a device): give the name of the file to write";
        constexpr auto any_write =
            std::filesystem::perms::owner_write | std::filesystem::perms::group_write | std::filesystem::perms::others_write;
        if (std::filesystem::is_regular_file(st) && (st.permissions() & any_write) == std::filesystem::perms::none)
          return s + " is write-protected (no write permission): make it writable (chmod u+w) to let mimic replace or extend it, "
                     "or give another name";
        return {};
      },
      "FILE");
}
CLI::Validator out_dir_arg() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (auto why = path_problem(s, kOutputNameRoom, kOutputPathRoom); !why.empty()) return why;
        std::error_code ec;
        if (std::filesystem::exists(s, ec) && !std::filesystem::is_directory(s, ec))
          return s + " exists and is not a folder: give a folder to write into (a new one, or one holding this command's earlier result, whose files it replaces; files of yours there stay)";
        return {};
      },
      "DIR");
}

std::string input_file_problem(const std::string& path, const std::string& what) {
  if (auto why = path_problem(path); !why.empty()) return why;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return ec ? path + ": " + ec.message() : "no such file: " + path;  // e.g. permission denied
  if (std::filesystem::is_directory(path, ec)) return path + " is a folder: give " + what;
  if (std::filesystem::is_fifo(path, ec)) return path + " is a named pipe (FIFO), not a regular file: give " + what;
  if (!std::filesystem::is_regular_file(path, ec)) return path + " is neither a file nor a folder: give " + what;
  return {};
}
CLI::Validator input_file_arg(const std::string& what) {
  return CLI::Validator([what](std::string& s) { return input_file_problem(s, what); }, "FILE");
}

namespace {
CLI::Validator data_validator(bool text_only) {
  return CLI::Validator(
      [text_only](std::string& s) -> std::string {
        const auto sets = data::classification_names();
        const bool is_set = std::find(sets.begin(), sets.end(), s) != sets.end();
        if (data::is_lm_corpus(s)) return {};
        if (text_only && (is_set || data::is_recall_task(s)))
          return s + " is " + (is_set ? "a classification data set" : "a recall task") + ": give a corpus (" +
                 data::lm_corpus_choices() + ") or a UTF-8 text file or folder";
        if (is_set || data::is_recall_task(s)) return {};
        if (auto why = path_problem(s); !why.empty()) return why;
        std::error_code ec;
        if (std::filesystem::exists(s, ec)) {
          // a FIFO or a device: refused here as --file's are (record read it after loading the model, exit 1: helper-61)
          if (!std::filesystem::is_regular_file(s, ec) && !std::filesystem::is_directory(s, ec))
            return s + ": neither a file nor a folder: give a text file, a folder of .txt files or a data set's name";
          return {};  // the user's text or data set: the stage reads and judges it
        }
        if (ec) return s + ": " + ec.message();         // there, maybe, but not to be looked at (permission denied)
        if (text_only) return "no such file or folder: " + s + ", and no corpus mimic knows (" + data::lm_corpus_choices() + ")";
        std::string names;
        for (const auto& n : sets) names += ", " + n;
        return "no such file or folder: " + s + ", and no data set mimic knows (corpora " + data::lm_corpus_choices() +
               "; classification sets" + names.substr(1) + "; recall tasks mqar[:...], ar[:...])";
      },
      "DATA");
}
}  // namespace

CLI::Validator data_arg() { return data_validator(false); }
CLI::Validator text_data_arg() { return data_validator(true); }

std::string resolve_model_dir(const std::string& arg) {
  if (std::filesystem::is_directory(arg)) return arg;
  for (const models::Family* f : models::families())
    if (!f->tokenizer_asset.empty() && arg == f->tokenizer_asset) return asset_path(arg);
  if (is_embedded_model_name(arg)) return embedded_model_dir(arg);
  // something that exists but is no folder (a file, a FIFO) is named as such, not as missing
  if (std::filesystem::exists(arg))
    fail(arg, ": not a model directory (", std::filesystem::is_regular_file(arg) ? "a file" : "neither a file nor a folder",
         "): give a HF-layout directory (config.json + model.safetensors) or an embedded model name");
  fail("model directory not found: ", arg, " (give a HF-layout directory or an embedded model: ", embedded_model_list(), ")");
}

CLI::Validator model_dir_arg() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (auto why = path_problem(s); !why.empty()) return why;
        try {
          s = resolve_model_dir(s);
          return {};
        } catch (const Error& e) {
          return e.what();
        }
      },
      "DIR|NAME");
}

CLI::Validator split_arg() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        try {
          data::split_from_name(s);
          return {};
        } catch (const Error& e) {
          return e.what();
        }
      },
      "SPLIT");
}

CLI::Validator feature_map_arg() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        try {
          attention::FeatureMapSpec spec;  // a dry build at its default options: the registry's own error, naming the maps
          spec.name = s;
          attention::make_feature_map(spec);
          return {};
        } catch (const Error& e) {
          return e.what();
        }
      },
      "MAP");
}

CLI::Validator attention_spec_arg(bool student) {
  // 64 heads: a head list (mixed's softmax_heads) of any usual model fits; the dry kernel's tensors stay small
  constexpr int64_t kDryHeads = 64;
  return CLI::Validator(
      [student](std::string& s) -> std::string {
        // The model's head dimension is not known here: a spec is refused only when no usual one takes it (taylor of
        // order 3 needs d ≤ 39, so a dry build at d = 64 alone refused it for recall-mini's d = 16); the kernel built
        // for the model checks its own
        std::string first;
        for (const int64_t d : {64, 16, 4}) {
          try {
            if (!student) {
              attention::kernel_from_spec(s, kDryHeads, d);
              return {};
            }
            // what distill::student_spec refuses too, while parsing (it came after the record had loaded: the eighth
            // probe of 2026-11-29)
            auto ks = attention::parse_kind_spec(s);
            if (attention::attention_kind(ks.kind).role != attention::KindRole::Distillable)
              return "the kind '" + ks.kind + "' is the teacher's, not a student's";
            for (const char* key : {"feature_map", "map_options", "gates"})
              if (ks.options.contains(key))
                return std::string("give '") + key + "' with --feature-map, --map-options or --sla, not in the attention spec";
            attention::canonical_options(ks.kind, ks.options, kDryHeads, d);
            return {};
          } catch (const Error& e) {
            if (first.empty()) first = e.what();
          }
        }
        return first;
      },
      "SPEC");
}

}  // namespace mimic::cli
