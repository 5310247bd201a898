// The training engine on a tiny model: it learns, resumes bit-exactly, stops on non-finite values.
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>

#include "mimic/core/json_keys.h"
#include "mimic/io/atomic_file.h"
#include "mimic/io/safetensors.h"
#include "mimic/pretrain/pretrain.h"
#include "test_util.h"
#include "mimic/train/optimizer.h"
#include "mimic/train/trainer.h"

using namespace mimic::train;
using mimic::test::TempDir;

namespace {

// A small MLP with dropout (so the RNG state matters) fitting y = sin(x·w) from a deterministic stream.
struct Toy {
  torch::nn::Sequential net{torch::nn::Linear(8, 32), torch::nn::Tanh(), torch::nn::Dropout(0.1), torch::nn::Linear(32, 1)};
  int64_t position = 0;  // data stream position
  int64_t calls = 0;
  int64_t crash_at_call = -1;   // simulate a kill
  int64_t nan_at_call = -1;     // inject a NaN loss
  at::Tensor w = torch::linspace(-1, 1, 8);

  std::pair<at::Tensor, at::Tensor> batch(int64_t pos) const {
    auto g = at::detail::createCPUGenerator(1000 + pos);
    auto x = at::randn({16, 8}, g);
    return {x, torch::sin(x.matmul(w)).unsqueeze(1)};
  }
  TrainTask task() {
    TrainTask t;
    for (auto& p : net->named_parameters()) t.params.emplace_back(p.key(), p.value());
    t.micro_batch_loss = [this]() {
      if (calls++ == crash_at_call) throw std::runtime_error("simulated kill");
      auto [x, y] = batch(position++);
      auto loss = torch::mse_loss(net->forward(x), y);
      if (calls - 1 == nan_at_call) loss = loss * std::nan("");
      return loss;
    };
    t.evaluate = [this]() {
      auto [x, y] = batch(-1);
      return torch::mse_loss(net->forward(x), y).item<double>();
    };
    t.set_training = [this](bool on) { net->train(on); };
    t.data_state = [this]() { return nlohmann::json{{"position", position}}; };
    t.restore_data_state = [this](const nlohmann::json& j) { position = j["position"].get<int64_t>(); };
    t.export_model = [this](const std::string& dir) {
      std::vector<std::pair<std::string, at::Tensor>> ts;
      for (auto& p : net->named_parameters()) ts.emplace_back(p.key(), p.value());
      mimic::io::save_safetensors(dir + "/model.safetensors", ts);
    };
    return t;
  }
};

TrainOptions options(const std::string& dir, int64_t steps) {
  TrainOptions o;
  o.steps = steps;
  o.warmup = 5;
  o.lr = 1e-2;
  o.adam.weight_decay = 0.01;
  o.eval_every = 10;
  o.checkpoint_every = 5;
  o.log_every = 5;
  o.grad_accum = 2;
  o.out_dir = dir;
  o.progress = false;
  o.fingerprint = {{"toy", 1}};
  return o;
}

// A 5-seeded toy trained without interruption in `dir`: what a run killed and resumed must end as.
TrainResult uninterrupted_run(const TempDir& dir, int64_t steps) {
  torch::manual_seed(5);
  Toy whole;
  auto plain = whole.task();
  return train(plain, options(dir.path().string(), steps));
}

// The toy's task with `plant` called before each micro-batch until it returns true: something placed in the run's
// folder while the run trains, after the start's checks
TrainTask planting_task(Toy& toy, const std::function<bool()>& plant) {
  auto task = toy.task();
  auto planted = std::make_shared<bool>(false);
  task.micro_batch_loss = [inner = task.micro_batch_loss, plant, planted]() {
    if (!*planted) *planted = plant();
    return inner();
  };
  return task;
}

std::vector<at::Tensor> weights(Toy& t) {
  std::vector<at::Tensor> out;
  for (auto& p : t.net->parameters()) out.push_back(p.detach().clone());
  return out;
}

}  // namespace

TEST(TrainEngine, TinyModelOverfits) {
  TempDir dir;
  torch::manual_seed(0);
  Toy toy;
  auto task = toy.task();
  double before = task.evaluate();
  auto r = train(task, options(dir.path().string(), 200));
  EXPECT_LT(r.last_eval, before / 10) << "before " << before << " after " << r.last_eval;
  EXPECT_TRUE(std::filesystem::exists(dir.file("best/model.safetensors")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("last/model.safetensors")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("log.jsonl")));
}

TEST(TrainEngine, ResumeAfterKillIsBitIdentical) {
  TempDir a, b;
  torch::manual_seed(1);
  Toy full;
  auto full_task = full.task();
  train(full_task, options(a.path().string(), 30));

  torch::manual_seed(1);
  Toy killed;
  killed.crash_at_call = 2 * 17 + 1;  // dies inside step 18 (2 micro-batches per step), after the step-15 checkpoint
  auto killed_task = killed.task();
  EXPECT_THROW(train(killed_task, options(b.path().string(), 30)), std::runtime_error);

  // "Restart the same command": a new process state (model re-initialised with another seed, stream at 0).
  torch::manual_seed(999);
  Toy resumed;
  auto resumed_task = resumed.task();
  auto r = train(resumed_task, options(b.path().string(), 30));
  EXPECT_EQ(r.resumed_from, 15);
  auto w1 = weights(full), w2 = weights(resumed);
  ASSERT_EQ(w1.size(), w2.size());
  for (size_t i = 0; i < w1.size(); ++i) EXPECT_TRUE(torch::equal(w1[i], w2[i])) << "parameter " << i;
  EXPECT_EQ(full.position, resumed.position);
  // The resumed log has each step once.
  auto log = mimic::test::read_bytes(b.file("log.jsonl"));
  auto full_log = mimic::test::read_bytes(a.file("log.jsonl"));
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), std::count(full_log.begin(), full_log.end(), '\n'));
  // A checkpoint from other settings is refused.
  auto o = options(b.path().string(), 40);
  o.fingerprint = {{"toy", 2}};
  EXPECT_MIMIC_ERROR(train(resumed_task, o), "other settings: toy (1 then, 2 now)");
}

// --precision bf16 (CPU autocast here): the toy still learns, on other numbers than fp32's; its weights stay float;
// the checkpoint of a bf16 run resumes as bf16 only — precision is part of its settings.
TEST(TrainEngine, ABf16RunLearnsKeepsFloatWeightsAndResumesOnlyAsBf16) {
  TempDir dir, fp32_dir;
  torch::manual_seed(0);
  Toy toy;
  auto task = toy.task();
  const double before = task.evaluate();
  auto o = options(dir.path().string(), 200);
  o.precision = mimic::Precision::Bf16;
  auto r = train(task, o);
  EXPECT_LT(r.last_eval, before / 10) << "before " << before << " after " << r.last_eval;
  for (const auto& p : toy.net->parameters()) EXPECT_EQ(p.scalar_type(), at::kFloat);
  torch::manual_seed(0);
  Toy full;
  auto full_task = full.task();
  const auto fr = train(full_task, options(fp32_dir.path().string(), 200));
  std::printf("toy validation loss: %.4f before, %.4f after 200 steps in fp32, %.4f in bf16\n", before, fr.last_eval, r.last_eval);
  EXPECT_FALSE(torch::equal(weights(toy)[0], weights(full)[0])) << "bf16 trained exactly as fp32 did: autocast did not act";

  auto longer = options(dir.path().string(), 220);  // fp32: another run
  EXPECT_MIMIC_ERROR(train(task, longer), "other settings: precision (\"bf16\" then, the default \"fp32\" now)");
  longer.precision = mimic::Precision::Bf16;
  EXPECT_EQ(train(task, longer).resumed_from, 200);
}

// Found while writing the crash-safety soak (bench/soak.sh): a run killed after its final checkpoint but before it exported
// last/ left no last/, and the rerun, finding the checkpoint at the final step, returned without exporting it.
TEST(TrainEngine, ARunKilledBetweenItsLastCheckpointAndTheExportOfLastExportsItOnRerun) {
  TempDir a, b;
  torch::manual_seed(3);
  Toy full;
  auto full_task = full.task();
  train(full_task, options(a.path().string(), 20));

  torch::manual_seed(3);
  Toy killed;
  auto killed_task = killed.task();
  auto export_model = killed_task.export_model;
  killed_task.export_model = [&](const std::string& dir) {
    // last/ is written into last.part/ before it moves in (run_state.h's kStaging)
    if (std::filesystem::path(dir).filename() == "last.part") throw std::runtime_error("killed before exporting last/");
    export_model(dir);
  };
  EXPECT_THROW(train(killed_task, options(b.path().string(), 20)), std::runtime_error);
  ASSERT_FALSE(std::filesystem::exists(b.file("last/model.safetensors")));

  torch::manual_seed(999);  // the rerun: a new process, another initialisation
  Toy rerun;
  auto rerun_task = rerun.task();
  auto r = train(rerun_task, options(b.path().string(), 20));
  EXPECT_EQ(r.resumed_from, 20);
  // it trained nothing, and says so rather than a last loss and a speed of 0 (the probe of 2026-11-27)
  EXPECT_TRUE(r.finished_earlier);
  EXPECT_TRUE(std::isnan(r.last_loss));
  EXPECT_EQ(r.tokens_per_second, 0);
  ASSERT_TRUE(std::filesystem::exists(b.file("last/model.safetensors")));
  EXPECT_EQ(mimic::test::read_bytes(b.file("last/model.safetensors")), mimic::test::read_bytes(a.file("last/model.safetensors")));
}

// A rerun of a finished run reports that run's result (finetune and pretrain score the model in --out): when the
// best model's files changed or went missing after the run, it says so instead (the probe of 2026-11-27: a model
// copied over a finished run's folder was scored as the run's).
TEST(TrainEngine, ARerunOfAFinishedRunRefusesABestModelChangedSinceItFinished) {
  TempDir dir;
  torch::manual_seed(5);
  Toy toy;
  auto task = toy.task();
  train(task, options(dir.path().string(), 20));
  const std::string best = dir.file("best/model.safetensors");
  ASSERT_TRUE(std::filesystem::exists(best));
  EXPECT_TRUE(train(task, options(dir.path().string(), 20)).finished_earlier);  // untouched: accepted

  const auto bytes = mimic::test::read_bytes(best);
  auto changed = bytes;
  changed[changed.size() - 1] ^= 1;  // one bit of the last weight
  mimic::test::write_bytes(best, changed);
  EXPECT_MIMIC_ERROR(train(task, options(dir.path().string(), 20)),
                     "best/model.safetensors is not a file this run wrote (exports.json records other bytes there)");
  // promoted into the folder (as finetune does), the same bytes are found there
  std::filesystem::rename(best, dir.file("model.safetensors"));
  EXPECT_MIMIC_ERROR(train(task, options(dir.path().string(), 20)), "model.safetensors is not the file this run saved");
  mimic::test::write_bytes(dir.file("model.safetensors"), bytes);
  EXPECT_TRUE(train(task, options(dir.path().string(), 20)).finished_earlier);
  std::filesystem::remove(dir.file("model.safetensors"));
  EXPECT_MIMIC_ERROR(train(task, options(dir.path().string(), 20)), dir.file("best/model.safetensors") + " is missing");
}

// A run killed after a best export and before the checkpoint that follows it resumes from its last checkpoint (the
// resume refused a best/ newer than that checkpoint once, which made the run unresumable: the fourth probe of
// 2026-11-27; the export now waits in best.new/ until a checkpoint records it). The resumed run evaluates again and
// ends where an uninterrupted run ends.
TEST(TrainEngine, ARunKilledBetweenABestExportAndItsCheckpointResumes) {
  TempDir a, b;
  const auto uninterrupted = uninterrupted_run(a, 40);
  torch::manual_seed(5);
  Toy toy;
  auto task = toy.task();
  int exports = 0;
  const auto export_model = task.export_model;
  task.export_model = [&](const std::string& d) {
    export_model(d);
    if (++exports == 2) throw std::runtime_error("killed after the export");  // the second best, before its checkpoint
  };
  EXPECT_THROW(train(task, options(b.path().string(), 40)), std::runtime_error);
  auto resumed_task = toy.task();
  const auto r = train(resumed_task, options(b.path().string(), 40));
  EXPECT_GT(r.resumed_from, 0);
  EXPECT_EQ(r.steps, 40);
  EXPECT_EQ(r.best_step, uninterrupted.best_step);
  EXPECT_EQ(mimic::test::read_bytes(b.file("best/model.safetensors")), mimic::test::read_bytes(a.file("best/model.safetensors")));
  // the evaluation schedule decides the best step: another one is another run (it was resumed, the probe of 2026-11-27)
  auto other = options(b.path().string(), 40);
  other.eval_every = 5;
  EXPECT_MIMIC_ERROR(train(resumed_task, other), "was written with other settings: eval_every (10 then, 5 now)");
}

// Edits a run folder's export book (run_state.h's kExports) as a kill at some point would have left it
namespace {
void edit_export_book(const TempDir& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto book = nlohmann::json::parse(mimic::test::read_bytes(dir.file("exports.json")));
  edit(book);
  mimic::test::write_bytes(dir.file("exports.json"), book.dump());
}
}  // namespace

// best/ changes only after the checkpoint that records it, so an unfinished run's resume checks it: a model copied
// into it is refused (it was promoted as the run's result: issue 38). A run killed after that checkpoint and before
// the swap finds its export in best.new/ and swaps it in; a best.new/ no checkpoint records is removed.
TEST(TrainEngine, AnUnfinishedRunsResumeRefusesAForeignBestModelAndFinishesACutShortSwap) {
  TempDir a, b;
  const auto uninterrupted = uninterrupted_run(a, 40);
  torch::manual_seed(5);
  Toy toy;
  auto task = toy.task();
  auto half = options(b.path().string(), 40);
  half.stop_after = 20;
  ASSERT_TRUE(train(task, half).stopped);
  const std::string best = b.file("best/model.safetensors");
  ASSERT_TRUE(std::filesystem::exists(best));
  EXPECT_FALSE(std::filesystem::exists(b.file("best.new")));
  const auto bytes = mimic::test::read_bytes(best);
  auto changed = bytes;
  changed[changed.size() - 1] ^= 1;
  mimic::test::write_bytes(best, changed);
  EXPECT_MIMIC_ERROR(train(task, half), "best/model.safetensors is not a file this run wrote (exports.json records other bytes there)");
  mimic::test::write_bytes(best, bytes);
  // the checkpoint's digests are checked too (a run from before the export book: none, and it adopts what is there)
  const auto book = mimic::test::read_bytes(b.file("exports.json"));
  std::filesystem::remove(b.file("exports.json"));
  mimic::test::write_bytes(best, changed);
  EXPECT_MIMIC_ERROR(train(task, half), "best/model.safetensors is not the file this run saved (at step 20");
  EXPECT_FALSE(std::filesystem::exists(b.file("exports.json"))) << "a refused run adopted what it refused";
  mimic::test::write_bytes(best, bytes);
  mimic::test::write_bytes(b.file("exports.json"), book);
  // killed between the checkpoint and the swap: best/ gone, its replacement staged, as the export book records it
  std::filesystem::rename(b.file("best"), b.file("best.new"));
  edit_export_book(b, [](nlohmann::json& book) { book["best.new"] = book["best"]; book.erase("best"); });
  auto resumed = toy.task();
  auto r = train(resumed, half);
  EXPECT_EQ(r.resumed_from, 20);
  EXPECT_EQ(mimic::test::read_bytes(best), bytes);
  // a staged export no checkpoint records (killed before its checkpoint: the book holds it, or null where the export
  // itself was cut short) is removed; one the book does not hold either is nobody's the run knows, and is refused
  std::filesystem::create_directories(b.file("best.new"));
  mimic::test::write_bytes(b.file("best.new/model.safetensors"), "not recorded");
  EXPECT_MIMIC_ERROR(train(task, half), "best.new/model.safetensors is not a file this run wrote (exports.json records no such file there)");
  // a book of the days before exports were staged, its entry null: refused, the run cannot tell its files from yours
  edit_export_book(b, [](nlohmann::json& book) { book["best.new"] = nullptr; });
  EXPECT_MIMIC_ERROR(train(task, half), "best.new/model.safetensors lies in a folder where an export was cut short");
  // today's: an export cut short in its staging (best.new.part, its entry null) is the run's, and goes
  std::filesystem::rename(b.file("best.new"), b.file("best.new.part"));
  edit_export_book(b, [](nlohmann::json& book) { book.erase("best.new"); book["best.new.part"] = nullptr; });
  auto rest = toy.task();
  r = train(rest, options(b.path().string(), 40));
  EXPECT_EQ(r.steps, 40);
  EXPECT_FALSE(std::filesystem::exists(b.file("best.new")));
  EXPECT_FALSE(std::filesystem::exists(b.file("best.new.part")));
  EXPECT_EQ(r.best_step, uninterrupted.best_step);
  EXPECT_EQ(mimic::test::read_bytes(best), mimic::test::read_bytes(a.file("best/model.safetensors")));
}

// A fresh run's folder holds its own exports alone: --fresh kept an earlier run's last/ and step-N/ snapshots (the
// fifth probe of 2026-11-27: GPT-2 snapshots beside a BERT run). A folder of your own there is kept.
TEST(TrainEngine, AFreshRunRemovesTheLastAndSnapshotsAnEarlierRunExported) {
  TempDir dir;
  torch::manual_seed(5);
  Toy toy;
  auto task = toy.task();
  auto o = options(dir.path().string(), 20);
  o.snapshot_every = 10;
  o.keep_last = true;
  train(task, o);
  ASSERT_TRUE(std::filesystem::exists(dir.file("step-10/model.safetensors")));
  ASSERT_TRUE(std::filesystem::exists(dir.file("last")));
  std::filesystem::create_directories(dir.file("step-notes"));
  // a name the run never writes (it writes step-4, not step-04) is not its snapshot: another's copy there stays
  std::filesystem::create_directories(dir.file("step-04"));
  mimic::test::write_bytes(dir.file("step-04/model.safetensors"), "a copy");
  // the user's own files inside a snapshot stay, and so does the folder that holds them (remove_all took them: the
  // sixth probe of 2026-11-28)
  mimic::test::write_bytes(dir.file("step-20/notes.txt"), "mine");
  auto fresh = options(dir.path().string(), 5);
  fresh.fresh = true;
  fresh.keep_last = false;
  auto again = toy.task();
  train(again, fresh);
  EXPECT_FALSE(std::filesystem::exists(dir.file("step-10")));
  EXPECT_EQ(mimic::test::read_bytes(dir.file("step-20/notes.txt")), "mine");
  EXPECT_FALSE(std::filesystem::exists(dir.file("step-20/model.safetensors")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("last")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("step-notes")));
  EXPECT_EQ(mimic::test::read_bytes(dir.file("step-04/model.safetensors")), "a copy");
  EXPECT_TRUE(std::filesystem::exists(dir.file("best/model.safetensors")));
}

// A model copied by hand into a finished run's export folders — best/, last/, a step-N/ snapshot, or over the model
// promoted into the folder itself — is not the run's: a rerun replaced it and --fresh removed it, exit 0 (the fourteenth
// probe of 2026-11-30). The export book records the bytes the run wrote there; anything else is refused and left as it
// is, and the run's own exports are still the run's to replace and remove.
TEST(TrainEngine, AModelCopiedByHandIntoAFinishedRunsExportFoldersIsRefusedNotReplacedOrRemoved) {
  // a 20-step toy run with a snapshot at 10 and last/ kept; `promote`: its best model promoted into the folder
  auto run = [](const TempDir& dir, bool fresh, bool promote, int seed) {
    torch::manual_seed(seed);
    Toy toy;
    auto task = toy.task();
    task.out_is_model = true;
    auto o = options(dir.path().string(), 20);
    o.snapshot_every = 10;
    o.keep_last = true;
    o.fresh = fresh;
    train(task, o);
    if (promote) promote_best(dir.path().string());
  };
  TempDir other;
  run(other, false, false, 6);
  const auto theirs = mimic::test::read_bytes(other.file("step-10/model.safetensors"));
  for (const std::string sub : {"best", "last", "step-10", "."}) {
    for (const bool fresh : {false, true}) {
      TempDir dir;
      const bool promote = sub == ".";
      run(dir, false, promote, 5);
      const std::string copied = sub == "." ? dir.file("model.safetensors") : dir.file(sub + "/model.safetensors");
      ASSERT_TRUE(std::filesystem::exists(copied)) << sub;
      run(dir, false, promote, 5);  // untouched: the rerun accepts its own exports
      mimic::test::write_bytes(copied, theirs);
      EXPECT_MIMIC_ERROR(run(dir, fresh, promote, 5), copied + " is not a file this run wrote (exports.json records other bytes there)");
      EXPECT_EQ(mimic::test::read_bytes(copied), theirs) << sub << (fresh ? " --fresh" : "");
    }
  }
  // a file at a name the run's export writes, which the run never wrote there (a model copied into a snapshot of its own)
  TempDir dir;
  run(dir, false, false, 5);
  mimic::test::write_bytes(dir.file("step-10/config.json"), "{}");
  EXPECT_MIMIC_ERROR(run(dir, true, false, 5), dir.file("step-10/config.json") + " is not a file this run wrote (exports.json records no such file there)");
  std::filesystem::remove(dir.file("step-10/config.json"));
  // the run's own exports, untouched, a fresh start removes (and the book forgets)
  run(dir, true, false, 5);
  EXPECT_TRUE(std::filesystem::exists(dir.file("step-10/model.safetensors")));
  const auto book = nlohmann::json::parse(mimic::test::read_bytes(dir.file("exports.json")));
  EXPECT_EQ(book["step-10"]["model.safetensors"], mimic::io::file_digest(dir.file("step-10/model.safetensors")));
  EXPECT_FALSE(book.contains("best.new"));
}

// The fifteenth probe of 2026-11-30, against the export book: what the book cannot vouch for is refused, before the
// run trains or at the export it would have replaced — a model at a model's name in a folder with no run yet, another
// command's file at the checkpoint's name (the refusal said --fresh, which replaced it), a link at an export's file
// name, a model copied into a snapshot's folder while the run trains; and an export cut short is settled at the next
// start (its null entry stayed for good where the resume took another --snapshot-every).
TEST(TrainEngine, WhatTheExportBookCannotVouchForIsRefusedAndACutShortExportIsSettled) {
  auto run = [](const TempDir& dir, bool fresh, int64_t snapshot_every = 10) {
    torch::manual_seed(5);
    Toy toy;
    auto task = toy.task();
    task.out_is_model = true;
    auto o = options(dir.path().string(), 20);
    o.snapshot_every = snapshot_every;
    o.keep_last = true;
    o.fresh = fresh;
    return train(task, o);
  };
  TempDir other;
  run(other, false);
  const auto theirs = mimic::test::read_bytes(other.file("step-10/model.safetensors"));
  for (const bool fresh : {false, true}) {
    {  // a model in a folder with no run
      TempDir dir;
      mimic::test::write_bytes(dir.file("model.safetensors"), theirs);
      EXPECT_MIMIC_ERROR(run(dir, fresh), dir.file("model.safetensors") + " holds what no run in");
      EXPECT_EQ(mimic::test::read_bytes(dir.file("model.safetensors")), theirs);
      // and a file of the user's at the book's name (it was replaced by the run's)
      std::filesystem::remove(dir.file("model.safetensors"));
      mimic::test::write_bytes(dir.file("exports.json"), "{\"mine\": 1}");
      EXPECT_MIMIC_ERROR(run(dir, fresh), dir.file("exports.json") + " is no export book of a run in");
      EXPECT_EQ(mimic::test::read_bytes(dir.file("exports.json")), "{\"mine\": 1}");
    }
    {  // another command's file at the checkpoint's name: a model's weights, maps
      TempDir dir;
      run(dir, false);
      mimic::test::write_bytes(dir.file("checkpoint.safetensors"), theirs);
      EXPECT_MIMIC_ERROR(run(dir, fresh), "checkpoint.safetensors is a safetensors file without mimic's format (a model's weights?), not a "
                                          "mimic training checkpoint: it is not this run's to resume or replace, --fresh included");
      mimic::io::SaveOptions maps;
      maps.metadata = {{"format", "mimic-maps-1"}};
      mimic::io::save_safetensors(dir.file("checkpoint.safetensors"), {{"x", torch::zeros({2})}}, maps);
      EXPECT_MIMIC_ERROR(run(dir, fresh), "checkpoint.safetensors is a mimic-maps-1 file, not a mimic training checkpoint");
      EXPECT_TRUE(std::filesystem::exists(dir.file("step-10/model.safetensors")));
    }
    {  // a link at an export's file name
      TempDir dir;
      run(dir, false);
      mimic::test::write_bytes(other.file("foreign.safetensors"), theirs);
      std::filesystem::remove(dir.file("last/model.safetensors"));
      std::filesystem::create_symlink(other.file("foreign.safetensors"), dir.file("last/model.safetensors"));
      EXPECT_MIMIC_ERROR(run(dir, fresh), dir.file("last/model.safetensors") + " is a link, where the run writes its own file");
      EXPECT_TRUE(std::filesystem::is_symlink(dir.file("last/model.safetensors")));
      // and at the run's own files: the checkpoint and the book were replaced by files, the log appended through
      for (const char* own : {"log.jsonl", "checkpoint.safetensors", "exports.json"}) {
        SCOPED_TRACE(own);
        std::filesystem::copy_file(dir.file(own), other.file(std::string("mine-") + own), std::filesystem::copy_options::overwrite_existing);
        const auto mine = mimic::test::read_bytes(dir.file(own));
        std::filesystem::remove(dir.file(own));
        std::filesystem::create_symlink(other.file(std::string("mine-") + own), dir.file(own));
        EXPECT_MIMIC_ERROR(run(dir, fresh), dir.file(own) + " is a link, where the run keeps its own file");
        EXPECT_TRUE(std::filesystem::is_symlink(dir.file(own)));
        EXPECT_EQ(mimic::test::read_bytes(other.file(std::string("mine-") + own)), mine);
        std::filesystem::remove(dir.file(own));
        mimic::test::write_bytes(dir.file(own), mine);
      }
    }
  }
  {  // a model copied into a snapshot's folder while the run trains, before the run reaches it
    TempDir dir;
    torch::manual_seed(5);
    Toy toy;
    bool planted = false;
    auto task = planting_task(toy, [&] {
      if (!std::filesystem::exists(dir.file("step-10/model.safetensors"))) return false;
      std::filesystem::create_directories(dir.file("step-20"));
      mimic::test::write_bytes(dir.file("step-20/model.safetensors"), theirs);
      return planted = true;
    });
    auto o = options(dir.path().string(), 20);
    o.snapshot_every = 10;
    EXPECT_MIMIC_ERROR(train(task, o), dir.file("step-20/model.safetensors") + " is not a file this run wrote");
    EXPECT_TRUE(planted);
    EXPECT_EQ(mimic::test::read_bytes(dir.file("step-20/model.safetensors")), theirs);
  }
  // the sixteenth probe's: an empty log, or a checkpoint that cannot be read and no log, is no run: the folder is
  // checked as one without (a fresh start removed the models its folders held as the run's)
  for (const bool fresh : {false, true}) {
    TempDir dir;
    std::filesystem::create_directories(dir.file("last"));
    mimic::test::write_bytes(dir.file("last/model.safetensors"), theirs);
    mimic::test::write_bytes(dir.file("log.jsonl"), "");
    EXPECT_MIMIC_ERROR(run(dir, fresh), dir.file("last") + " holds what no run in");
    std::filesystem::remove(dir.file("log.jsonl"));
    mimic::test::write_bytes(dir.file("checkpoint.safetensors"), "hello\n");
    EXPECT_MIMIC_ERROR(run(dir, fresh), dir.file("last") + " holds what no run in");
    EXPECT_EQ(mimic::test::read_bytes(dir.file("last/model.safetensors")), theirs);
  }
  {  // another command's run (its checkpoint names the command) is refused, --fresh included: distill's layer runs named none
    TempDir dir;
    torch::manual_seed(5);
    Toy toy;
    auto task = toy.task();
    auto o = options(dir.path().string(), 10);
    o.command = "distill";
    train(task, o);
    o.command = "pretrain";
    o.fresh = true;
    EXPECT_MIMIC_ERROR(train(task, o), " holds a distill run: pretrain neither resumes nor replaces another command's run, --fresh included");
  }
  {  // a model copied into the run's own folder while it trains is refused at the promotion, not replaced
    TempDir dir;
    torch::manual_seed(5);
    Toy toy;
    auto task = planting_task(toy, [&] {
      if (!std::filesystem::exists(dir.file("log.jsonl"))) return false;
      mimic::test::write_bytes(dir.file("model.safetensors"), theirs);
      return true;
    });
    task.out_is_model = true;
    train(task, options(dir.path().string(), 20));
    EXPECT_MIMIC_ERROR(promote_best(dir.path().string()), dir.file("model.safetensors") + " is not a file this run wrote");
    EXPECT_EQ(mimic::test::read_bytes(dir.file("model.safetensors")), theirs);
  }
  {  // a book from before exports were staged, its export cut short (the folder's entry null): the start cannot tell
     // what it left from a model placed there since (the sixteenth probe: both were removed), and refuses; emptied by
     // hand, the entry goes
    TempDir dir;
    run(dir, false);
    edit_export_book(dir, [](nlohmann::json& book) { book["step-10"] = nullptr; });
    mimic::test::write_bytes(dir.file("step-10/model.safetensors"), theirs);
    for (const bool fresh : {false, true})
      EXPECT_MIMIC_ERROR(run(dir, fresh, 0), dir.file("step-10/model.safetensors") + " lies in a folder where an export was cut short");
    EXPECT_EQ(mimic::test::read_bytes(dir.file("step-10/model.safetensors")), theirs);
    std::filesystem::remove(dir.file("step-10/model.safetensors"));
    run(dir, false, /*snapshot_every=*/0);
    EXPECT_FALSE(std::filesystem::exists(dir.file("step-10")));
    auto book = nlohmann::json::parse(mimic::test::read_bytes(dir.file("exports.json")));
    EXPECT_FALSE(book.contains("step-10")) << book.dump();
  }
  // Today an export is written into FOLDER.part and moved in: killed while it was written, the next start removes what
  // it left there, and never a model placed in FOLDER after the kill (the sixteenth probe: a cut-short export's null
  // entry made the start remove every model file of the folder, the user's too)
  for (const bool fresh : {false, true}) {
    TempDir dir;
    torch::manual_seed(5);
    Toy toy;
    auto killed = toy.task();
    killed.out_is_model = true;
    killed.export_model = [inner = killed.export_model](const std::string& d) {
      inner(d);
      if (std::filesystem::path(d).filename() == "step-20.part") throw std::runtime_error("killed while exporting step-20/");
    };
    auto o = options(dir.path().string(), 20);
    o.snapshot_every = 10;
    o.keep_last = true;
    EXPECT_THROW(train(killed, o), std::runtime_error);
    ASSERT_TRUE(std::filesystem::exists(dir.file("step-20.part/model.safetensors")));
    EXPECT_FALSE(std::filesystem::exists(dir.file("step-20")));
    std::filesystem::create_directories(dir.file("step-20"));
    mimic::test::write_bytes(dir.file("step-20/model.safetensors"), theirs);
    EXPECT_MIMIC_ERROR(run(dir, fresh), dir.file("step-20/model.safetensors") + " is not a file this run wrote");
    EXPECT_EQ(mimic::test::read_bytes(dir.file("step-20/model.safetensors")), theirs);
    std::filesystem::remove_all(dir.file("step-20"));
    const auto r = run(dir, fresh);
    EXPECT_EQ(r.steps, 20);
    EXPECT_FALSE(std::filesystem::exists(dir.file("step-20.part")));
    EXPECT_EQ(mimic::test::read_bytes(dir.file("step-20/model.safetensors")), mimic::test::read_bytes(other.file("step-20/model.safetensors")));
    const auto book = nlohmann::json::parse(mimic::test::read_bytes(dir.file("exports.json")));
    EXPECT_FALSE(book.contains("step-20.part")) << book.dump();
    EXPECT_EQ(book["step-20"]["model.safetensors"], mimic::io::file_digest(dir.file("step-20/model.safetensors")));
  }
  {  // a staging is the run's working space, and holds nothing else (the seventeenth probe: a model copied into
     // step-N.part/, while the run trained or after a kill, was removed with it, exit 0)
    TempDir dir;
    torch::manual_seed(5);
    Toy toy;
    auto task = planting_task(toy, [&] {
      if (!std::filesystem::exists(dir.file("step-10/model.safetensors"))) return false;
      std::filesystem::create_directories(dir.file("step-20.part"));
      mimic::test::write_bytes(dir.file("step-20.part/model.safetensors"), theirs);
      return true;
    });
    auto o = options(dir.path().string(), 20);
    o.snapshot_every = 10;
    EXPECT_MIMIC_ERROR(train(task, o), dir.file("step-20.part") + " holds what this run did not write, where it stages an export");
    EXPECT_EQ(mimic::test::read_bytes(dir.file("step-20.part/model.safetensors")), theirs);
    // the same at the start (no entry for it in the book), and a file of another name in a cut-short staging
    EXPECT_MIMIC_ERROR(run(dir, false), dir.file("step-20.part/model.safetensors") + " is not a file this run wrote (exports.json records no export staged in");
    std::filesystem::remove(dir.file("step-20.part/model.safetensors"));
    mimic::test::write_bytes(dir.file("step-20.part/notes.txt"), "mine");
    edit_export_book(dir, [](nlohmann::json& book) { book["step-20.part"] = nullptr; });
    for (const bool fresh : {false, true})
      EXPECT_MIMIC_ERROR(run(dir, fresh), dir.file("step-20.part/notes.txt") + " is not a file of the model this run stages in");
    EXPECT_EQ(mimic::test::read_bytes(dir.file("step-20.part/notes.txt")), "mine");
    std::filesystem::remove(dir.file("step-20.part/notes.txt"));
    // a model file of a name the run's exports never wrote (its finished exports name what they write: the toy's
    // weights alone), as a tokenizer beside a recall model's weights (the eighteenth probe: removed, exit 0)
    mimic::test::write_bytes(dir.file("step-20.part/tokenizer.json"), "{}");
    EXPECT_MIMIC_ERROR(run(dir, true), dir.file("step-20.part/tokenizer.json") + " is not a file of the model this run stages in");
    EXPECT_EQ(mimic::test::read_bytes(dir.file("step-20.part/tokenizer.json")), "{}");
    std::filesystem::remove(dir.file("step-20.part/tokenizer.json"));
    // a staging's entry that records no file, or a file that is not there, is a damaged book: nothing moves or goes
    run(dir, false);
    const auto snapshot = mimic::test::read_bytes(dir.file("step-10/model.safetensors"));
    edit_export_book(dir, [](nlohmann::json& book) { book["step-10.part"] = nlohmann::json::object(); });
    EXPECT_MIMIC_ERROR(run(dir, false), "the entry of \"step-10.part\" records no file, where an export wrote some");
    edit_export_book(dir, [](nlohmann::json& book) { book["step-10.part"] = {{"model.safetensors", "00"}}; });
    EXPECT_MIMIC_ERROR(run(dir, false), "the entry of \"step-10.part\" records \"model.safetensors\", which is no file of its export");
    edit_export_book(dir, [](nlohmann::json& book) { book["step-10.part"] = {{"model.safetensors", 1}}; });
    EXPECT_MIMIC_ERROR(run(dir, false), "gives \"model.safetensors\" a digest of 1, not a string");
    EXPECT_EQ(mimic::test::read_bytes(dir.file("step-10/model.safetensors")), snapshot);
    // a link or a file at a staging's name
    edit_export_book(dir, [](nlohmann::json& book) { book.erase("step-10.part"); });
    mimic::test::write_bytes(dir.file("step-30.part"), "mine");
    EXPECT_MIMIC_ERROR(run(dir, false), dir.file("step-30.part") + " is not a folder, where the run stages an export");
    std::filesystem::remove(dir.file("step-30.part"));
    std::filesystem::create_directory_symlink(other.path(), dir.file("step-30.part"));
    EXPECT_MIMIC_ERROR(run(dir, false), dir.file("step-30.part") + " is a link, where the run stages an export");
  }
  {  // a file copied into a staging while the export writes there is neither moved in as the run's nor removed with
     // the staging: named, and kept (the eighteenth probe: removed, exit 0)
    TempDir dir;
    torch::manual_seed(5);
    Toy toy;
    auto task = toy.task();
    task.export_model = [inner = task.export_model](const std::string& d) {
      inner(d);
      if (std::filesystem::path(d).filename() == "step-20.part") mimic::test::write_bytes(d + "/tokenizer.json", "mine");
    };
    auto o = options(dir.path().string(), 20);
    o.snapshot_every = 10;
    EXPECT_MIMIC_ERROR(train(task, o), dir.file("step-20.part/tokenizer.json") + " is not a file of the export this run staged in");
    EXPECT_EQ(mimic::test::read_bytes(dir.file("step-20.part/tokenizer.json")), "mine");
    EXPECT_FALSE(std::filesystem::exists(dir.file("step-20/tokenizer.json")));
    EXPECT_TRUE(std::filesystem::exists(dir.file("step-20/model.safetensors")));
  }
  {  // killed while a staged export moved in: the folder holds some files of each, every one recorded; the next start
     // finishes the move (a file the old export held and the new one does not goes), and refuses a file of neither
    TempDir dir;
    run(dir, false);
    const auto snapshot = mimic::test::read_bytes(dir.file("step-10/model.safetensors"));
    std::filesystem::create_directories(dir.file("step-10.part"));
    std::filesystem::rename(dir.file("step-10/model.safetensors"), dir.file("step-10.part/model.safetensors"));
    mimic::test::write_bytes(dir.file("step-10/model.safetensors"), "the export before");
    mimic::test::write_bytes(dir.file("step-10/config.json"), "{}");
    edit_export_book(dir, [&](nlohmann::json& book) {
      book["step-10.part"] = book["step-10"];
      book["step-10"] = {{"model.safetensors", mimic::io::file_digest(dir.file("step-10/model.safetensors"))},
                         {"config.json", mimic::io::file_digest(dir.file("step-10/config.json"))}};
    });
    mimic::test::write_bytes(dir.file("step-10/tokenizer.json"), "{}");
    EXPECT_MIMIC_ERROR(run(dir, false), dir.file("step-10/tokenizer.json") + " is not a file this run wrote");
    std::filesystem::remove(dir.file("step-10/tokenizer.json"));
    run(dir, false);
    EXPECT_FALSE(std::filesystem::exists(dir.file("step-10.part")));
    EXPECT_FALSE(std::filesystem::exists(dir.file("step-10/config.json")));
    EXPECT_EQ(mimic::test::read_bytes(dir.file("step-10/model.safetensors")), snapshot);
    const auto book = nlohmann::json::parse(mimic::test::read_bytes(dir.file("exports.json")));
    EXPECT_EQ(book["step-10"], nlohmann::json({{"model.safetensors", mimic::io::file_digest(dir.file("step-10/model.safetensors"))}})) << book.dump();
  }
}

// Found by the crash-safety soak (bench/soak.sh): the log's loss is a mean over the steps since the previous log
// line; a run resumed from a checkpoint between two log lines averaged only the steps since the resume, so its
// log differed from the uninterrupted run's. The log now matches line for line (timings aside).
TEST(TrainEngine, AResumedRunLogsTheSameLossesAsAnUninterruptedOne) {
  auto without_timings = [](const std::string& log) {
    std::vector<nlohmann::json> lines;
    std::istringstream is(log);
    for (std::string line; std::getline(is, line);) {
      auto j = nlohmann::json::parse(line);
      j.erase("elapsed");
      j.erase("tokens_per_second");
      lines.push_back(j);
    }
    return lines;
  };
  TempDir a, b;
  auto opts = [](const std::string& dir) {
    auto o = options(dir, 20);
    o.log_every = 10;  // checkpoints every 5 steps fall between log lines
    return o;
  };
  torch::manual_seed(5);
  Toy full;
  auto full_task = full.task();
  train(full_task, opts(a.path().string()));
  torch::manual_seed(5);
  Toy killed;
  killed.crash_at_call = 2 * 7;  // dies in step 8, after the step-5 checkpoint
  auto killed_task = killed.task();
  EXPECT_THROW(train(killed_task, opts(b.path().string())), std::runtime_error);
  torch::manual_seed(999);
  Toy resumed;
  auto resumed_task = resumed.task();
  EXPECT_EQ(train(resumed_task, opts(b.path().string())).resumed_from, 5);
  const auto want = without_timings(mimic::test::read_bytes(a.file("log.jsonl")));
  EXPECT_EQ(want.size(), 4u);  // steps 10 and 20, and two evaluations
  EXPECT_EQ(without_timings(mimic::test::read_bytes(b.file("log.jsonl"))), want);
}

// On resume the log is cut back to the checkpoint's step. A kill mid-append leaves a last line without its
// newline, which is dropped; any other line that is not an object with an integer step is damage, refused naming
// the line (it used to be dropped silently, losing that line of the run's history).
TEST(TrainEngine, OnResumeACutShortLastLogLineIsDroppedButADamagedLineIsRefusedNamingIt) {
  TempDir a, b;
  auto opts = [](const std::string& dir) {
    auto o = options(dir, 20);
    o.log_every = 5;
    return o;
  };
  torch::manual_seed(6);
  Toy full;
  auto full_task = full.task();
  train(full_task, opts(a.path().string()));
  const auto want = mimic::test::read_bytes(a.file("log.jsonl"));

  auto killed_at_step_8 = [&] {
    torch::manual_seed(6);
    Toy killed;
    killed.crash_at_call = 2 * 7;
    auto task = killed.task();
    EXPECT_THROW(train(task, opts(b.path().string())), std::runtime_error);
  };
  auto resume = [&] {
    torch::manual_seed(999);
    Toy again;
    auto task = again.task();
    return train(task, opts(b.path().string()));
  };
  killed_at_step_8();
  const auto log = b.file("log.jsonl");
  const auto at_kill = mimic::test::read_bytes(log);
  mimic::test::write_bytes(log, at_kill + R"({"step":8,"lo)");
  EXPECT_EQ(resume().resumed_from, 5);
  auto strip = [](const std::string& text) {  // timings differ between runs
    std::string out;
    std::istringstream is(text);
    for (std::string line; std::getline(is, line);) {
      auto j = nlohmann::json::parse(line);
      j.erase("elapsed");
      j.erase("tokens_per_second");
      out += j.dump() + "\n";
    }
    return out;
  };
  EXPECT_EQ(strip(mimic::test::read_bytes(log)), strip(want));

  std::filesystem::remove_all(b.path());
  std::filesystem::create_directories(b.path());
  killed_at_step_8();
  mimic::test::write_bytes(log, R"({"step":"5","loss":1.0})" "\n" + mimic::test::read_bytes(log));
  EXPECT_MIMIC_ERROR(resume(), "log.jsonl line 1: key 'step' must be an integer, got \"5\"");
  mimic::test::write_bytes(log, "not json\n");
  EXPECT_MIMIC_ERROR(resume(), "log.jsonl line 1: malformed JSON");
  mimic::test::write_bytes(log, "[1,2]\n");
  EXPECT_MIMIC_ERROR(resume(), "log.jsonl line 1: a log line is a JSON object, got array");
}

// The checkpoint's state is mimic's own JSON, read through the checked accessors (core/json_keys.h): a key of the
// wrong type or a missing one is one line naming the checkpoint and the key, not nlohmann's text.
TEST(TrainEngine, ACheckpointStateWithAKeyOfTheWrongTypeOrMissingIsRefusedNamingFileAndKey) {
  TempDir dir;
  torch::manual_seed(4);
  Toy toy;
  auto task = toy.task();
  train(task, options(dir.path().string(), 10));
  const auto ckpt = dir.file("checkpoint.safetensors");
  const auto saved = mimic::test::read_bytes(ckpt);
  auto with_state = [&](const std::function<void(nlohmann::json&)>& edit) {
    mimic::test::write_bytes(ckpt, saved);
    mimic::test::edit_safetensors_json(ckpt, "state", edit);
    Toy again;
    auto t = again.task();
    return train(t, options(dir.path().string(), 20));
  };
  EXPECT_MIMIC_ERROR(with_state([](auto& j) { j["step"] = "ten"; }),
                     "checkpoint.safetensors (its training state): key 'step' must be an integer, got \"ten\"");
  EXPECT_MIMIC_ERROR(with_state([](auto& j) { j.erase("best_step"); }), "checkpoint.safetensors (its training state): missing key 'best_step'");
  EXPECT_MIMIC_ERROR(with_state([](auto& j) { j["best_eval"] = "low"; }), "key 'best_eval' must be a number, got \"low\"");
  EXPECT_MIMIC_ERROR(with_state([](auto& j) { j["step"] = -3; }), "key 'step' must be at least 0, got -3");
  EXPECT_MIMIC_ERROR(with_state([](auto& j) { j.erase("data"); }), "missing key 'data'");
  EXPECT_MIMIC_ERROR(with_state([](auto& j) { j = nlohmann::json::array(); }), "(its training state): expected a JSON object");
  // each names the way out (a truncated checkpoint did not, the probe of 2026-11-27)
  EXPECT_MIMIC_ERROR(with_state([](auto& j) { j.erase("data"); }), "missing key 'data'; --fresh starts over");
  mimic::test::write_bytes(ckpt, saved.substr(0, saved.size() / 2));
  Toy again;
  auto t = again.task();
  EXPECT_MIMIC_ERROR(train(t, options(dir.path().string(), 20)), "; --fresh starts over (the checkpoint is then replaced)");
}

// A link placed at a snapshot's step-N while the run trains (after the start's checks) is removed at the export, never
// written through (the thirteenth probe of 2026-11-30: the model it named was replaced, exit 0).
TEST(TrainEngine, ALinkPlacedAtASnapshotDuringTheRunIsNotWrittenThrough) {
  TempDir dir, victim;
  mimic::test::write_bytes(victim.file("notes.txt"), "mine");
  torch::manual_seed(5);
  Toy toy;
  bool planted = false;
  auto task = planting_task(toy, [&] {
    std::filesystem::create_directory_symlink(victim.path(), dir.file("step-10"));
    return planted = true;
  });
  auto o = options(dir.path().string(), 10);
  o.snapshot_every = 10;
  train(task, o);
  ASSERT_TRUE(planted);
  EXPECT_FALSE(std::filesystem::exists(victim.file("model.safetensors")));
  EXPECT_EQ(mimic::test::read_bytes(victim.file("notes.txt")), "mine");
  EXPECT_FALSE(std::filesystem::is_symlink(dir.file("step-10")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("step-10/model.safetensors")));
}

// With no run in the folder yet (no checkpoint, no log), what sits where the run exports is nobody's it knows — another
// command's export or conversion placed there was replaced or removed, exit 0 (the thirteenth probe) — and is refused,
// --fresh or not; an empty folder there is the run's to use.
TEST(TrainEngine, AFolderWithoutARunRefusesWhatSitsWhereTheRunExports) {
  // a 10-step toy run into `dir` with a snapshot at step 10
  auto run = [](const TempDir& dir, bool fresh) {
    Toy toy;
    auto task = toy.task();
    auto o = options(dir.path().string(), 10);
    o.snapshot_every = 10;
    o.fresh = fresh;
    train(task, o);
  };
  for (const std::string sub : {"best", "best.new", "last", "step-10"}) {
    for (const bool fresh : {false, true}) {
      TempDir dir;
      std::filesystem::create_directories(dir.file(sub));
      mimic::test::write_bytes(dir.file(sub + "/model.safetensors"), "another command's");
      EXPECT_MIMIC_ERROR(run(dir, fresh), dir.file(sub) + " holds what no run in");
      EXPECT_EQ(mimic::test::read_bytes(dir.file(sub + "/model.safetensors")), "another command's");
      EXPECT_FALSE(std::filesystem::exists(dir.file("log.jsonl"))) << "refused after it started";
    }
  }
  // a file (or a FIFO) there is refused by name before the run, not at its export
  for (const std::string sub : {"best", "step-10"}) {
    TempDir dir;
    mimic::test::write_bytes(dir.file(sub), "a file");
    EXPECT_MIMIC_ERROR(run(dir, false), dir.file(sub) + " is not a folder, where the run exports");
  }
  TempDir empty;
  std::filesystem::create_directories(empty.file("best"));
  std::filesystem::create_directories(empty.file("step-10"));
  run(empty, false);
  EXPECT_TRUE(std::filesystem::exists(empty.file("step-10/model.safetensors")));
}

TEST(TrainEngine, SnapshotsHoldTheModelAsItWasAtTheirStep) {
  TempDir a, b;
  torch::manual_seed(2);
  Toy snap;
  auto snap_task = snap.task();
  auto o = options(a.path().string(), 20);
  o.snapshot_every = 7;
  train(snap_task, o);
  EXPECT_TRUE(std::filesystem::exists(a.file("step-7/model.safetensors")));
  EXPECT_FALSE(std::filesystem::exists(a.file("step-20")));  // 20 is no multiple of 7; last/ holds the end
  // The same run stopped after step 14: its weights are the step-14 snapshot's, bit for bit.
  torch::manual_seed(2);
  Toy stopped;
  auto stopped_task = stopped.task();
  auto s = options(b.path().string(), 20);
  s.stop_after = 14;
  train(stopped_task, s);
  auto f = mimic::io::SafeTensorsFile::open(a.file("step-14/model.safetensors"));
  for (auto& p : stopped.net->named_parameters()) EXPECT_TRUE(torch::equal(f.load(p.key()), p.value())) << p.key();
  EXPECT_FALSE(torch::equal(f.load("0.weight"), snap.net->named_parameters()["0.weight"]));  // training went on after it
}

TEST(TrainEngine, EndAtEndsPartWayThroughTheScheduleAndARerunWithALaterEndContinuesIt) {
  TempDir a, b;
  torch::manual_seed(3);
  Toy full;
  auto full_task = full.task();
  auto o = options(a.path().string(), 20);
  o.snapshot_every = 7;
  train(full_task, o);

  // Ending at 7 of the same 20-step schedule: last/ holds the full run's step-7 model, bit for bit, and the run
  // counts as complete (a rerun with the same end trains nothing).
  torch::manual_seed(3);
  Toy staged;
  auto staged_task = staged.task();
  auto e = options(b.path().string(), 20);
  e.end_at = 7;
  auto r = train(staged_task, e);
  EXPECT_EQ(r.steps, 7);
  EXPECT_FALSE(r.stopped);
  auto snap = mimic::io::SafeTensorsFile::open(a.file("step-7/model.safetensors"));
  auto last = mimic::io::SafeTensorsFile::open(b.file("last/model.safetensors"));
  for (auto& p : staged.net->named_parameters()) EXPECT_TRUE(torch::equal(snap.load(p.key()), last.load(p.key()))) << p.key();
  EXPECT_EQ(train(staged_task, e).resumed_from, 7);

  // Moving the end to 20 continues the same schedule to the full run's weights (the step-7 checkpoint resumes
  // a fresh process state).
  torch::manual_seed(999);
  Toy resumed;
  auto resumed_task = resumed.task();
  e.end_at = 20;
  EXPECT_EQ(train(resumed_task, e).resumed_from, 7);
  auto w1 = weights(full), w2 = weights(resumed);
  for (size_t i = 0; i < w1.size(); ++i) EXPECT_TRUE(torch::equal(w1[i], w2[i])) << "parameter " << i;

  e.end_at = 21;
  EXPECT_MIMIC_ERROR(train(resumed_task, e), "end_at must lie in [0, steps = 20]");
}

TEST(TrainEngine, EarlyStoppingEndsAfterPatienceEvaluationsWithoutImprovementAlsoWhenResumed) {
  // Scripted validation losses at steps 5, 10, 15, 20, ...: the best is at step 10; with patience 2 the
  // run ends at step 20, keeps best/ from step 10, and a rerun or a run killed at step 17 ends there too.
  const std::vector<double> script = {5.0, 4.0, 4.5, 4.6, 1.0, 1.0};
  auto run = [&](const std::string& dir, int64_t crash_at_call, Toy& toy) {
    auto task = toy.task();
    task.evaluate = [&toy, &script]() { return script[static_cast<size_t>(toy.position / 10 - 1)]; };  // 2 micro-batches a step
    toy.crash_at_call = crash_at_call;
    auto o = options(dir, 30);
    o.eval_every = 5;
    o.patience = 2;
    return train(task, o);
  };
  TempDir a, b;
  torch::manual_seed(4);
  Toy whole;
  auto r = run(a.path().string(), -1, whole);
  EXPECT_TRUE(r.stopped_early);
  EXPECT_EQ(r.steps, 20);
  EXPECT_EQ(r.best_step, 10);
  EXPECT_DOUBLE_EQ(r.best_eval, 4.0);
  EXPECT_TRUE(std::filesystem::exists(a.file("last/model.safetensors")));
  auto again = run(a.path().string(), -1, whole);  // the same command once more: nothing left to do
  EXPECT_TRUE(again.stopped_early);
  EXPECT_EQ(again.steps, 20);
  EXPECT_EQ(again.resumed_from, 20);
  torch::manual_seed(4);
  Toy killed;
  EXPECT_THROW(run(b.path().string(), 2 * 16 + 1, killed), std::runtime_error);  // dies in step 17, after the step-15 checkpoint
  torch::manual_seed(99);
  Toy resumed;
  auto rr = run(b.path().string(), -1, resumed);
  EXPECT_EQ(rr.resumed_from, 15);
  EXPECT_TRUE(rr.stopped_early);
  EXPECT_EQ(rr.steps, 20);
  auto w1 = weights(whole), w2 = weights(resumed);
  for (size_t i = 0; i < w1.size(); ++i) EXPECT_TRUE(torch::equal(w1[i], w2[i])) << "parameter " << i;
  auto o = options(b.path().string(), 30);
  o.eval_every = 0;
  o.patience = 1;
  auto t = resumed.task();
  EXPECT_MIMIC_ERROR(train(t, o), "needs evaluations");
}

TEST(TrainEngine, WithEvalAtStartARunThatOnlyGetsWorseKeepsAndExportsItsStart) {
  // Scripted validation losses: at the start (position 0), then after steps 10 and 20 (2 micro-batches a step).
  const std::vector<double> script = {1.0, 2.0, 1.5};
  auto run = [&](const std::string& dir, bool at_start, Toy& toy) {
    auto task = toy.task();
    task.evaluate = [&toy, &script]() { return script[static_cast<size_t>(toy.position / 20)]; };
    auto o = options(dir, 20);
    o.eval_at_start = at_start;
    return train(task, o);
  };
  TempDir a, b;
  torch::manual_seed(4);
  Toy toy;
  const auto start = weights(toy);
  auto r = run(a.path().string(), true, toy);
  EXPECT_EQ(r.best_step, 0);
  EXPECT_DOUBLE_EQ(r.best_eval, 1.0);
  EXPECT_DOUBLE_EQ(r.last_eval, 1.5);
  // best/ holds the untrained weights, last/ the trained ones
  auto best = mimic::io::SafeTensorsFile::open(a.file("best/model.safetensors"));
  auto names = best.names();
  ASSERT_EQ(names.size(), start.size());
  size_t i = 0;
  for (auto& p : toy.net->named_parameters()) {
    EXPECT_TRUE(torch::equal(best.load(p.key()), start[i])) << p.key();
    EXPECT_FALSE(torch::equal(p.value(), start[i])) << p.key() << " was not trained";
    ++i;
  }
  EXPECT_NE(mimic::test::read_bytes(a.file("log.jsonl")).find(R"({"eval_loss":1.0,"step":0})"), std::string::npos);
  // without it, the start never competes: the best is step 20's 1.5
  torch::manual_seed(4);
  Toy other;
  auto r2 = run(b.path().string(), false, other);
  EXPECT_EQ(r2.best_step, 20);
  EXPECT_DOUBLE_EQ(r2.best_eval, 1.5);
  // killed in step 13 (after the step-10 checkpoint) and resumed: the start stays the best, evaluated once
  TempDir c;
  torch::manual_seed(4);
  Toy killed;
  killed.crash_at_call = 2 * 12 + 1;
  EXPECT_THROW(run(c.path().string(), true, killed), std::runtime_error);
  torch::manual_seed(99);
  Toy resumed;
  auto r3 = run(c.path().string(), true, resumed);
  EXPECT_EQ(r3.resumed_from, 10);
  EXPECT_EQ(r3.best_step, 0);
  EXPECT_DOUBLE_EQ(r3.best_eval, 1.0);
  const auto log = mimic::test::read_bytes(c.file("log.jsonl"));
  size_t starts = 0;
  for (size_t at = log.find(R"("step":0})"); at != std::string::npos; at = log.find(R"("step":0})", at + 1)) ++starts;
  EXPECT_EQ(starts, 1u) << log;
  // patience counts from the start: with patience 1, the step-10 evaluation (worse) ends the run there
  TempDir e;
  torch::manual_seed(4);
  Toy patient;
  auto task = patient.task();
  task.evaluate = [&patient, &script]() { return script[static_cast<size_t>(patient.position / 20)]; };
  auto o = options(e.path().string(), 20);
  o.eval_at_start = true;
  o.patience = 1;
  auto r4 = train(task, o);
  EXPECT_TRUE(r4.stopped_early);
  EXPECT_EQ(r4.steps, 10);
  EXPECT_EQ(r4.best_step, 0);
}

TEST(TrainEngine, NonFiniteLossStopsNamingTheStep) {
  TempDir dir;
  Toy toy;
  toy.nan_at_call = 2 * 6;  // first micro-batch of step 7
  auto task = toy.task();
  // the step, and the checkpoint a rerun resumes from; before the first checkpoint there is none to name (the
  // message named "step 0", which does not exist: the probe of 2026-11-27)
  const auto message = [](TrainTask& t, const std::string& out) {
    try {
      train(t, options(out, 20));
    } catch (const mimic::Error& e) {
      return std::string(e.what());
    }
    return std::string("nothing thrown");
  };
  const std::string late = message(task, dir.path().string());
  EXPECT_NE(late.find("non-finite loss at step 7 "), std::string::npos) << late;
  EXPECT_NE(late.find("; the last checkpoint (step 5) is in " + dir.path().string()), std::string::npos) << late;
  TempDir early_dir;
  Toy toy0;
  toy0.nan_at_call = 2 * 2;  // step 3
  auto task0 = toy0.task();
  const std::string early = message(task0, early_dir.path().string());
  EXPECT_NE(early.find("non-finite loss at step 3 "), std::string::npos) << early;
  EXPECT_NE(early.find("; no checkpoint was saved yet (the first comes at step 5): a rerun starts from the beginning"),
            std::string::npos)
      << early;
  // With skipping, the bad step is skipped and training completes.
  TempDir dir2;
  Toy toy2;
  toy2.nan_at_call = 2 * 6;
  auto task2 = toy2.task();
  auto o = options(dir2.path().string(), 20);
  o.on_nonfinite = NonFinite::Skip;
  auto r = train(task2, o);
  EXPECT_EQ(r.steps, 20);
  EXPECT_NE(mimic::test::read_bytes(dir2.file("log.jsonl")).find("skipped"), std::string::npos);
}

// A library user bypasses the CLI's ranges (tools/ranges.h): train() checks the options itself, before it creates
// the output directory. checkpoint_every = 0 was a SIGFPE (done % 0); the others trained on silently.
TEST(TrainEngine, OutOfRangeOptionsAreErrorsBeforeAnythingIsWritten) {
  TempDir dir;
  Toy toy;
  auto task = toy.task();
  const std::string out = dir.file("out");
  const std::vector<std::pair<std::function<void(TrainOptions&)>, std::string>> cases = {
      {[](TrainOptions& o) { o.checkpoint_every = 0; }, "checkpoint_every must be >= 1"},
      {[](TrainOptions& o) { o.log_every = 0; }, "log_every must be >= 1"},
      {[](TrainOptions& o) { o.snapshot_every = -1; }, "snapshot_every must be >= 0"},
      {[](TrainOptions& o) { o.patience = -1; }, "patience must be >= 0"},
      {[](TrainOptions& o) { o.warmup = -1; }, "warmup must be >= 0"},
      {[](TrainOptions& o) { o.lr = -1; }, "learning rate must be a number > 0"},
      {[](TrainOptions& o) { o.lr = std::nan(""); }, "learning rate must be a number > 0"},
      {[](TrainOptions& o) { o.min_lr_ratio = 2; }, "min_lr_ratio must lie in [0, 1]"},
      {[](TrainOptions& o) { o.adam.weight_decay = -0.1; }, "weight decay must be a number >= 0"},
      {[](TrainOptions& o) { o.grad_accum = 0; }, "gradient accumulation must be positive"},
  };
  for (const auto& [set, message] : cases) {
    auto o = options(out, 10);
    set(o);
    EXPECT_MIMIC_ERROR(train(task, o), message);
    EXPECT_FALSE(std::filesystem::exists(out)) << message;
  }
}

TEST(TrainEngine, CheckpointsAreNeverHalfWritten) {
  TempDir dir;
  Toy toy;
  toy.crash_at_call = 2 * 12;  // killed in step 13, after the step-10 checkpoint
  auto task = toy.task();
  EXPECT_THROW(train(task, options(dir.path().string(), 30)), std::runtime_error);
  for (auto& e : std::filesystem::recursive_directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  auto f = mimic::io::SafeTensorsFile::open(dir.file("checkpoint.safetensors"));
  EXPECT_NE(f.metadata().at("state").find("\"step\":10"), std::string::npos);
  // A writer that fails midway leaves the previous file untouched.
  auto before = mimic::test::read_bytes(dir.file("checkpoint.safetensors"));
  EXPECT_THROW(mimic::io::write_file_atomically(dir.file("checkpoint.safetensors"),
                                                [](std::ostream& os) {
                                                  os << "partial";
                                                  throw std::runtime_error("killed");
                                                }),
               std::runtime_error);
  EXPECT_EQ(mimic::test::read_bytes(dir.file("checkpoint.safetensors")), before);
}

TEST(TrainOptimizer, AdamWMatchesClosedFormAndSkipsDecayForBiasAndNorms) {
  // One AdamW step from zero moments moves each weight by lr·sign(g) (bias-corrected m/sqrt(v) = g/|g|),
  // plus decoupled decay lr·wd·w for matrices only.
  auto w = torch::full({2, 2}, 2.0, torch::requires_grad());
  auto b = torch::full({2}, 2.0, torch::requires_grad());
  AdamWOptions o;
  o.weight_decay = 0.5;
  o.eps = 0;
  AdamW opt({{"layer.weight", w}, {"layer.bias", b}}, o);
  (w.sum() * 3 - b.sum()).backward();
  opt.step(0.1);
  EXPECT_TRUE(torch::allclose(w, torch::full({2, 2}, 2.0 * (1 - 0.1 * 0.5) - 0.1)));
  EXPECT_TRUE(torch::allclose(b, torch::full({2}, 2.0 + 0.1)));
  EXPECT_TRUE(exempt_from_weight_decay("h.0.ln_1.weight", torch::ones({4})));
  EXPECT_TRUE(exempt_from_weight_decay("bert.embeddings.LayerNorm.gamma", torch::ones({4})));
  EXPECT_FALSE(exempt_from_weight_decay("h.0.attn.c_attn.weight", torch::ones({4, 4})));
}

// Five AdamW steps — bias correction as the moments warm up, decoupled weight decay on the matrix only, a learning
// rate that changes every step — equal PyTorch's torch.optim.AdamW, an independent implementation, in float64
// (golden values from tests/fixtures/gen_adamw_golden.py; the gradients are the script's formula).
TEST(TrainOptimizer, AdamWMatchesPyTorchOverSeveralStepsWithDecayAndBiasCorrection) {
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  auto w = torch::tensor({0.5, -0.3, 0.2, 0.1, 0.4, -0.6}, opts).reshape({2, 3}).requires_grad_();
  auto b = torch::tensor({0.05, -0.02}, opts).requires_grad_();
  AdamWOptions o;
  o.weight_decay = 0.1;
  AdamW opt({{"layer.weight", w}, {"layer.bias", b}}, o);
  const double lrs[] = {1e-2, 5e-3, 2e-2, 1e-2, 3e-3};
  for (int t = 1; t <= 5; ++t) {
    auto gw = torch::empty({2, 3}, opts), gb = torch::empty({2}, opts);
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) gw[i][j] = std::sin(t + 3 * i + j);
      gb[i] = std::cos(2 * t + i);
    }
    w.mutable_grad() = gw;
    b.mutable_grad() = gb;
    opt.step(lrs[t - 1]);
  }
  const double want_w[] = {0.46326779134770957, -0.30914441614398863, 0.21652269567341206,
                           0.13599098487304118, 0.41277661735583149,  -0.61188120199112028};
  const double want_b[] = {0.066140474032601246, -0.0065174417030121022};
  auto fw = w.detach().flatten();
  for (int k = 0; k < 6; ++k) EXPECT_NEAR(fw[k].item<double>(), want_w[k], 1e-14) << k;
  for (int k = 0; k < 2; ++k) EXPECT_NEAR(b[k].item<double>(), want_b[k], 1e-14) << k;
}

TEST(TrainOptimizer, WarmupCosineSchedule) {
  EXPECT_DOUBLE_EQ(warmup_cosine_lr(0, 10, 110, 1.0, 0.1), 0.1);
  EXPECT_DOUBLE_EQ(warmup_cosine_lr(9, 10, 110, 1.0, 0.1), 1.0);
  EXPECT_DOUBLE_EQ(warmup_cosine_lr(10, 10, 110, 1.0, 0.1), 1.0);
  EXPECT_NEAR(warmup_cosine_lr(60, 10, 110, 1.0, 0.1), 0.55, 1e-12);  // half-way: mean of peak and floor
  EXPECT_NEAR(warmup_cosine_lr(110, 10, 110, 1.0, 0.1), 0.1, 1e-12);
}

// The first differing setting, as resumes (distill) and the ranks of a distributed run name it: keys in sorted order,
// a key one side lacks as "absent" (or the word its caller gives: "the default"), nested objects and lists of one
// length followed to the value that differs (the tenth probe: a rope_theta edit printed both whole configs); equal
// documents have none.
TEST(JsonKeys, TheFirstDifferenceIsTheFirstKeyInOrderWithItsTwoValues) {
  const auto a = nlohmann::json::parse(R"({"lr": 0.001, "seed": 1, "copy": {"fraction": 0.5}})");
  EXPECT_FALSE(mimic::json_first_difference(a, a).has_value());
  auto b = a;
  b["seed"] = 2;
  b["copy"]["fraction"] = 0.25;
  auto d = mimic::json_first_difference(a, b);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->key, "copy.fraction");  // before "seed"
  EXPECT_EQ(d->first, "0.5");
  EXPECT_EQ(d->second, "0.25");
  auto e = a;
  e["network"] = {{"config", {{"rope_theta", 10000.0}, {"layers", {1, 2}}}}};
  auto f = e;
  f["network"]["config"]["layers"][1] = 3;
  d = mimic::json_first_difference(e, f);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->key, "network.config.layers[1]");
  EXPECT_EQ(d->first + " " + d->second, "2 3");
  f["network"]["config"]["layers"] = {1};  // lists of other lengths: compared whole
  d = mimic::json_first_difference(e, f);
  EXPECT_EQ(d->key + " " + d->first + " " + d->second, "network.config.layers [1,2] [1]");
  // a description of ", "-separated parts (models::network_description) by its part
  d = mimic::json_first_difference(nlohmann::json{{"net", "activation 3, ln_eps 1e-05, rope_theta 10000"}},
                                   nlohmann::json{{"net", "activation 3, ln_eps 1e-05, rope_theta 500000"}});
  EXPECT_EQ(d->key + " " + d->first + " " + d->second, "net \"rope_theta 10000\" \"rope_theta 500000\"");
  auto c = a;
  c.erase("lr");
  c["zeta"] = true;
  d = mimic::json_first_difference(a, c);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->key, "lr");
  EXPECT_EQ(d->second, "absent");
  // a fingerprint leaves a setting at its default out: its callers name that (nested keys too)
  d = mimic::json_first_difference(nlohmann::json{{"copy", a}}, nlohmann::json{{"copy", c}}, "the default");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->key + ": " + d->first + ", " + d->second, "copy.lr: 0.001, the default");
  // and with the defaults' values given, the value (a user who typed the default sees which it is), nested as the
  // documents are; a key the defaults lack still reads the word alone
  const auto defaults = nlohmann::json::parse(R"({"copy": {"lr": 0.01}, "precision": "fp32"})");
  d = mimic::json_first_difference(nlohmann::json{{"copy", a}}, nlohmann::json{{"copy", c}}, "the default", defaults);
  EXPECT_EQ(d->key + ": " + d->first + ", " + d->second, "copy.lr: 0.001, the default 0.01");
  d = mimic::json_first_difference(nlohmann::json{{"precision", "bf16"}}, nlohmann::json::object(), "the default", defaults);
  EXPECT_EQ(d->key + ": " + d->first + ", " + d->second, "precision: \"bf16\", the default \"fp32\"");
  // a digest that moved with a setting beside it comes after it: the setting is named (online distill's --samples read
  // "source.data_digest (\"747f…\" then, \"93ac…\" now)": helper-87's probe); a digest alone still differs
  const auto was = nlohmann::json::parse(R"({"source": {"data_digest": "747f", "samples": 16}})");
  auto now = nlohmann::json::parse(R"({"source": {"data_digest": "93ac", "samples": 20}})");
  d = mimic::json_first_difference(was, now);
  EXPECT_EQ(d->key + " " + d->first + " " + d->second, "source.samples 16 20");
  now["source"]["samples"] = 16;
  d = mimic::json_first_difference(was, now);
  EXPECT_EQ(d->key + " " + d->first + " " + d->second, "source.data_digest \"747f\" \"93ac\"");
  d = mimic::json_first_difference(a, c, "the default", defaults);
  EXPECT_EQ(d->key + ": " + d->first + ", " + d->second, "lr: 0.001, the default");
  d = mimic::json_first_difference(a, nlohmann::json::array());
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->key, "");
}

// The refusals that the options and --arch alone decide live once, in the library: pretrain() says them before it
// reads anything (no config, tokenizer or corpus is named here), and the CLI says the same words as usage errors.
TEST(PretrainOptions, WhatTheOptionsAloneRuleOutIsRefusedBeforeAnythingIsRead) {
  auto options = [](const std::string& arch) {
    mimic::pretrain::PretrainOptions o;
    o.arch = arch;
    o.corpus = "sotu";
    o.train.out_dir = "/nonexistent/out";
    return o;
  };
  auto bert_short = options("bert");
  bert_short.seq_len = 2;
  EXPECT_MIMIC_ERROR(mimic::pretrain::pretrain(bert_short), "--seq-len 2: a BERT block is [CLS], the text's tokens and [SEP]: give at least 3");
  bert_short.seq_len = 3;
  EXPECT_NO_THROW(mimic::pretrain::check_options(bert_short));
  auto bert_recall = options("bert");
  bert_recall.corpus = "mqar";
  EXPECT_MIMIC_ERROR(mimic::pretrain::pretrain(bert_recall), "a recall task (mqar) trains a causal LM: use a causal --arch");
  auto llama_sinusoidal = options("llama");
  llama_sinusoidal.position_init = "sinusoidal";
  EXPECT_MIMIC_ERROR(mimic::pretrain::pretrain(llama_sinusoidal), "a Llama model has rotary positions instead");
  auto recall_init = options("gpt2");
  recall_init.corpus = "ar";
  recall_init.init = "/nonexistent/model";
  EXPECT_MIMIC_ERROR(mimic::pretrain::check_options(recall_init), "--init continues a prose model; a recall task trains a fresh one");
  auto scale_alone = options("gpt2");
  scale_alone.position_scale = 0.5;
  EXPECT_MIMIC_ERROR(mimic::pretrain::check_options(scale_alone), "it needs --position-init sinusoidal");
  EXPECT_NO_THROW(mimic::pretrain::check_options(options("gpt2")));
  // a BERT whose context holds no token between [CLS] and [SEP] passes the options (the default --seq-len is the
  // context's) and is refused once the config is read, naming the context
  auto bert_tiny = options("bert");
  bert_tiny.config = nlohmann::json::parse(mimic::test::read_bytes(std::string(MIMIC_SOURCE_DIR) + "/examples/models/bert-mini/config.json"));
  bert_tiny.config["max_position_embeddings"] = 2;
  bert_tiny.config_source = "--config tiny.json";
  EXPECT_NO_THROW(mimic::pretrain::check_options(bert_tiny));
  EXPECT_MIMIC_ERROR(mimic::pretrain::pretrain(bert_tiny), "a BERT block is [CLS], the text's tokens and [SEP]: the model's context of 2 "
                                                           "(max_position_embeddings in --config tiny.json) holds no token between them");
}
