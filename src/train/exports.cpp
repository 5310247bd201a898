// The exports of a training run (declared in run_state.h): the staged best export, the export book (exports.json) and the
// staging every export is written into before it moves into its folder, and the checks that keep a user's files in
// those folders from being removed or promoted as the run's.
#include "mimic/train/run_state.h"

#include <regex>
#include <set>
#include <system_error>

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/io/atomic_file.h"
#include "mimic/io/output_lock.h"
#include "mimic/models/model.h"

namespace mimic::train::run {

nlohmann::json file_digests(const fs::path& dir) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files[e.path().filename().string()] = io::file_digest(e.path().string());
  return files;
}

void check_best_files(const std::string& out_dir, const Saved& s) {
  for (const auto& [name, digest] : s.best_files.items()) {
    const fs::path in_best = fs::path(out_dir) / "best" / name;
    fs::path f = in_best;
    if (!fs::exists(f)) f = fs::path(out_dir) / name;  // promoted into out_dir (finetune, pretrain)
    // named where the run saved it: the promoted path alone named a file distill's layers never promote (the eighteenth probe)
    MIMIC_CHECK(fs::exists(f), in_best.string(), " is missing: this run saved its best model there (at step ", s.best_step,
                "); --fresh trains again, or give another --out");
    MIMIC_CHECK(io::file_digest(f.string()) == digest.get<std::string>(), f.string(), " is not the file this run saved "
                "(at step ", s.best_step, "; it changed since), so the run's result would not be this run's; --fresh trains "
                "again, or give another --out");
  }
}

void swap_in_staged_best(const std::string& out_dir, const TrainTask& task) {
  const fs::path staged = fs::path(out_dir) / kStagedBest, best = fs::path(out_dir) / "best";
  remove_export_folder(best, task);
  // the book names best.new's files at best before the rename: a kill on either side leaves every file recorded where it lies
  forget_export(out_dir, "best");
  record_export_at(out_dir, kStagedBest, "best");
  fs::rename(staged, best);
  forget_export(out_dir, kStagedBest);
}

void settle_staged_best(const std::string& out_dir, const Saved* s, const TrainTask& task) {
  const fs::path staged = fs::path(out_dir) / kStagedBest;
  std::error_code ec;
  if (!fs::is_directory(staged, ec)) return;
  if (s && !s->best_files.empty() && file_digests(staged) == s->best_files) {
    swap_in_staged_best(out_dir, task);
    return;
  }
  remove_export_folder(staged, task);
  forget_export(out_dir, kStagedBest);
}

namespace {
// A snapshot's folder: step-N (TrainOptions::snapshot_every)
bool is_snapshot(const std::string& name) {
  static const std::regex snapshot(R"(step-(0|[1-9]\d*))");  // as the run names them: step-04 is not one
  return std::regex_match(name, snapshot);
}

bool export_file(const TrainTask& task, const std::string& name) {
  return task.is_export_file ? task.is_export_file(name) : models::is_model_file(name);
}

// A folder the run exports into: best, best.new, last, step-N
bool is_export_folder(const std::string& name) { return name == "best" || name == kStagedBest || name == "last" || is_snapshot(name); }

// Where an export into `folder` is written before its files move there (kStaging)
std::string staging_of(const std::string& folder) { return folder + kStaging; }

// The folder an export staged in `name` moves into, or nullopt where `name` is no staging folder
std::optional<std::string> staged_for(const std::string& name) {
  const std::string suffix = kStaging;
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return std::nullopt;
  std::string folder = name.substr(0, name.size() - suffix.size());
  if (!is_export_folder(folder)) return std::nullopt;
  return folder;
}

std::string book_path(const std::string& out_dir) { return (fs::path(out_dir) / kExports).string(); }

fs::path folder_path(const std::string& out_dir, const std::string& folder) {
  return folder == "." ? fs::path(out_dir) : fs::path(out_dir) / folder;
}

// The files of `dir` an export writes there (the promoted model's in "."), as name → digest
nlohmann::json exported_digests(const fs::path& dir, const TrainTask& task, bool promoted) {
  nlohmann::json files = nlohmann::json::object();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file(ec) || e.is_symlink(ec) || !(promoted ? models::is_model_file(name) : export_file(task, name))) continue;
    files[name] = io::file_digest(e.path().string());
  }
  return files;
}

// The folders out_dir holds that a run exports into (links are not folders of the run's: check_export_folders), and
// "." where the run's best model is promoted into out_dir
std::vector<std::string> export_folders(const std::string& out_dir, const TrainTask& task) {
  std::vector<std::string> folders;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out_dir, ec)) {
    const std::string name = e.path().filename().string();
    if ((is_export_folder(name) || staged_for(name)) && e.is_directory(ec) && !e.is_symlink(ec))
      folders.push_back(name);
  }
  if (task.out_is_model) folders.push_back(".");
  return folders;
}

// nullopt: no book (no run yet, or a run from before it)
std::optional<nlohmann::json> read_book(const std::string& out_dir) {
  const std::string path = book_path(out_dir);
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return std::nullopt;
  const std::string where = path + " (what the run exported)";
  const char* way_out = "; delete it (the run then takes what its export folders hold as its own), or give another --out";
  MIMIC_CHECK(fs::is_regular_file(fs::symlink_status(path, ec)), path, " is not a regular file", way_out);
  nlohmann::json book;
  try {
    book = json_parse(io::read_text_file(path), where);
  } catch (const Error& e) {
    fail(e.what(), way_out);
  }
  MIMIC_CHECK(book.is_object(), where, ": expected a JSON object (folder → files), got ", book.type_name(), way_out);
  for (const auto& [folder, files] : book.items()) {
    MIMIC_CHECK(folder == "." || is_export_folder(folder) || staged_for(folder), where,
                ": ", nlohmann::json(folder).dump(), " is no folder a run exports into", way_out);
    if (files.is_null()) continue;
    MIMIC_CHECK(files.is_object(), where, ": the entry of ", nlohmann::json(folder).dump(), " must be an object (file → digest) or null, got ", files.type_name(), way_out);
    for (const auto& [name, digest] : files.items()) {
      MIMIC_CHECK(!name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos, where,
                  ": the entry of ", nlohmann::json(folder).dump(), " holds a bad file name ", nlohmann::json(name).dump(), way_out);
      MIMIC_CHECK(digest.is_string(), where, ": the entry of ", nlohmann::json(folder).dump(), " gives ", nlohmann::json(name).dump(),
                  " a digest of ", digest.dump(), ", not a string", way_out);
    }
    // a staging records what an export wrote (at least one file, at names the export writes): an entry of none dropped
    // every file of the folder's own entry when it moved in (the seventeenth probe of 2026-11-30)
    if (staged_for(folder))
      MIMIC_CHECK(!files.empty(), where, ": the entry of ", nlohmann::json(folder).dump(), " records no file, where an export wrote some", way_out);
  }
  return book;
}

void write_book(const std::string& out_dir, const nlohmann::json& book) { io::write_text_atomically(book_path(out_dir), book.dump(1) + "\n"); }

// The names the run's exports write, as its finished exports recorded them (every export of a run writes the same
// files), or none before its first: a staging holds files of those names alone. (Any model file's name was taken:
// a GPT-2 tokenizer's files copied beside a recall model's weights in a cut-short staging went with it, exit 0 — the
// eighteenth probe of 2026-11-30.)
std::set<std::string> export_names(const nlohmann::json& book) {
  std::set<std::string> names;
  for (const auto& [folder, files] : book.items())
    if (folder != "." && !staged_for(folder) && files.is_object())
      for (const auto& [name, digest] : files.items()) names.insert(name);
  return names;
}

// `name` is one the run's export writes into a staging: one its finished exports wrote, or before its first any
// the task's export may write
bool staged_name(const TrainTask& task, const std::set<std::string>& names, const std::string& name) {
  return names.empty() ? export_file(task, name) : names.count(name) > 0;
}

// Every file of out_dir/folder at a name the run's exports write is the one the book records there, or one an export
// staged for it records while its files move in. A link at such a name is refused too: the run would replace it
// without a word (the fifteenth probe of 2026-11-30). A staging folder (FOLDER.part) is the run's working space while the
// book records it, and holds nothing but the export's files: those a cut-short export wrote (its entry null), or those
// the book records (a move under way); without an entry it holds nothing the run would remove.
void check_folder_in_book(const std::string& out_dir, const std::string& folder, const nlohmann::json& book, const TrainTask& task) {
  auto records = [&](const std::string& f, const std::string& name, const std::string& digest) {
    const auto it = book.find(f);
    return it != book.end() && it->is_object() && it->contains(name) && (*it)[name] == digest;
  };
  const auto entry = book.find(folder);
  const bool staging = staged_for(folder).has_value();
  const bool cut_short = entry != book.end() && entry->is_null();
  const fs::path dir = folder_path(out_dir, folder);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool exported = folder == "." ? models::is_model_file(name)
                          : staging    ? staged_name(task, export_names(book), name)
                                       : export_file(task, name);
    if (staging) {
      // the seventeenth probe: a model copied into step-N.part/ was removed with it, exit 0
      MIMIC_CHECK(entry != book.end(), e.path().string(), " is not a file this run wrote (", kExports, " records no export staged in ",
                  dir.string(), "): the run would remove it with its staging; move it out of ", dir.string(), ", or give another --out");
      MIMIC_CHECK(exported, e.path().string(), " is not a file of the model this run stages in ", dir.string(),
                  ": the run would remove it with its staging; move it out of the folder, or give another --out");
    }
    if (!exported) continue;
    MIMIC_CHECK(!e.is_symlink(ec), e.path().string(), " is a link, where the run writes its own file: the run would replace it; "
                "remove the link, or give another --out");
    if (!e.is_regular_file(ec)) continue;  // a folder there: refuse_odd_model_file_names names it
    if (cut_short && staging) continue;    // what the export cut short wrote: removed at the start
    // A folder's entry null is a book of the days before exports were staged (an export cut short wrote there
    // directly): its files cannot be told from a model placed there since, and were removed with them (the sixteenth
    // and seventeenth probes)
    MIMIC_CHECK(!cut_short, e.path().string(), " lies in a folder where an export was cut short (", kExports, " records null for ",
                nlohmann::json(folder).dump(), "), so the run cannot tell its files from yours: remove ", dir.string(),
                " if nothing in it is yours, or give another --out");
    const std::string digest = io::file_digest(e.path().string());
    // in ".", a promotion cut short leaves some of best/'s files moved there already
    if (records(folder, name, digest) || (!staging && records(folder == "." ? "best" : staging_of(folder), name, digest))) continue;
    const bool named = entry != book.end() && entry->contains(name);
    fail(e.path().string(), " is not a file this run wrote (", kExports, " records ", named ? "other bytes" : "no such file", " there): ",
         "the run would replace or remove it; move it out of ", dir.string(), ", or give another --out");
  }
}

// Every export folder of a run with an earlier one in out_dir, checked against the book (without an earlier run,
// check_export_folders refuses any folder that holds something), before anything is removed or replaced
void check_export_book(const std::string& out_dir, const TrainTask& task) {
  const auto book = read_book(out_dir);
  if (!book) return;  // a run from before the book: open_export_book adopts what its folders hold
  for (const auto& folder : export_folders(out_dir, task)) check_folder_in_book(out_dir, folder, *book, task);
}
}  // namespace

std::optional<bool> holds_recorded_export(const fs::path& run, const std::string& entry, const fs::path& dir) {
  std::optional<nlohmann::json> book;
  try {
    book = read_book(run.string());
  } catch (const std::exception&) {
    return false;  // a book there that cannot be read (a link, damaged, edited) vouches for nothing: not a refusal
  }
  if (!book) return std::nullopt;
  const auto it = book->find(entry);
  if (it == book->end() || !it->is_object() || it->empty()) return false;
  try {
    for (const auto& [name, digest] : it->items())  // read_book checked each is a name and a string
      if (io::file_digest((dir / name).string()) != digest.get<std::string>()) return false;
  } catch (const std::exception&) {
    return false;  // a file it records is gone, or cannot be read
  }
  return true;
}

void open_export_book(const std::string& out_dir, const TrainTask& task, bool earlier_run) {
  auto book = earlier_run ? read_book(out_dir) : std::nullopt;
  if (book) {
    for (auto it = book->begin(); it != book->end();) {
      const fs::path dir = folder_path(out_dir, it.key());
      std::error_code ec;
      if (it.key() != "." && (!fs::is_directory(dir, ec) || fs::is_symlink(dir, ec))) {
        it = book->erase(it);  // its folder is gone (a kill between a rename or removal and the book's update)
        continue;
      }
      if (it->is_null()) {
        // a book from before exports were staged, its export cut short where nothing is left (check_folder_in_book
        // refused the folder otherwise): the entry goes, and the folder if empty
        if (fs::is_empty(dir, ec)) fs::remove(dir, ec);
        it = book->erase(it);
        continue;
      }
      ++it;
    }
  }
  if (!book) {
    book = nlohmann::json::object();
    // a run from before the book: what its folders hold is taken as its own (the rule before the book)
    if (earlier_run)
      for (const auto& folder : export_folders(out_dir, task)) {
        auto files = exported_digests(folder_path(out_dir, folder), task, folder == ".");
        if (!files.empty()) (*book)[folder] = std::move(files);
      }
  }
  write_book(out_dir, *book);
}

namespace {
// Nothing at a staging's name but the run's own staging: a link, a file, or (while the run trains, when the run's own
// staging went with each export) a folder that holds anything is refused, named alike at the start and at an export
// (the seventeenth probe: a model copied into step-N.part/ while the run trained was removed with it, exit 0)
void refuse_at_staging(const fs::path& dir, bool while_running) {
  std::error_code ec;
  const auto st = fs::symlink_status(dir, ec);
  if (!fs::exists(st)) return;
  const char* way = ": move it out of the way, or give another --out";
  MIMIC_CHECK(!fs::is_symlink(st), dir.string(), " is a link, where the run stages an export before it moves into its folder", way);
  MIMIC_CHECK(fs::is_directory(st), dir.string(), " is not a folder, where the run stages an export before it moves into its folder", way);
  if (!while_running) return;
  MIMIC_CHECK(fs::is_empty(dir, ec), dir.string(), " holds what this run did not write, where it stages an export before it moves into its ",
              "folder", way);
  fs::remove(dir, ec);
}

// The export staged for `folder` (the book records its files) moved there: its files renamed in one by one, then the
// files the folder's own entry records that the new export does not hold removed, then the book's entry replaced. A
// kill anywhere leaves every file recorded where it lies (the folder accepts its staging's files), and the next start
// finishes the move.
void move_staged_export(const std::string& out_dir, const std::string& folder, nlohmann::json& book, const TrainTask& task, bool check) {
  const std::string staging = staging_of(folder);
  const fs::path from = folder_path(out_dir, staging), to = folder_path(out_dir, folder);
  const nlohmann::json files = book[staging];
  std::error_code ec;
  // at a start, every file it records lies in the staging or in the folder with those bytes: a hand-edited entry moved
  // files the export never wrote and dropped the folder's own (the seventeenth probe). (Right after the export, the
  // book was just written from what the staging holds.)
  if (check)
    for (const auto& item : files.items()) {
      const std::string& name = item.key();
      const auto is = [&](const fs::path& f) {
        return fs::is_regular_file(f, ec) && !fs::is_symlink(f, ec) && io::file_digest(f.string()) == item.value();
      };
      MIMIC_CHECK(staged_name(task, export_names(book), name) && (is(from / name) || is(to / name)), book_path(out_dir), " (what the run exported): the entry of ",
                  nlohmann::json(staging).dump(), " records ", nlohmann::json(name).dump(), ", which is no file of its export in ",
                  from.string(), " or ", to.string(), "; delete the book (the run then takes what its export folders hold as its own), or ",
                  "give another --out");
    }
  if (fs::is_directory(from, ec)) {
    clear_link_at_export(to.string());  // last → "." of an earlier stage (check_export_folders refuses any other link)
    fs::create_directories(to);
    for (const auto& [name, digest] : files.items())
      if (fs::is_regular_file(from / name, ec)) io::move_file_durably((from / name).string(), (to / name).string());
  }
  if (const auto old = book.find(folder); old != book.end() && old->is_object())
    for (const auto& [name, digest] : old->items())
      if (!files.contains(name) && fs::is_regular_file(to / name, ec) && !fs::is_symlink(to / name, ec)) fs::remove(to / name);
  book[folder] = files;
  book.erase(staging);
  write_book(out_dir, book);
  // what is left in the staging is no file of the export (one copied there while it wrote: removed with the staging,
  // exit 0 — the eighteenth probe): named, and kept
  for (const auto& e : fs::directory_iterator(from, ec))
    fail(e.path().string(), " is not a file of the export this run staged in ", from.string(), " (it appeared there while the run ",
         "exported): move it out of the folder, and run the command again");
  fs::remove(from, ec);
}
}  // namespace

void refuse_foreign_files_in_export_folders(const std::string& dir, const TrainTask& task) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string folder = e.path().filename().string();
    if (!e.is_directory(ec) || e.is_symlink(ec) || !(is_export_folder(folder) || staged_for(folder))) continue;
    for (const auto& f : fs::directory_iterator(e.path(), ec))
      MIMIC_CHECK(export_file(task, f.path().filename().string()) && f.is_regular_file(ec) && !f.is_symlink(ec), f.path().string(),
                  " is not a file the run exported there: the run's files would go and it would stay; move it out of ",
                  e.path().string(), " first");
  }
}

void settle_staged_exports(const std::string& out_dir, const TrainTask& task) {
  auto book = read_book(out_dir);
  if (!book) return;  // a run from before the book: nothing staged
  std::vector<std::string> staged;
  for (const auto& [name, files] : book->items())
    if (staged_for(name)) staged.push_back(name);
  for (const auto& name : staged) {
    const std::string folder = *staged_for(name);
    if ((*book)[name].is_null()) {
      // an export cut short while it wrote: what it left is the run's (it exports there again when its step comes)
      remove_export_folder(folder_path(out_dir, name), task);
      book->erase(name);
      write_book(out_dir, *book);
    } else {
      move_staged_export(out_dir, folder, *book, task, /*check=*/true);  // written whole: its move finished
    }
  }
  // a kill after the book dropped a staging's entry, before its (empty) folder went
  std::error_code ec;
  for (const auto& folder : export_folders(out_dir, task))
    if (staged_for(folder) && !book->contains(folder) && fs::is_empty(folder_path(out_dir, folder), ec)) fs::remove(folder_path(out_dir, folder), ec);
}

nlohmann::json export_recorded(const std::string& out_dir, const std::string& folder, const TrainTask& task) {
  auto book = read_book(out_dir).value_or(nlohmann::json::object());
  // what is there now: a model copied into a folder the run had not reached yet was overwritten (the fifteenth probe)
  check_folder_in_book(out_dir, folder, book, task);
  // Written into a staging folder first, recorded null while it is written and its digests once it is whole, then moved
  // in: an export written straight into the folder, cut short, left files the next start could not tell from a model
  // placed there after the kill, and removed that too (the sixteenth probe of 2026-11-30).
  const std::string staging = staging_of(folder);
  refuse_at_staging(folder_path(out_dir, staging), /*while_running=*/true);
  book[staging] = nullptr;
  write_book(out_dir, book);
  task.export_model(folder_path(out_dir, staging).string());
  auto files = exported_digests(folder_path(out_dir, staging), task, /*promoted=*/false);
  // a file copied into the staging while the export wrote there, at a name the run's exports do not write, is left
  // there and named below (recorded, it was moved into the folder as the run's)
  const auto names = export_names(book);
  for (auto it = files.begin(); it != files.end();) it = staged_name(task, names, it.key()) ? std::next(it) : files.erase(it);
  book[staging] = files;
  write_book(out_dir, book);
  move_staged_export(out_dir, folder, book, task, /*check=*/false);
  return files;
}

void forget_export(const std::string& out_dir, const std::string& folder) {
  auto book = read_book(out_dir);
  if (!book || !book->contains(folder)) return;
  book->erase(folder);
  write_book(out_dir, *book);
}

void record_export_at(const std::string& out_dir, const std::string& from, const std::string& to) {
  auto book = read_book(out_dir);
  if (!book || !book->contains(from) || !(*book)[from].is_object()) return;
  auto& into = (*book)[to];
  if (!into.is_object()) into = nlohmann::json::object();
  into.update((*book)[from]);
  write_book(out_dir, *book);
}

void check_export_folders(const std::string& out_dir, const TrainTask& task, bool earlier_run) {
  // The folders the run exports into are its own: a link there is the user's, and was removed without a word (the
  // eleventh probe of 2026-11-30: a link named best), and a link at a snapshot's step-N/ was written through: the model
  // it named — the run's own --config model too — was replaced, exit 0 (the twelfth probe). The one link mimic makes
  // is last → "." (a finished run whose last step was its best: trainer.cpp).
  const auto exported = [&](const std::string& name) { return export_file(task, name); };
  std::error_code ec;
  // the run's own files: a link there was replaced by a file (the checkpoint, the export book) or appended through (the
  // log) without a word (the sixteenth probe of 2026-11-30)
  for (const char* name : {kCheckpoint, "log.jsonl", kExports})
    MIMIC_CHECK(!fs::is_symlink(fs::path(out_dir) / name, ec), (fs::path(out_dir) / name).string(), " is a link, where the run keeps its ",
                "own file: remove the link, or give another --out");
  // and with no run there yet, a file at the book's name that is no book is the user's: it was replaced by the run's.
  // (A book there is a run's killed as its fresh start replaced the log.)
  if (!earlier_run && fs::exists(fs::symlink_status(fs::path(out_dir) / kExports, ec))) {
    try {
      read_book(out_dir);
    } catch (const Error&) {
      fail((fs::path(out_dir) / kExports).string(), " is no export book of a run in ", out_dir, " (there is none yet: no checkpoint or ",
           "log), where the run keeps its own: move it out of the way, or give another --out");
    }
  }
  for (const auto& e : fs::directory_iterator(out_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (staged_for(name)) {
      refuse_at_staging(e.path(), /*while_running=*/false);
      // and with no run yet, a staging is nobody's the run knows; with one, check_export_book checks what it holds
      MIMIC_CHECK(earlier_run || fs::is_empty(e.path(), ec), e.path().string(), " holds what no run in ", out_dir, " wrote (there is none ",
                  "yet: no checkpoint or log), where this run stages an export before it moves into its folder: move it out of the way, ",
                  "or give another --out");
      continue;
    }
    if (!is_export_folder(name)) continue;
    const bool step = is_snapshot(name);
    const char* what = step ? "a snapshot" : name == "last" ? "its last model" : "its best model";
    if (e.is_symlink(ec)) {
      const fs::path target = fs::read_symlink(e.path(), ec);
      MIMIC_CHECK(name == "last" && target == ".", e.path().string(), " is a link (to ", target.string(), "), where the run exports ",
                  what, ": remove the link, or give another --out");
      continue;
    }
    // a file or a FIFO there stopped the run only at its export, with a message naming another path (the thirteenth probe)
    MIMIC_CHECK(e.is_directory(ec), e.path().string(), " is not a folder, where the run exports ", what,
                ": move it out of the way, or give another --out");
    if (!earlier_run && !fs::is_empty(e.path(), ec))
      fail(e.path().string(), " holds what no run in ", out_dir, " wrote (there is none yet: no checkpoint or log), where this run ",
           "exports ", what, ": move it out of the way, or give another --out");
    // another command writing there now (an export into OUT/last started just before this run): its lock, taken before
    // it looked for a run above it, is seen here, after this run took OUT's (the fourteenth probe of 2026-11-30)
    MIMIC_CHECK(!io::held_by_another(e.path().string()), e.path().string(), " is being written by another running mimic command, ",
                "where this run exports ", what, ": wait for it to finish, or give another --out");
    // the names the run's model files take: a folder or a dangling link at one stopped the run at its end, or stayed
    // beside the model it broke (the eleventh and twelfth probes); another command's file at a weights name (the
    // fourteenth)
    models::refuse_odd_model_file_names(e.path().string(), exported);
  }
  models::refuse_odd_model_file_names(out_dir, exported);  // the best model is promoted into --out itself
  if (earlier_run) check_export_book(out_dir, task);
  // and --out itself, where finetune and pretrain promote the best model: with no run there yet, a file at a model's
  // name is nobody's the run knows (a fresh start removed model.safetensors, shards, tokenizer files: the fifteenth probe)
  if (!earlier_run && task.out_is_model)
    for (const auto& e : fs::directory_iterator(out_dir, ec))
      MIMIC_CHECK(!models::is_model_file(e.path().filename().string()), e.path().string(), " holds what no run in ", out_dir,
                  " wrote (there is none yet: no checkpoint or log), where this run promotes its best model: move it out of the way, "
                  "or give another --out");
  for (const char* name : {"best", kStagedBest}) {
    const fs::path dir = fs::path(out_dir) / name;
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& e : fs::directory_iterator(dir))
      MIMIC_CHECK(e.is_regular_file() && export_file(task, e.path().filename().string()), e.path().string(),
                  " is not a file of the model this run exports there, and the run would remove or promote it: move it "
                  "out of ", dir.string(), " first");
  }
}

void check_before_promotion(const std::string& out_dir) {
  if (const auto book = read_book(out_dir)) check_folder_in_book(out_dir, ".", *book, TrainTask{});
}

void clear_link_at_export(const std::string& dir) {
  std::error_code ec;
  if (fs::is_symlink(dir, ec)) fs::remove(dir);
}

void remove_export_folder(const fs::path& dir, const TrainTask& task) {
  std::error_code ec;
  if (fs::is_symlink(dir, ec)) {
    fs::remove(dir);
    return;
  }
  if (!fs::is_directory(dir, ec)) return;
  std::vector<fs::path> written;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file(ec) && !e.is_symlink(ec) && export_file(task, e.path().filename().string())) written.push_back(e.path());
  for (const auto& f : written) fs::remove(f);
  for (const auto& e : fs::directory_iterator(dir))
    fail(dir.string(), " holds ", e.path().filename().string(), ", which is not a file of the model this run exported there; "
         "move it out of the folder and run the command again");
  fs::remove(dir);
}

void remove_earlier_exports(const std::string& out_dir, const TrainTask& task) {
  std::vector<fs::path> gone;
  for (const auto& e : fs::directory_iterator(out_dir)) {
    const std::string name = e.path().filename().string();
    if (name == "last" || (e.is_directory() && !e.is_symlink() && is_snapshot(name))) gone.push_back(e.path());
  }
  // Only what mimic wrote there goes (a model's files); a folder left empty goes too. Files of the user's own in
  // last/ or step-N/ stay, and so do folders that hold them: remove_all took notes and whatever an export had put
  // inside (the sixth probe of 2026-11-28).
  for (const auto& p : gone) {
    std::error_code ec;
    if (fs::is_symlink(p)) {
      fs::remove(p);
      continue;
    }
    // the files the run's export writes: a model's (remove_model_files: its shards and tokenizer files too), or the task's
    // own (distill's layers export kernel.safetensors, which stayed and then stopped the fresh layer's run)
    if (task.is_export_file) {
      for (const auto& e : fs::directory_iterator(p, ec))
        if (e.is_regular_file(ec) && !e.is_symlink(ec) && task.is_export_file(e.path().filename().string())) fs::remove(e.path());
    } else {
      models::remove_model_files(p.string());
    }
    if (fs::is_empty(p, ec)) fs::remove(p, ec);
  }
  for (const auto& p : gone) forget_export(out_dir, p.filename().string());
}
}  // namespace mimic::train::run
