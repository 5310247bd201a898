// What mimic promises about interrupted runs, concurrent runs and hostile inputs (docs/reliability.md): a file
// appears under its final name only complete, a dead writer's temporaries are removed by the next run and a
// live one's kept, an output directory is held by one run at a time, a FIFO given as input is refused at
// once, and NaN weights or maps are refused before any command writes anything.
#include <cairo.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>

#include "mimic/core/json_keys.h"
#include "mimic/core/paths.h"
#include "mimic/core/words.h"
#include "mimic/distill/distill.h"
#include "mimic/distill/maps_file.h"
#include "mimic/io/atomic_file.h"
#include "mimic/io/output_lock.h"
#include "mimic/io/safetensors.h"
#include "mimic/io/tensor_store.h"
#include "mimic/models/config.h"
#include "mimic/models/model.h"
#include "mimic/record/record.h"
#include "mimic/report/plot.h"
#include "mimic/train/stop_signal.h"
#include "test_util.h"

using mimic::test::TempDir;
namespace fs = std::filesystem;

namespace {

// An input file that exists, for a command refused before it reads it (a missing one is refused while parsing,
// before the mistake a test is after): its path.
std::string junk(const TempDir& dir, const std::string& name) {
  mimic::test::write_bytes(dir.file(name), "not read");
  return dir.file(name);
}

// The names in `dir` (not recursive), sorted.
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Runs `child` in a forked process and waits for it; returns the child's pid (dead once this returns).
pid_t run_in_child(const std::function<void()>& child) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    child();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

std::string teacher() { return mimic::test::model_with_tokenizer("gpt2-prefixed"); }

// Maps of the tiny GPT-2 fixture (teacher()) written as initialised: a valid distill output, made once.
const std::string& good_maps() { return mimic::test::initial_gpt2_maps(); }

// A copy of safetensors file `from` at `to` with one value set to NaN, in the first floating tensor whose name
// contains `which` (metadata kept). Returns that tensor's name.
std::string copy_with_a_nan(const std::string& from, const std::string& to, const std::string& which = "") {
  auto f = mimic::io::SafeTensorsFile::open(from);
  std::vector<std::pair<std::string, at::Tensor>> ts;
  std::string poisoned;
  for (const auto& n : f.names()) {
    auto t = f.load(n);
    if (poisoned.empty() && t.is_floating_point() && t.numel() > 0 && n.find(which) != std::string::npos) {
      t.view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
      poisoned = n;
    }
    ts.emplace_back(n, t);
  }
  EXPECT_FALSE(poisoned.empty()) << "no floating tensor named *" << which << "* in " << from;
  mimic::io::SaveOptions so;
  so.metadata = f.metadata();
  mimic::io::save_safetensors(to, ts, so);
  return poisoned;
}

}  // namespace

TEST(Atomic, AWriteCutShortLeavesNothingUnderTheFinalName) {
  TempDir dir;
  const std::string target = dir.file("out.json");
  // A writer that fails halfway: the old content stays, no temporary is left.
  mimic::io::write_text_atomically(target, "old");
  EXPECT_THROW(mimic::io::write_file_atomically(target,
                                                [](std::ostream& os) {
                                                  os << "half of the new";
                                                  throw mimic::Error("cut short");
                                                }),
               mimic::Error);
  EXPECT_EQ(mimic::test::read_bytes(target), "old");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"out.json"});
  // A writer killed halfway (SIGKILL, no cleanup): no file under the final name, only its temporary.
  const std::string fresh = dir.file("fresh.bin");
  const pid_t writer = run_in_child([&] {
    mimic::io::write_file_atomically(fresh, [](std::ostream& os) {
      os << std::string(1 << 16, 'x') << std::flush;
      ::raise(SIGKILL);
    });
  });
  EXPECT_FALSE(fs::exists(fresh));
  EXPECT_TRUE(fs::exists(fresh + ".tmp." + std::to_string(writer)));
  // The same for a report figure (cairo draws into the temporary).
  const std::string stem = dir.file("figure");
  const pid_t drawer = run_in_child([&] { mimic::report::save_figure(stem, 40, 30, [](cairo_t*) { ::raise(SIGKILL); }); });
  EXPECT_FALSE(fs::exists(stem + ".png"));
  EXPECT_TRUE(fs::exists(stem + ".png.tmp." + std::to_string(drawer)));
  // A complete figure still appears, under both names.
  mimic::report::save_figure(stem, 40, 30, [](cairo_t*) {});
  EXPECT_GT(fs::file_size(stem + ".png"), 0u);
  EXPECT_GT(fs::file_size(stem + ".svg"), 0u);
}

// A write the system refuses (here: a file-size limit, standing in for a full disk, which a test cannot make)
// says why in the system's words — a stream or cairo alone said only "disk full?" or "error while writing to output
// stream" (the fifth probe, F16) — and leaves neither the file nor its temporary.
TEST(Atomic, AWriteTheSystemRefusesNamesTheSystemsReasonAndLeavesNothing) {
  TempDir dir;
  struct Limit {  // RLIMIT_FSIZE for this process while the test runs; SIGXFSZ ignored so that write(2) returns EFBIG
    rlimit old{};
    void (*old_handler)(int) = ::signal(SIGXFSZ, SIG_IGN);
    explicit Limit(rlim_t bytes) {
      ::getrlimit(RLIMIT_FSIZE, &old);
      rlimit small = old;
      small.rlim_cur = bytes;
      ::setrlimit(RLIMIT_FSIZE, &small);
    }
    ~Limit() {
      ::setrlimit(RLIMIT_FSIZE, &old);
      ::signal(SIGXFSZ, old_handler);
    }
  };
  const std::string big = dir.file("big.bin"), stem = dir.file("figure");
  std::string file_error, figure_error;
  {
    Limit limit(4096);
    try {
      mimic::io::write_file_atomically(big, [](std::ostream& os) { os << std::string(1 << 20, 'x'); });
    } catch (const mimic::Error& e) {
      file_error = e.what();
    }
    try {  // a figure of noise: its PNG cannot shrink below the limit
      mimic::report::save_figure(stem, 300, 300, [](cairo_t* cr) {
        for (int i = 0; i < 300; i += 2)
          for (int j = 0; j < 300; j += 2) {
            cairo_set_source_rgb(cr, ((i * 7919 + j * 104729) % 256) / 255.0, ((i * 31 + j * 17) % 256) / 255.0, 0.5);
            cairo_rectangle(cr, i, j, 2, 2);
            cairo_fill(cr);
          }
      });
    } catch (const mimic::Error& e) {
      figure_error = e.what();
    }
  }
  EXPECT_EQ(file_error, "error while writing " + big + ": " + std::strerror(EFBIG));
  EXPECT_EQ(figure_error, "error while writing " + stem + ".png: " + std::strerror(EFBIG));
  EXPECT_TRUE(names_in(dir.path()).empty());
  // the system's words for a full disk, given the cause; a stream that lost errno in a folder with room says so
  EXPECT_THROW(
      try { mimic::io::fail_writing(big, ENOSPC); } catch (const mimic::Error& e) {
        EXPECT_EQ(std::string(e.what()), "error while writing " + big + ": No space left on device");
        throw;
      },
      mimic::Error);
  EXPECT_THROW(
      try { mimic::io::fail_writing(big, 0); } catch (const mimic::Error& e) {
        EXPECT_EQ(std::string(e.what()), "error while writing " + big + ": the write failed (no reason given by the system)");
        throw;
      },
      mimic::Error);
}

TEST(Atomic, StaleTemporariesOfADeadRunAreRemovedAndThoseOfALiveOneKept) {
  TempDir dir;
  const pid_t dead = run_in_child([] {});
  const pid_t live = ::fork();
  if (live == 0) {
    ::pause();
    ::_exit(0);
  }
  const std::string d = std::to_string(dead), l = std::to_string(live);
  fs::create_directories(dir.path() / "out" / "best");
  for (const std::string& name : {"model.safetensors.tmp." + d, "best/config.json.tmp." + d, "log.jsonl.tmp." + l, std::string("notes.tmp.txt")})
    mimic::test::write_bytes((dir.path() / "out" / name).string(), "partial");
  // the next run that takes the directory sweeps it (best/ included)
  { auto lock = mimic::io::lock_output_dir((dir.path() / "out").string()); }
  EXPECT_EQ(names_in(dir.path() / "out"), (std::vector<std::string>{"best", "log.jsonl.tmp." + l, std::string("notes.tmp.txt")}));
  EXPECT_TRUE(names_in(dir.path() / "out" / "best").empty());
  // a single file outside any locked directory: its writer sweeps its own dead temporaries
  mimic::test::write_bytes(dir.file("maps.safetensors.tmp." + d), "partial");
  mimic::test::write_bytes(dir.file("maps.safetensors.tmp." + l), "partial");
  mimic::io::write_text_atomically(dir.file("maps.safetensors"), "complete");
  EXPECT_FALSE(fs::exists(dir.file("maps.safetensors.tmp." + d)));
  EXPECT_TRUE(fs::exists(dir.file("maps.safetensors.tmp." + l)));
  ::kill(live, SIGKILL);
  ::waitpid(live, nullptr, 0);
}

// Another process that takes a lock (`take`) and holds it until it is killed: a running command, seen from outside.
struct HeldElsewhere {
  pid_t pid = -1;
  int go[2] = {-1, -1}, ready[2] = {-1, -1};
  explicit HeldElsewhere(const std::function<mimic::io::OutputLock()>& take) {
    if (::pipe(go) != 0 || ::pipe(ready) != 0) return;
    pid = ::fork();
    if (pid == 0) {
      auto lock = take();
      char c = 1;
      (void)!::write(ready[1], &c, 1);
      (void)!::read(go[0], &c, 1);
      ::_exit(0);
    }
    char c = 0;
    if (::read(ready[0], &c, 1) != 1) pid = -1;
  }
  bool holding() const { return pid > 0; }
  // Sends `sig` and waits for the holder to end; its wait status (-1: none held).
  int kill(int sig = SIGKILL) {
    int status = -1;
    if (pid > 0) ::kill(pid, sig), ::waitpid(pid, &status, 0);
    pid = -1;
    return status;
  }
  ~HeldElsewhere() {
    kill();
    for (int fd : {go[0], go[1], ready[0], ready[1]})
      if (fd >= 0) ::close(fd);
  }
};

TEST(OutputLock, ASecondRunOnALockedOutputDirectoryIsRefusedWithOneLine) {
  TempDir dir;
  const std::string out = dir.file("out");
  // a run (another process) holds the directory until it is killed
  HeldElsewhere holder([&] { return mimic::io::lock_output_dir(out); });
  ASSERT_TRUE(holder.holding());
  EXPECT_MIMIC_ERROR(mimic::io::lock_output_dir(out), "is locked by another running mimic command");
  // the CLI refuses with one line and writes nothing there
  auto r = mimic::test::mimic_cli("export --model " + teacher() + " --out " + out);
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(out + " is locked by another running mimic command"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(out));
  // nor does a command writing one file into it (forward's --out, distill's: both succeeded beside a finetune writing
  // the folder, the file holding the finetune's weights; the probe of 2026-11-27)
  for (const std::string& cmd : {"forward --model " + teacher() + " --text hello --out " + out + "/model.safetensors",
                                 "distill --model " + teacher() + " --data sotu --samples 4 --seq-len 16 --epochs 0 --out " + out + "/m.safetensors"}) {
    auto f = mimic::test::mimic_cli(cmd);
    EXPECT_NE(f.code, 0) << cmd;
    EXPECT_EQ(std::count(f.err.begin(), f.err.end(), '\n'), 1) << f.err;
    EXPECT_NE(f.err.find("lies in " + out + ", the output folder another running mimic command is writing"), std::string::npos) << f.err;
  }
  EXPECT_TRUE(fs::is_empty(out));
  // nor below it (a forward into RUN/best/, an export into RUN/last: both succeeded, and the run died or deleted the
  // export; the fourth probe of 2026-11-27)
  for (const std::string& cmd : {"forward --model " + teacher() + " --text hello --out " + out + "/best/x.safetensors",
                                 "export --model " + teacher() + " --out " + out + "/last"}) {
    auto f = mimic::test::mimic_cli(cmd);
    EXPECT_NE(f.code, 0) << cmd;
    EXPECT_EQ(std::count(f.err.begin(), f.err.end(), '\n'), 1) << f.err;
    EXPECT_NE(f.err.find(" lies inside " + out + ", the output folder another running mimic command is writing"), std::string::npos) << f.err;
  }
  EXPECT_TRUE(fs::is_empty(out));
  // within one process the hold is shared (a stage, then its training engine, then Model::save)
  // and the kernel drops it when the holder dies: no stale lock after a kill
  holder.kill();
  auto a = mimic::io::lock_output_dir(out);
  auto b = mimic::io::lock_output_dir(dir.file("out/../out"));
  EXPECT_TRUE(a.held() && b.held());
  a.release();
  b.release();
  auto ok = mimic::test::mimic_cli("export --model " + teacher() + " --out " + out);
  EXPECT_EQ(ok.code, 0) << ok.err;
}

// A command writing one file (record, distill, forward) into folders that were missing created them, and left them
// empty when it failed or was stopped before writing (helper-66's review of 2026-12-05). They go with the file's
// lock if still empty, as an output folder's do; not while another command holds the folder to write there too.
TEST(OutputLock, AFileLockRemovesTheEmptyFoldersItCreatedWhenLetGo) {
  TempDir dir;
  auto lock = mimic::io::lock_output_file(dir.file("new/sub/x.safetensors"));
  ASSERT_TRUE(fs::is_directory(dir.file("new/sub")));
  lock.release();
  EXPECT_FALSE(fs::exists(dir.file("new")));
  EXPECT_TRUE(fs::is_directory(dir.path()));
  // a file written there keeps its folders
  auto written = mimic::io::lock_output_file(dir.file("kept/sub/x.safetensors"));
  mimic::test::write_bytes(dir.file("kept/sub/x.safetensors"), "x");
  written.release();
  EXPECT_EQ(mimic::test::read_bytes(dir.file("kept/sub/x.safetensors")), "x");
  // another file's lock in the same folder: it stays for that writer
  auto first = mimic::io::lock_output_file(dir.file("shared/a.safetensors"));
  auto second = mimic::io::lock_output_file(dir.file("shared/b.safetensors"));
  first.release();
  EXPECT_TRUE(fs::is_directory(dir.file("shared")));
  mimic::test::write_bytes(dir.file("shared/b.safetensors"), "b");
  second.release();
  EXPECT_TRUE(fs::exists(dir.file("shared/b.safetensors")));
  // a folder where no file can be made (procfs, where even root creates none): the output is named, the hidden lock
  // file after it (the lock file's name alone read as another file's trouble: helper-91's probe)
  if (fs::is_directory("/proc/self")) {
    try {
      mimic::io::lock_output_file("/proc/x.safetensors");
      ADD_FAILURE() << "a lock file was made in /proc";
    } catch (const mimic::Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("cannot write /proc/x.safetensors: ", 0), 0u) << what;  // the reason (errno's words) after it
      EXPECT_NE(what.find(" (creating its lock file /proc/.x.safetensors.lock)"), std::string::npos) << what;
    }
  }
}

// An interrupted run (Ctrl-C) or one a job's time limit ended (SIGTERM) before it wrote anything left the empty --out
// folder it had created, as no destructor runs then (helper-59's probe of 2026-12-04: a probe interrupted, a convert
// killed). The folders the lock created go if still empty, and the process still ends by the signal; a folder that
// was there before, or that holds the run's files, stays, and a signal the process ignores stays ignored.
TEST(OutputLock, ARunEndedBySigintOrSigtermLeavesNoEmptyFolderItCreated) {
  TempDir dir;
  for (int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(sig);
    const std::string top = dir.file("new" + std::to_string(sig)), out = top + "/run/out";
    HeldElsewhere holder([&] {
      ::signal(sig, SIG_DFL);  // as a terminal's command has it (a test run in the background ignores SIGINT)
      return mimic::io::lock_output_dir(out);
    });
    ASSERT_TRUE(holder.holding());
    ASSERT_TRUE(fs::is_directory(out));
    const int status = holder.kill(sig);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << status;
    EXPECT_FALSE(fs::exists(top));
  }
  // a file's lock (.NAME.lock beside it) goes too, as when the holder ends otherwise (it stayed: helper-65's probe
  // of 2026-12-05); a held lock file is removed only by its holder, so no one locks a file about to vanish
  for (int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(sig);
    // in folders the lock created, which go too (an empty new/ stayed: helper-66's review of 2026-12-05)
    const std::string top = dir.file("file" + std::to_string(sig));
    const std::string file = top + "/sub/maps.safetensors", lock_file = top + "/sub/.maps.safetensors.lock";
    HeldElsewhere holder([&] {
      ::signal(sig, SIG_DFL);
      return mimic::io::lock_output_file(file);
    });
    ASSERT_TRUE(holder.holding());
    ASSERT_TRUE(fs::exists(lock_file));
    const int status = holder.kill(sig);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << status;
    EXPECT_FALSE(fs::exists(lock_file));
    EXPECT_FALSE(fs::exists(top));
  }
  fs::create_directories(dir.file("before"));
  const std::string out = dir.file("before/out");
  HeldElsewhere writer([&] {
    ::signal(SIGTERM, SIG_DFL);
    auto lock = mimic::io::lock_output_dir(out);
    mimic::test::write_bytes(out + "/model.safetensors", "x");
    return lock;
  });
  ASSERT_TRUE(writer.holding());
  const int status = writer.kill(SIGTERM);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  EXPECT_TRUE(fs::exists(out + "/model.safetensors"));
  HeldElsewhere existing([&] {
    ::signal(SIGTERM, SIG_DFL);
    return mimic::io::lock_output_dir(dir.file("before"));
  });
  existing.kill(SIGTERM);
  EXPECT_TRUE(fs::is_directory(dir.file("before")));
  // an ignored SIGINT (a run a script started with `&`) stays ignored: the run goes on, holding its folder
  const std::string ignored = dir.file("ignored/out");
  HeldElsewhere nohup([&] {
    ::signal(SIGINT, SIG_IGN);
    return mimic::io::lock_output_dir(ignored);
  });
  ASSERT_TRUE(nohup.holding());
  ::kill(nohup.pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // time to end, were the signal not ignored
  EXPECT_MIMIC_ERROR(mimic::io::lock_output_dir(ignored), "is locked by another running mimic command");
  nohup.kill();
}

// A run that stops on a signal (train::StopOnSignal) puts back the handler it replaced when the first signal comes:
// the second then ends the process as the lock's handler does, its lock file removed (the default, put back before,
// left it: helper-65's probe of 2026-12-05). A StopOnSignal made while another lives is nested and reads the outer's
// request; the handler outlives it.
TEST(OutputLock, ASecondSignalToAStoppingRunEndsItAndRemovesItsLockFile) {
  TempDir dir;
  const std::string file = dir.file("m.safetensors"), lock_file = dir.file(".m.safetensors.lock");
  int told[2];
  ASSERT_EQ(::pipe(told), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGINT, SIG_DFL);
    auto lock = mimic::io::lock_output_file(file);
    mimic::train::StopOnSignal stop(true);
    char c = 0;
    {
      mimic::train::StopOnSignal inner(true);
      c = inner.nested() && !stop.nested() ? 1 : 2;
    }
    (void)!::write(told[1], &c, 1);
    // once asked, say what a nested one reads; the second signal should end the process within these 10 s
    bool said = false;
    for (int i = 0; i < 10000; ++i) {
      if (!said && stop.requested() != 0) {
        mimic::train::StopOnSignal inner(true);
        c = static_cast<char>(inner.requested());
        (void)!::write(told[1], &c, 1);
        said = true;
      }
      ::usleep(1000);
    }
    ::_exit(3);
  }
  ASSERT_GT(pid, 0);
  char c = 0;
  ASSERT_EQ(::read(told[0], &c, 1), 1);
  EXPECT_EQ(c, 1);  // the inner one was nested, the outer not
  ::kill(pid, SIGINT);
  ASSERT_EQ(::read(told[0], &c, 1), 1);
  EXPECT_EQ(c, SIGINT);  // the first: a request, read by a nested one; the run goes on, holding its lock
  EXPECT_TRUE(fs::exists(lock_file));
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  EXPECT_FALSE(fs::exists(lock_file));
  for (int fd : told) ::close(fd);
}

// The eleventh probe (2026-11-30): finetune and pretrain checked what --out holds, then locked it once the model had
// loaded, about a second later; an export, a report or another run finishing in between was replaced or mixed with,
// both exiting 0. They lock first now, as convert, export and report do: a folder another command holds is refused
// as locked before what it holds is read (here a report, which would otherwise be named).
TEST(OutputLock, ATrainingRunLocksItsFolderBeforeItChecksWhatItHolds) {
  TempDir dir;
  const std::string out = dir.file("out");
  fs::create_directories(out);
  mimic::test::write_bytes(out + "/report.html", "<html></html>");
  mimic::test::write_bytes(dir.file("c.json"), R"({"n_embd": 16, "n_layer": 1, "n_head": 2, "n_positions": 32})");
  const std::vector<std::string> runs = {
      "finetune --task lm --model " + teacher() + " --data sotu --steps 1 --seq-len 16 --batch-size 2 --threads 1 --out " + out,
      "pretrain --arch gpt2 --config " + dir.file("c.json") + " --data mqar:vocab=10,seq_len=24,pairs=3 --steps 1 --threads 1 --out " + out};
  for (const auto& cmd : runs) {  // unheld: the report is named
    auto r = mimic::test::mimic_cli(cmd);
    EXPECT_NE(r.err.find("report.html"), std::string::npos) << r.err;
  }
  HeldElsewhere holder([&] { return mimic::io::lock_output_dir(out); });
  ASSERT_TRUE(holder.holding());
  for (const auto& cmd : runs) {
    auto r = mimic::test::mimic_cli(cmd);
    EXPECT_NE(r.code, 0);
    EXPECT_EQ(r.err, "mimic: error: " + out + " is locked by another running mimic command writing there; wait for it to finish or choose another --out\n");
  }
}

// The fourteenth probe (2026-11-30): an export into OUT/last started just before a training run into OUT passed its look
// for a run above it, the run saw an empty last/ and trained, and its rerun replaced the export, exit 0. Each now holds
// its own folder, then looks: the run is refused while another process holds one of the folders it exports into.
TEST(OutputLock, ATrainingRunIsRefusedWhileAnotherCommandHoldsAFolderItExportsInto) {
  TempDir dir;
  const std::string out = dir.file("out");
  mimic::test::write_bytes(dir.file("c.json"), R"({"n_embd": 16, "n_layer": 1, "n_head": 2, "n_positions": 32})");
  HeldElsewhere holder([&] { return mimic::io::lock_output_dir(out + "/last"); });
  ASSERT_TRUE(holder.holding());
  auto r = mimic::test::mimic_cli("pretrain --arch gpt2 --config " + dir.file("c.json") +
                                  " --data mqar:vocab=10,seq_len=24,pairs=3 --steps 1 --threads 1 --out " + out);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(out + "/last is being written by another running mimic command"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(out + "/checkpoint.safetensors"));
  EXPECT_FALSE(fs::exists(out + "/log.jsonl"));
  EXPECT_FALSE(mimic::io::held_by_another(out));
  EXPECT_TRUE(mimic::io::held_by_another(out + "/last"));
  holder.kill();
  EXPECT_FALSE(mimic::io::held_by_another(out + "/last"));
}

// Issue 38: one writer per record file. Another process holds R (as a running record does, --fresh or not): a
// record on R — with --fresh too, which before removed the file under the first writer, both then reporting
// success — is refused in one line and leaves R as it was; files beside it lock apart; the lock file goes with
// its holder, and after a kill the next record runs.
TEST(OutputLock, ASecondRecordOnTheSameFileIsRefusedEvenWithFresh) {
  TempDir dir;
  const std::string out = dir.file("r.h5");
  mimic::test::write_bytes(out, "a record being written");
  HeldElsewhere holder([&] { return mimic::io::lock_output_file(out); });
  ASSERT_TRUE(holder.holding());
  mimic::test::write_bytes(dir.file("t.txt"), mimic::test::text_lines(mimic::test::kDickens, 40));
  const std::string args = "record --model " + mimic::test::model_with_tokenizer("gpt2-prefixed") + " --data " + dir.file("t.txt") +
                           " --seq-len 16 --samples 4 --threads 1 --out ";
  for (const std::string& extra : {"", " --fresh"}) {
    auto r = mimic::test::mimic_cli(args + out + extra);
    EXPECT_NE(r.code, 0) << extra;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(out + " is being written by another running mimic command"), std::string::npos) << r.err;
    EXPECT_EQ(mimic::test::read_bytes(out), "a record being written");
  }
  // the same file by a symlink's name is the same writer's (it was called "damaged … its writer died")
  fs::create_symlink(out, dir.file("link.h5"));
  auto via = mimic::test::mimic_cli(args + dir.file("link.h5"));
  EXPECT_NE(via.code, 0);
  EXPECT_NE(via.err.find(dir.file("link.h5") + " is being written by another running mimic command"), std::string::npos) << via.err;
  EXPECT_EQ(mimic::test::read_bytes(out), "a record being written");
  auto beside = mimic::test::mimic_cli(args + dir.file("other.h5"));  // another file in the same folder
  EXPECT_EQ(beside.code, 0) << beside.err;
  EXPECT_FALSE(fs::exists(dir.file(".other.h5.lock")));  // removed with its holder
  holder.kill();
  // the lock went with its holder; what it held is no record, which --fresh does not replace (Record.FreshReplacesOnlyARecord)
  auto after = mimic::test::mimic_cli(args + out + " --fresh");
  EXPECT_NE(after.err.find("exists and is not a mimic record"), std::string::npos) << after.err;
  fs::remove(out);
  after = mimic::test::mimic_cli(args + out + " --fresh");
  EXPECT_EQ(after.code, 0) << after.err;
}

// A single-file output replaces only its own command's earlier result: distill replaced a record and forward a maps
// file, both exit 0; an --out that is a hard link to an input was written (the input survived only because the
// write renames). The probe of 2026-11-27.
TEST(Outputs, AFileOutputReplacesOnlyItsOwnEarlierResultAndNeverAHardLinkedInput) {
  TempDir dir;
  mimic::test::write_bytes(dir.file("notes.txt"), "The ship sailed on.");
  const std::string fwd = "forward --model " + teacher() + " --text hello --out ";
  auto notes = mimic::test::mimic_cli(fwd + dir.file("notes.txt"));
  EXPECT_NE(notes.code, 0);
  EXPECT_NE(notes.err.find("notes.txt exists and is not a forward output"), std::string::npos) << notes.err;
  EXPECT_EQ(mimic::test::read_bytes(dir.file("notes.txt")), "The ship sailed on.");
  ASSERT_EQ(mimic::test::mimic_cli(fwd + dir.file("f.safetensors")).code, 0);
  auto again = mimic::test::mimic_cli(fwd + dir.file("f.safetensors"));  // its own: replaced
  EXPECT_EQ(again.code, 0) << again.err;
  auto maps = mimic::test::mimic_cli("distill --model " + teacher() + " --data sotu --samples 4 --seq-len 16 --epochs 0 --out " +
                                     dir.file("f.safetensors"));
  EXPECT_NE(maps.code, 0);
  EXPECT_EQ(std::count(maps.err.begin(), maps.err.end(), '\n'), 1) << maps.err;
  EXPECT_NE(maps.err.find("f.safetensors exists and is not a distill output"), std::string::npos) << maps.err;
  fs::create_hard_link(dir.file("notes.txt"), dir.file("hard.txt"));
  auto hard = mimic::test::mimic_cli("forward --model " + teacher() + " --file " + dir.file("notes.txt") + " --out " + dir.file("hard.txt"));
  EXPECT_NE(hard.code, 0);
  EXPECT_NE(hard.err.find("(a hard link to it)"), std::string::npos) << hard.err;
  EXPECT_EQ(mimic::test::read_bytes(dir.file("notes.txt")), "The ship sailed on.");
}

// A single-file output never replaces what is not a regular file: `forward --out /dev/null` once turned the
// machine's /dev/null into a regular file (a probe of 2026-11-27). A FIFO and a directory here stand in for a device.
TEST(Outputs, AnOutputThatIsAFifoOrADirectoryIsRefusedAndLeftAsItWas) {
  TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directories(dir.file("folder"));
  // refused while parsing (cli::out_file_arg), before the model loads
  for (const auto& [out, kind] : std::vector<std::pair<std::string, std::string>>{
           {fifo, "not a regular file (a named pipe, a device)"}, {dir.file("folder"), "a folder: give the name of the file to write"}}) {
    auto r = mimic::test::mimic_cli("forward --model " + teacher() + " --text hello --out " + out, /*timeout_seconds=*/120);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.err.find("--out: " + out + " is " + kind), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  EXPECT_TRUE(fs::is_directory(dir.file("folder")));
  EXPECT_MIMIC_ERROR(mimic::io::write_text_atomically(fifo, "x"), "not a regular file");
}

// The tenth probe (2026-11-29): export and convert found a folder at OUT/config.json (or mimic.json, tokenizer.json)
// only after writing the weights, leaving half a model; a link to nothing as --out read "File exists".
TEST(Outputs, AModelFileNameHoldingAFolderIsRefusedBeforeAnythingIsWritten) {
  TempDir dir;
  for (const char* name : {"config.json", "mimic.json", "tokenizer.json"}) {
    const std::string out = dir.file(std::string("o-") + name);
    fs::create_directories(out + "/" + name);
    const std::string cmd = std::string(name) == "mimic.json"
                                ? "convert --model " + teacher() + " --maps " + good_maps() + " --threads 1 --out " + out
                                : "export --model " + teacher() + " --threads 1 --out " + out;
    auto r = mimic::test::mimic_cli(cmd);
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_NE(r.err.find(out + "/" + name + " is a directory, where the model's file of that name goes"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(out)) left.push_back(e.path().filename().string());
    EXPECT_EQ(left, std::vector<std::string>{name}) << "written before the refusal";
  }
  // a training run too, before it trains (the eleventh probe: a finetune exited 0 beside a dangling tokenizer.json,
  // and its model failed to load; a folder named model.safetensors stopped the run at its end), and a link where it
  // exports its best or last model is the user's, named instead of removed
  const std::string ft = "finetune --task lm --model " + teacher() + " --data sotu --steps 1 --seq-len 16 --batch-size 2 --threads 1 --out ";
  fs::create_directories(dir.file("f1"));
  fs::create_symlink(dir.file("nowhere"), dir.file("f1/tokenizer.json"));
  fs::create_directories(dir.file("f2/model.safetensors"));
  // (f3, f6: a run killed at its start, known by its log: a folder without a run refuses whatever its export folders
  // hold, OutputFolders.AFreshRunRefusesAnotherCommandsResultWhereItExports)
  fs::create_directories(dir.file("f3/last/config.json"));
  mimic::test::write_bytes(dir.file("f3/log.jsonl"), "{\"command\":\"finetune\",\"step\":0}\n");
  fs::create_directories(dir.file("elsewhere"));
  fs::create_directories(dir.file("f4"));
  fs::create_directory_symlink(dir.file("elsewhere"), dir.file("f4/best"));
  // a snapshot's step-N written through a link replaced the model it named, the run's own input too (the twelfth probe)
  fs::create_directories(dir.file("f5"));
  fs::create_directory_symlink(dir.file("elsewhere"), dir.file("f5/step-1"));
  fs::create_directories(dir.file("f6/step-2/tokenizer.json"));
  mimic::test::write_bytes(dir.file("f6/log.jsonl"), "{\"command\":\"finetune\",\"step\":0}\n");
  for (const auto& [out, what] : std::vector<std::pair<std::string, std::string>>{
           {"f1", "f1/tokenizer.json is a link to nothing, where the model's file of that name goes"},
           {"f2", "f2/model.safetensors is a directory, where the model's file"},
           {"f3", "f3/last/config.json is a directory"},
           {"f4", "f4/best is a link (to " + dir.file("elsewhere") + "), where the run exports its best model"},
           {"f5", "f5/step-1 is a link (to " + dir.file("elsewhere") + "), where the run exports a snapshot"},
           {"f6", "f6/step-2/tokenizer.json is a directory"}}) {
    auto t = mimic::test::mimic_cli(ft + dir.file(out));
    EXPECT_EQ(t.code, 1) << t.out;
    EXPECT_NE(t.err.find(what), std::string::npos) << t.err;
    EXPECT_FALSE(fs::exists(dir.file(out + "/checkpoint.safetensors")));
  }
  EXPECT_TRUE(fs::is_symlink(dir.file("f4/best")));
  EXPECT_TRUE(fs::is_empty(dir.file("elsewhere")));
  fs::create_symlink(dir.file("nowhere"), dir.file("dangling"));
  auto r = mimic::test::mimic_cli("export --model " + teacher() + " --threads 1 --out " + dir.file("dangling"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("cannot create the output directory " + dir.file("dangling") + ": it is a link to " + dir.file("nowhere") +
                       ", which does not exist"),
            std::string::npos)
      << r.err;
}

// An unknown option is named with the nearest one the command has (CLI11 said "The following arguments were not
// expected: 0.5 --min-lr-ratio", values first: the tenth probe), and a value that starts with a dash stays a value.
TEST(Cli, AnUnknownOptionIsNamedWithTheNearestOneTheCommandHas) {
  auto r = mimic::test::mimic_cli("generate --model " + teacher() + " --promt whale");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "mimic: error: generate: unknown option '--promt' (did you mean --prompt?); mimic generate --help lists its options\n");
  r = mimic::test::mimic_cli("pretrain --min-lr-ratio 0.5");
  EXPECT_EQ(r.err, "mimic: error: pretrain: unknown option '--min-lr-ratio'; mimic pretrain --help lists its options\n");
  r = mimic::test::mimic_cli("bench train --kindz linear");
  EXPECT_EQ(r.err, "mimic: error: bench train: unknown option '--kindz' (did you mean --kinds?); mimic bench train --help lists its options\n");
  r = mimic::test::mimic_cli("generate --model " + teacher() + " --prompt -x --new-tokens 1 --threads 1");
  EXPECT_EQ(r.code, 0) << r.err;
  // an option where a value is due made a folder named --json (the eleventh probe); a word no option takes is named in
  // the order given (CLI11 listed them in reverse)
  r = mimic::test::mimic_cli("generat --model " + teacher());
  EXPECT_NE(r.err.find("mimic: error: unknown command 'generat' (did you mean generate? the commands: record, "), std::string::npos) << r.err;
  r = mimic::test::mimic_cli("export --model " + teacher() + " --out --json");
  EXPECT_EQ(r.err, "mimic: error: export: --out needs a value, and the word after it, --json, is an option (a value that starts with a dash "
                   "is given as --out=VALUE)\n");
  r = mimic::test::mimic_cli("forward --model " + teacher() + " --text hi --out --jsonx");  // wrote a file named --jsonx (twelfth probe)
  EXPECT_EQ(r.err, "mimic: error: forward: --out needs a value, and the word after it, --jsonx, looks like an option (a value that starts "
                   "with dashes is given as --out=VALUE)\n");
  r = mimic::test::mimic_cli("exprot --model " + teacher());  // a transposition is a typo too
  EXPECT_NE(r.err.find("did you mean export?"), std::string::npos) << r.err;
  r = mimic::test::mimic_cli("generate --model " + teacher() + " --prompt whale 2 x");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "mimic: error: arguments no option takes: '2', 'x' (each value follows the option it belongs to) (see --help)\n");
}

// A model with no tokenizer (pretrain on a recall task) saved where another model's tokenizer files lie removes them:
// a converted model's tokenizer.json in a fresh run's last/ was read as the new model's, and generate printed through
// it with exit 0 (the tenth probe of 2026-11-29). The user's own file there stays.
TEST(Outputs, AModelWithoutATokenizerLeavesNoOtherModelsTokenizerBesideIt) {
  TempDir dir;
  fs::create_directories(dir.file("f/last"));
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "vocab.json", "notes.txt"}) mimic::test::write_bytes(dir.file("f/last/") + name, "{}");
  // an earlier run's folder (killed at its start: its log's first line); in a folder without one, last/ holding
  // anything is refused (OutputFolders.AFreshRunRefusesAnotherCommandsResultWhereItExports)
  mimic::test::write_bytes(dir.file("f/log.jsonl"), "{\"command\":\"pretrain\",\"step\":0}\n");
  mimic::test::write_bytes(dir.file("c.json"), R"({"n_embd": 16, "n_layer": 1, "n_head": 2, "n_positions": 32})");
  auto r = mimic::test::mimic_cli("pretrain --arch gpt2 --config " + dir.file("c.json") + " --data mqar:vocab=10,seq_len=24,pairs=3 --steps 2 "
                                  "--batch-size 2 --warmup 0 --eval-every 0 --threads 1 --out " + dir.file("f"));
  ASSERT_EQ(r.code, 0) << r.err;
  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(dir.file("f/last"))) left.insert(e.path().filename().string());
  EXPECT_EQ(left, (std::set<std::string>{"config.json", "model.safetensors", "notes.txt"}));
}

// convert and export replace a model in --out only where mimic wrote it (its weights' mark, models::kWrittenByKey): a
// user's Qwen checkpoint given as --out was replaced by a Mistral, its generation_config.json left beside it (the
// Llama-family probe of 2026-12-01). Their own earlier results, whole or sharded, they replace as before.
TEST(Outputs, ConvertAndExportReplaceOnlyAModelMimicWrote) {
  TempDir dir;
  const std::string gpt2 = mimic::embedded_model_dir("gpt2-mini"), user = dir.file("user");
  fs::copy(gpt2, user, fs::copy_options::recursive);  // HF's layout, weights without the mark
  mimic::test::write_bytes(user + "/generation_config.json", "{}");
  EXPECT_FALSE(mimic::models::written_by_mimic(user));
  const std::string refusal = "--out " + user + " holds a model mimic did not write";
  for (const std::string& cmd : {"export --model gpt2-mini --dtype f32 --out " + user,
                                 "convert --model gpt2-mini --maps " + junk(dir, "none.safetensors") + " --out " + user}) {
    const auto r = mimic::test::mimic_cli(cmd);
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_NE(r.err.find(refusal), std::string::npos) << r.err;
  }
  EXPECT_EQ(mimic::test::read_bytes(user + "/model.safetensors"), mimic::test::read_bytes(gpt2 + "/model.safetensors"));
  // weights alone, without a config.json — whole, or shards with their index — were replaced, or removed as stale,
  // with exit 0 (helper-77's probe of 2026-12-06); a training run's --out too
  const std::string alone = dir.file("alone"), shards = dir.file("shards");
  fs::create_directories(alone);
  fs::copy_file(gpt2 + "/model.safetensors", alone + "/model.safetensors");
  fs::create_directories(shards);
  fs::copy_file(gpt2 + "/model.safetensors", shards + "/model-00001-of-00002.safetensors");
  mimic::test::write_bytes(shards + "/model.safetensors.index.json", R"({"weight_map": {}})");
  for (const auto& [folder, names] : std::vector<std::pair<std::string, std::string>>{
           {alone, "model.safetensors"}, {shards, "model-00001-of-00002.safetensors, model.safetensors.index.json"}})
    for (const std::string& cmd : {"export --model gpt2-mini --dtype f32 --out " + folder,
                                   "convert --model gpt2-mini --maps " + junk(dir, "none.safetensors") + " --out " + folder,
                                   "finetune --task lm --model gpt2-mini --data sotu --steps 1 --out " + folder}) {
      const auto r = mimic::test::mimic_cli(cmd);
      EXPECT_NE(r.code, 0) << cmd;
      EXPECT_NE(r.err.find("--out " + folder + " holds weights mimic did not write (" + names + ", no config.json): what this command "
                           "writes would replace or remove them"), std::string::npos) << cmd << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
  EXPECT_EQ(mimic::test::read_bytes(alone + "/model.safetensors"), mimic::test::read_bytes(gpt2 + "/model.safetensors"));
  EXPECT_EQ(mimic::test::read_bytes(shards + "/model-00001-of-00002.safetensors"), mimic::test::read_bytes(gpt2 + "/model.safetensors"));
  // an export's own result: marked, and replaced by the next export, sharded or whole
  const std::string e = dir.file("e");
  for (const char* layout : {"", " --shard-embeddings", ""}) {
    auto r = mimic::test::mimic_cli("export --model gpt2-mini --out " + e + layout);
    ASSERT_EQ(r.code, 0) << layout << ": " << r.err;
    EXPECT_TRUE(mimic::models::written_by_mimic(e)) << layout;
    EXPECT_EQ(fs::exists(e + "/model.safetensors"), std::string(layout).empty());
  }
  // the mark is metadata beside HF's "format": the tensors are the model's
  const auto marked = mimic::io::SafeTensorsFile::open(e + "/model.safetensors").metadata();
  EXPECT_EQ(marked, (std::map<std::string, std::string>{{"format", "pt"}, {"written_by", "mimic"}}));
}

// A training run that starts fresh in a folder holding another run's model removes that model's files first: a
// converted model's mimic.json left beside a softmax pretrain's weights made the new model load as linear attention
// (a probe of 2026-11-27); a BERT's vocab.txt would be read as the new model's tokenizer. The user's other files stay.
TEST(Outputs, AFreshTrainingRunRemovesTheModelFilesAnEarlierRunLeft) {
  TempDir dir;
  const std::string config = dir.file("c.json"), out = dir.file("out");
  mimic::test::write_bytes(config, R"({"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64})");
  const std::string common = "pretrain --arch gpt2 --config " + config +
                             " --data mqar:vocab=64,seq_len=32,pairs=4 --seq-len 32 --batch-size 4 --steps 4 --warmup 1 --eval-every 0 --threads 1 --out ";
  auto linear = mimic::test::mimic_cli(common + dir.file("linear") + " --attention linear:elu");
  ASSERT_EQ(linear.code, 0) << linear.err;
  fs::create_directories(out);
  // an earlier run's folder (its log shows it; a model alone there is another command's result, which is refused)
  for (const char* f : {"config.json", "model.safetensors", "mimic.json", "log.jsonl"}) fs::copy_file(fs::path(dir.file("linear")) / f, fs::path(out) / f);
  mimic::test::write_bytes(out + "/vocab.txt", "[PAD]\n");
  mimic::test::write_bytes(out + "/model-00002-of-00002.safetensors", "stale shard");
  mimic::test::write_bytes(out + "/notes.txt", "mine");
  auto fresh = mimic::test::mimic_cli(common + out);
  ASSERT_EQ(fresh.code, 0) << fresh.err;
  for (const char* gone : {"mimic.json", "vocab.txt", "model-00002-of-00002.safetensors"}) EXPECT_FALSE(fs::exists(fs::path(out) / gone)) << gone;
  EXPECT_TRUE(fs::exists(fs::path(out) / "notes.txt"));
  auto info = mimic::test::mimic_cli("info " + out);
  EXPECT_NE(info.out.find("softmax in layers 0-1"), std::string::npos) << info.out << info.err;
}

// finetune --fresh in a pretrain run's folder replaced that run's checkpoint and model (issue 38): a training
// command neither resumes nor replaces another command's run; its own run it still replaces with --fresh. A
// checkpoint written before the command was kept is known by its fingerprint (pretrain's names an arch).
TEST(Outputs, ATrainingCommandNeverReplacesAnotherCommandsRunFreshIncluded) {
  TempDir dir;
  const std::string config = dir.file("c.json"), out = dir.file("run");
  mimic::test::write_bytes(config, R"({"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64})");
  const std::string data = " --data mqar:vocab=64,seq_len=32,pairs=4 --seq-len 32 --batch-size 4 --steps 2 --warmup 1 --eval-every 0 --threads 1";
  auto pre = mimic::test::mimic_cli("pretrain --arch gpt2 --config " + config + data + " --out " + out);
  ASSERT_EQ(pre.code, 0) << pre.err;
  const std::string ft_out = dir.file("ft");
  auto ft = mimic::test::mimic_cli("finetune --task lm --model " + out + data + " --out " + ft_out);
  ASSERT_EQ(ft.code, 0) << ft.err;
  const auto before = mimic::test::read_bytes(out + "/checkpoint.safetensors");
  for (const char* fresh : {"", " --fresh"}) {
    auto into = mimic::test::mimic_cli("finetune --task lm --model " + ft_out + data + " --out " + out + fresh);
    EXPECT_EQ(into.code, 1) << fresh;
    EXPECT_EQ(into.err, "mimic: error: --out " + out + " holds a pretrain run (checkpoint.safetensors): finetune neither resumes nor replaces "
                        "another command's run, --fresh included; choose another --out, or move that run out of the way first\n");
  }
  EXPECT_EQ(mimic::test::read_bytes(out + "/checkpoint.safetensors"), before);
  // the other way round
  auto pre2 = mimic::test::mimic_cli("pretrain --arch gpt2 --config " + config + data + " --out " + ft_out + " --fresh");
  EXPECT_EQ(pre2.code, 1);
  EXPECT_NE(pre2.err.find("holds a finetune run (checkpoint.safetensors): pretrain neither resumes"), std::string::npos) << pre2.err;
  // an older checkpoint without the command: known by its fingerprint
  mimic::test::edit_safetensors_json(out + "/checkpoint.safetensors", "state", [](nlohmann::json& j) {
    ASSERT_EQ(j.at("command"), "pretrain");
    j.erase("command");
  });
  auto old = mimic::test::mimic_cli("finetune --task lm --model " + ft_out + data + " --out " + out + " --fresh");
  EXPECT_NE(old.err.find("holds a pretrain run"), std::string::npos) << old.err;
  // the command's own run: --fresh starts it over
  auto again = mimic::test::mimic_cli("pretrain --arch gpt2 --config " + config + data + " --out " + out + " --fresh");
  EXPECT_EQ(again.code, 0) << again.err;
  // nor does an export or a conversion write into a run's subfolders (the fifth probe: export into a finished run's
  // last/ left a BERT beside the run's GPT-2)
  // — at any depth (the sixth probe: RUN/step-2/deep was accepted, and the run's next fresh start removed it)
  for (const std::string& sub : {"/last", "/step-1", "/x", "/last/deep", "/best/a/b"}) {
    auto ex = mimic::test::mimic_cli("export --model " + teacher() + " --out " + out + sub);
    EXPECT_EQ(ex.code, 1) << sub;
    EXPECT_NE(ex.err.find("lies inside the training run in "), std::string::npos) << ex.err;
  }
  EXPECT_FALSE(fs::exists(out + "/x"));
  // A run killed before its first checkpoint leaves its log alone, whose first line names the command: finetune took
  // over a folder holding a pretrain run's log (the seventh probe of 2026-11-29)
  fs::create_directories(dir.file("early"));
  fs::copy_file(out + "/log.jsonl", dir.file("early/log.jsonl"));
  EXPECT_EQ(mimic::test::read_bytes(dir.file("early/log.jsonl")).rfind("{\"command\":\"pretrain\",\"step\":0}\n", 0), 0u);
  auto early = mimic::test::mimic_cli("finetune --task lm --model " + ft_out + data + " --out " + dir.file("early"));
  EXPECT_EQ(early.code, 1);
  EXPECT_NE(early.err.find("holds a pretrain run (log.jsonl): finetune neither resumes nor replaces"), std::string::npos) << early.err;
  EXPECT_EQ(names_in(dir.file("early")), std::vector<std::string>{"log.jsonl"});
}

// The eighth probe of 2026-11-29: the folder writers were refused inside a training run's folder, but forward, record,
// distill and bench peer wrote their files there (distill its OUT.ckpt too). A run is known by its checkpoint or by
// its log's first line, which names the command; a log.jsonl that is no training log of mimic's is somebody else's
// file, which a fresh finetune replaced.
TEST(OutputFolders, NoFileIsWrittenInsideATrainingRunAndAForeignLogIsNotReplaced) {
  TempDir dir;
  fs::create_directories(dir.file("run/last"));
  mimic::test::write_bytes(dir.file("run/log.jsonl"), "{\"command\":\"finetune\",\"step\":0}\n");
  for (const std::string& args : {"forward --model " + teacher() + " --text whale --out " + dir.file("run/x.safetensors"),
                                  "record --model " + teacher() + " --data all --out " + dir.file("run/last/r.h5"),
                                  "distill --record " + junk(dir, "none.h5") + " --out " + dir.file("run/m.safetensors"),
                                  "bench peer --inputs " + dir.file("run/p.safetensors")}) {
    auto r = mimic::test::mimic_cli(args + " --threads 1");
    EXPECT_EQ(r.code, 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find("lies inside the training run in " + fs::canonical(dir.file("run")).string() + " (a finetune run"),
              std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_EQ(names_in(dir.file("run")), (std::vector<std::string>{"last", "log.jsonl"}));
  EXPECT_TRUE(fs::is_empty(dir.file("run/last")));
  fs::create_directories(dir.file("notes"));
  mimic::test::write_bytes(dir.file("notes/log.jsonl"), "my lab notes\n");
  auto ft = mimic::test::mimic_cli("finetune --task lm --model " + teacher() + " --data all --steps 1 --threads 1 --out " + dir.file("notes"));
  EXPECT_EQ(ft.code, 1);
  EXPECT_NE(ft.err.find("holds log.jsonl, which is not a mimic training log"), std::string::npos) << ft.err;
  EXPECT_EQ(mimic::test::read_bytes(dir.file("notes/log.jsonl")), "my lab notes\n");
  // a JSON-lines log with an integer step (HF's, PyTorch's) is not mimic's either: it was replaced, and what the folder's
  // last/ held adopted and replaced (the fifteenth probe of 2026-11-30); mimic's log opens with {"step": 0, "command": …}
  mimic::test::write_bytes(dir.file("notes/log.jsonl"), "{\"step\": 5, \"loss\": 1.0}\n");
  auto stepped = mimic::test::mimic_cli("finetune --task lm --model " + teacher() + " --data all --steps 1 --threads 1 --out " + dir.file("notes"));
  EXPECT_EQ(stepped.code, 1);
  EXPECT_NE(stepped.err.find("holds log.jsonl, which is not a mimic training log"), std::string::npos) << stepped.err;
  EXPECT_EQ(mimic::test::read_bytes(dir.file("notes/log.jsonl")), "{\"step\": 5, \"loss\": 1.0}\n");
}

// The seventh probe of 2026-11-29: a report written into a distillation's checkpoint folder (maps.safetensors.ckpt/rep)
// stopped that distillation from resuming or starting over, since distill keeps only its own files there. Every
// command writing an --out refuses one inside such a folder, at any depth, before any work, and leaves it as it was.
TEST(OutputFolders, NoCommandWritesInsideADistillationsCheckpointFolder) {
  TempDir dir;
  const std::string maps = dir.file("m.safetensors"), ckpt = maps + ".ckpt";
  fs::copy_file(good_maps(), maps);
  ASSERT_TRUE(fs::is_directory(good_maps() + ".ckpt"));
  fs::copy(good_maps() + ".ckpt", ckpt, fs::copy_options::recursive);
  const auto before = names_in(ckpt);
  mimic::test::write_bytes(dir.file("c.json"), R"({"n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 16})");
  for (const std::string& args : {"report --record " + junk(dir, "none.h5") + " --out " + ckpt + "/rep",
                                  "export --model " + teacher() + " --out " + ckpt + "/a/b",
                                  "convert --model " + teacher() + " --maps " + maps + " --out " + ckpt + "/c",
                                  "forward --model " + teacher() + " --text whale --out " + ckpt + "/f.safetensors",
                                  "record --model " + teacher() + " --data all --out " + ckpt + "/r.h5",
                                  "finetune --task lm --model " + teacher() + " --data all --steps 1 --out " + ckpt + "/ft",
                                  "pretrain --arch gpt2 --data all --steps 1 --config " + dir.file("c.json") + " --out " + ckpt + "/p",
                                  "distill --record " + junk(dir, "none.h5") + " --out " + ckpt + "/m2.safetensors",
                                  "bench peer --inputs " + ckpt + "/p.safetensors"}) {
    auto r = mimic::test::mimic_cli(args + " --threads 1");
    EXPECT_EQ(r.code, 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find("lies inside " + fs::canonical(ckpt).string() + ", a distillation's checkpoint folder"), std::string::npos)
        << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_EQ(names_in(ckpt), before);
  // beside it, and in a folder that only looks like one (a done.safetensors that is not distill's), writing is fine
  fs::create_directories(dir.file("look.ckpt"));
  mimic::test::write_bytes(dir.file("look.ckpt/done.safetensors"), "my notes");
  for (const std::string& out : {dir.file("beside"), dir.file("look.ckpt/e")}) {
    auto ex = mimic::test::mimic_cli("export --model " + teacher() + " --threads 1 --out " + out);
    EXPECT_EQ(ex.code, 0) << out << ": " << ex.err;
  }
}

TEST(Inputs, AFifoGivenAsAnInputIsRefusedAtOnce) {
  TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // a model directory whose weights are a FIFO
  fs::create_directories(dir.file("m"));
  for (const auto& e : fs::directory_iterator(teacher()))
    if (e.path().filename() != "model.safetensors") fs::copy_file(e.path(), fs::path(dir.file("m")) / e.path().filename());
  ASSERT_EQ(::mkfifo(dir.file("m/model.safetensors").c_str(), 0600), 0);
  // Each through the CLI under `timeout`, so that a reader that blocks fails the test instead of hanging it (a
  // blocked reader waits forever, so the limit is generous: a start under AddressSanitizer on a loaded machine is slow).
  for (const std::string& args : {"report --record " + fifo + " --out " + dir.file("r"),
                                  // --eval said "no file" (the seventh probe of 2026-11-29)
                                  "report --record " + junk(dir, "none.h5") + " --eval " + fifo + " --out " + dir.file("r"),
                                  "distill --eval-only --record " + fifo + " --feature-map elu",
                                  "eval --model " + teacher() + " --file " + fifo,
                                  "generate --model " + dir.file("m") + " --prompt hello",
                                  "convert --model " + teacher() + " --maps " + fifo + " --out " + dir.file("c")}) {
    auto r = mimic::test::mimic_cli(args, /*timeout_seconds=*/120);
    if (r.code == 124) {  // the first is enough (six blocked readers would outlast ctest's limit on a test)
      ADD_FAILURE() << "blocked on the FIFO: mimic " << args;
      break;
    }
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.err.find("named pipe (FIFO), not a regular file"), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  // And in the library. Meanwhile a thread keeps opening the FIFO's write end, so that a reader that waits
  // for a writer is released and reads an empty file: it fails the expectations instead of hanging the test.
  struct Nudger {
    std::atomic<bool> done{false};
    std::thread thread;
    ~Nudger() {
      done = true;
      thread.join();
    }
  } nudger;
  nudger.thread = std::thread([&] {
    while (!nudger.done) {
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  EXPECT_MIMIC_ERROR(mimic::io::read_text_file(fifo), "named pipe");
  EXPECT_MIMIC_ERROR(mimic::io::SafeTensorsFile::open(fifo), "named pipe");
  EXPECT_MIMIC_ERROR(mimic::record::RecordReader r(fifo), "named pipe");
  EXPECT_MIMIC_ERROR(mimic::io::read_text_file(dir.path().string()), "is a directory, not a regular file");
}

// No command writes over, around or into what it reads (docs/reliability.md, "An output is never an input"): an --out
// equal to an input, holding one, lying inside one, or reaching one through a symlink is refused in one line before
// any work, and the input is left as it was.
TEST(Inputs, NoCommandWritesOverOrIntoItsInputs) {
  TempDir dir;
  const std::string m = dir.file("work/m");
  fs::create_directories(dir.file("work"));
  fs::copy(teacher(), m, fs::copy_options::recursive);
  fs::copy(teacher(), dir.file("work/t.ckpt"), fs::copy_options::recursive);
  fs::copy_file(good_maps(), dir.file("maps.safetensors"));
  mimic::test::write_bytes(dir.file("t.txt"), mimic::test::text_lines(mimic::test::kDickens, 20));
  mimic::test::write_bytes(dir.file("rec.h5"), "not read: the refusal comes first");
  fs::create_directory_symlink(m, dir.file("link"));
  // a folder of links into another model folder (as an HF hub snapshot is): export wrote through them (the fifth probe)
  fs::create_directories(dir.file("links"));
  for (const auto& e : fs::directory_iterator(m)) fs::create_symlink(e.path(), fs::path(dir.file("links")) / e.path().filename());
  auto listing = [&] {
    std::string all;
    for (const auto& e : fs::recursive_directory_iterator(dir.path()))
      all += e.path().string() + (e.is_regular_file() ? ":" + std::to_string(fs::file_size(e.path())) : "") + "\n";
    return all;
  };
  const std::string before = listing();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"distill --record " + dir.file("rec.h5") + " --out " + dir.file("rec.h5"), "is the input --record"},
      {"finetune --task lm --model " + m + " --data all --out " + m, "is the input --model"},
      {"finetune --task lm --model " + m + " --data all --out " + m + "/ft", "lies inside the input --model"},
      {"finetune --task lm --model " + teacher() + " --teacher " + m + " --kd 1 --data all --out " + dir.file("work"),
       "holds the input --teacher"},
      {"convert --model " + m + " --maps " + dir.file("maps.safetensors") + " --out " + dir.file("link"), "is the input --model"},
      {"export --model " + dir.file("link") + " --out " + m, "is the input --model"},
      {"export --model " + dir.file("links") + " --out " + m + " --dtype f32", "(linked from it): write the result elsewhere"},
      {"record --model " + m + " --data " + dir.file("t.txt") + " --out " + dir.file("t.txt"), "is the input --data"},
      // an existing file is no folder to write a report into: said while parsing, before the inputs are compared
      {"report --record " + dir.file("rec.h5") + " --out " + dir.file("rec.h5"), "exists and is not a folder"},
      {"pretrain --arch gpt2 --init " + m + " --data all --out " + dir.path().string(), "holds the input --init"},
      {"forward --model " + m + " --file " + dir.file("t.txt") + " --out " + dir.file("t.txt"), "is the input --file"},
      // distill's checkpoint folder OUT.ckpt, which --fresh empties (the probe of 2026-11-27 lost a teacher there)
      {"distill --model " + dir.file("work/t.ckpt") + " --data all --fresh --out " + dir.file("work/t"),
       "the checkpoint folder " + dir.file("work/t") + ".ckpt of --out " + dir.file("work/t") + " is the input --model"}};
  for (const auto& [args, why] : cases) {
    auto r = mimic::test::mimic_cli(args + " --threads 1");
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.err.find(why), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_EQ(listing(), before) << "an input changed";
  // a corpus name is no path, and an --out beside the inputs is fine
  auto ok = mimic::test::mimic_cli("export --model " + m + " --out " + dir.file("work/m2") + " --threads 1");
  EXPECT_EQ(ok.code, 0) << ok.err;
}

TEST(NanInputs, NanWeightsAreRefusedByEveryCommandBeforeAnythingIsWritten) {
  TempDir dir;
  const std::string bad = dir.file("nan-model");
  fs::copy(teacher(), bad, fs::copy_options::recursive);
  // in the token embeddings, which every forward pass reads
  const std::string poisoned = copy_with_a_nan(teacher() + "/model.safetensors", bad + "/model.safetensors", "wte");
  const std::string why = bad + "/model.safetensors: tensor '" + poisoned + "' holds 1 NaN or infinite value";
  for (const std::string& args : {"generate --model " + bad + " --prompt hello --new-tokens 2",
                                  "eval --model " + bad + " --text \"" + mimic::test::kDickens + "\"",
                                  "convert --model " + bad + " --maps " + good_maps() + " --out " + dir.file("converted"),
                                  "export --model " + bad + " --out " + dir.file("exported"),
                                  "forward --model " + bad + " --text hello --out " + dir.file("forward.safetensors")}) {
    auto r = mimic::test::mimic_cli(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
  }
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"nan-model"});  // no output of any command
}

TEST(NanInputs, NanMapsAreRefusedWhenOpenedBeforeAnythingIsWritten) {
  TempDir dir;
  const std::string bad = dir.file("nan-maps.safetensors");
  const std::string poisoned = copy_with_a_nan(good_maps(), bad);
  EXPECT_NO_THROW(mimic::distill::DistilledMaps::open(good_maps()));
  const std::string why = bad + ": tensor '" + poisoned + "' holds 1 NaN or infinite value";
  EXPECT_MIMIC_ERROR(mimic::distill::DistilledMaps::open(bad), why);
  mimic::test::write_bytes(dir.file("t.txt"), mimic::test::text_lines(mimic::test::kDickens, 20));
  for (const std::string& args :
       {"convert --model " + teacher() + " --maps " + bad + " --out " + dir.file("converted"),
        "distill --eval-only --model " + teacher() + " --data " + dir.file("t.txt") + " --samples 4 --val-fraction 0.5 --seq-len 16 --maps " + bad + " --json"}) {
    auto r = mimic::test::mimic_cli(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
  }
  EXPECT_FALSE(fs::exists(dir.file("converted")));
}

// Issue 38: a classifier's outputs are its own labels, by its id2label/label2id — not the data set's sort order. The
// same classifier with its label ids swapped (the classifier's rows and id2label/label2id alike) must score the same
// data identically; a data label the classifier does not know is a one-line error listing the ones it knows; a
// library caller handing the labels in another order is refused.
TEST(Labels, AClassifierIsScoredThroughItsOwnLabel2idAndUnknownLabelsAreRefused) {
  TempDir dir;
  mimic::test::write_word_decided_jsonl(dir.file("t.jsonl"));
  const std::string base = mimic::test::model_with_tokenizer("bert-mlm");
  auto ft = mimic::test::mimic_cli("finetune --task cls --model " + base + " --data " + dir.file("t.jsonl") +
                                   " --steps 30 --warmup 2 --lr 1e-2 --batch-size 4 --seq-len 16 --eval-every 30 --threads 1 --json --out " +
                                   dir.file("a"));
  ASSERT_EQ(ft.code, 0) << ft.err;
  fs::copy(dir.file("a"), dir.file("b"), fs::copy_options::recursive);
  {
    auto store = mimic::io::TensorStore::open_dir(dir.file("a"));
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    int swapped = 0;
    for (const auto& n : store.names()) {
      auto t = store.load(n);
      if (n.rfind("classifier.", 0) == 0) t = t.flip({0}).contiguous(), ++swapped;  // 2 labels: rows 0 and 1 trade places
      tensors.emplace_back(n, t);
    }
    ASSERT_EQ(swapped, 2);  // weight and bias
    mimic::io::save_safetensors(dir.file("b/model.safetensors"), tensors);
    auto cfg = nlohmann::json::parse(mimic::test::read_bytes(dir.file("b/config.json")));
    ASSERT_EQ(cfg["id2label"], (nlohmann::json{{"0", "0"}, {"1", "1"}}));
    cfg["id2label"] = {{"0", "1"}, {"1", "0"}};
    cfg["label2id"] = {{"1", 0}, {"0", 1}};
    mimic::test::write_bytes(dir.file("b/config.json"), cfg.dump());
  }
  auto score = [&](const std::string& model, const std::string& data) {
    return mimic::test::mimic_cli("eval --task cls --model " + dir.file(model) + " --data " + dir.file(data) + " --split test --seq-len 16 --json");
  };
  // 7 test examples of both labels (an odd count: a model read with its labels swapped cannot score the same)
  std::string mixed;
  for (int i = 0; i < 7; ++i)
    mixed += nlohmann::json{{"text", std::string(i % 3 ? "a wonderful day " : "a terrible day ") + std::to_string(i)}, {"label", i % 3 ? "1" : "0"},
                            {"split", "test"}}.dump() + "\n";
  mixed += R"({"text": "a day", "label": "0", "split": "train"})" "\n" R"({"text": "a day", "label": "1", "split": "validation"})" "\n";
  mimic::test::write_bytes(dir.file("m.jsonl"), mixed);
  auto a = score("a", "m.jsonl"), b = score("b", "m.jsonl");
  ASSERT_EQ(a.code, 0) << a.err;
  // "a day" is given as 0 and as 1: scored as given, and said (helper-52's probe of 2026-12-04: no sign of a slip)
  EXPECT_NE(a.err.find("mimic: note: " + dir.file("m.jsonl") + ": a text is given with different labels (first at " + dir.file("m.jsonl") + ":8 and " +
                       dir.file("m.jsonl") + ":9): each row keeps its own label"), std::string::npos) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["accuracy"], jb["accuracy"]);
  EXPECT_EQ(jb["labels"], (nlohmann::json{"1", "0"}));  // reported in the model's order
  // the same confusion, its rows and columns in b's order
  EXPECT_EQ(jb["confusion"][0][0], ja["confusion"][1][1]);
  EXPECT_EQ(jb["confusion"][0][1], ja["confusion"][1][0]);
  // finetuning the swapped model keeps the model's own order (t.jsonl's integer labels are its ids)
  auto again = mimic::test::mimic_cli("finetune --task cls --model " + dir.file("b") + " --data " + dir.file("t.jsonl") +
                                      " --steps 2 --warmup 1 --lr 1e-4 --batch-size 4 --seq-len 16 --threads 1 --json --out " + dir.file("b2"));
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(mimic::test::read_bytes(dir.file("b2/config.json")))["id2label"], (nlohmann::json{{"0", "1"}, {"1", "0"}}));
  // its --json says that order and the class F1 is of, as eval's (docs/finetune.md said so; it did not: helper-92's
  // probe), and what trained: every parameter of the model
  const auto jagain = nlohmann::json::parse(again.out);
  EXPECT_EQ(jagain["labels"], (nlohmann::json{"1", "0"}));
  EXPECT_EQ(jagain["f1_of"], "0");
  EXPECT_EQ(jagain["trainable"], "all");
  const auto info = mimic::test::mimic_cli("info --json " + dir.file("b"));
  ASSERT_EQ(info.code, 0) << info.err;
  EXPECT_EQ(jagain["trainable_parameters"], nlohmann::json::parse(info.out)["parameters"]);
  // a teacher of the same labels in another order is scored through its own ids, as eval --teacher scores it: finetune
  // refused it (helper-52's probe of 2026-12-04); its test accuracy is b's, which is a's
  auto taught = mimic::test::mimic_cli("finetune --task cls --model " + dir.file("a") + " --teacher " + dir.file("b") + " --data " +
                                       dir.file("m.jsonl") + " --steps 1 --warmup 1 --lr 1e-4 --batch-size 1 --seq-len 16 --threads 1 --json --out " +
                                       dir.file("a2"));
  ASSERT_EQ(taught.code, 0) << taught.err;
  EXPECT_NE(taught.err.find(":9): each row keeps its own label"), std::string::npos) << taught.err;
  // m.jsonl's one train row is "0": the head's output for "1" never trains — said (helper-69's probe: without a word)
  EXPECT_NE(taught.err.find("mimic: note: " + dir.file("m.jsonl") + ": label \"1\" occurs only in the validation or test rows: no train row "
                            "teaches its output"), std::string::npos) << taught.err;
  EXPECT_EQ(again.err.find("occurs only in the validation"), std::string::npos) << again.err;  // t.jsonl trains both
  const auto jt = nlohmann::json::parse(taught.out);
  EXPECT_EQ(jt["teacher"]["test"]["accuracy"], ja["accuracy"]) << taught.out;
  EXPECT_EQ(jt["teacher"]["test"]["n"], 7) << taught.out;
  // data without test rows: the test scores are null, not zeros that read as an accuracy of 0 (the same probe)
  mimic::test::write_bytes(dir.file("tv.jsonl"), R"({"text": "a day", "label": "0", "split": "train"})" "\n"
                                                 R"({"text": "a night", "label": "1", "split": "validation"})" "\n");
  auto no_test = mimic::test::mimic_cli("finetune --task cls --model " + dir.file("a") + " --data " + dir.file("tv.jsonl") +
                                        " --steps 1 --warmup 1 --lr 1e-4 --batch-size 2 --seq-len 16 --threads 1 --json --out " + dir.file("a3"));
  ASSERT_EQ(no_test.code, 0) << no_test.err;
  // a batch larger than the training split repeats rows within a step: said (helper-92's probe: without a word)
  EXPECT_NE(no_test.err.find("mimic: note: a batch of 2 examples is larger than the training split (1 row): each step holds some rows "
                             "more than once"), std::string::npos) << no_test.err;
  const auto jn = nlohmann::json::parse(no_test.out);
  EXPECT_TRUE(jn["test"].is_null()) << no_test.out;
  EXPECT_EQ(jn["validation"]["n"], 1) << no_test.out;
  auto printed = mimic::test::mimic_cli("finetune --task cls --model " + dir.file("a") + " --data " + dir.file("tv.jsonl") +
                                        " --steps 1 --warmup 1 --lr 1e-4 --batch-size 1 --seq-len 16 --threads 1 --out " + dir.file("a4"));
  ASSERT_EQ(printed.code, 0) << printed.err;
  EXPECT_NE(printed.out.find("validation accuracy"), std::string::npos) << printed.out;
  EXPECT_NE(printed.out.find("validation F1 (of '1')"), std::string::npos) << printed.out;
  EXPECT_EQ(printed.out.find("test accuracy"), std::string::npos) << printed.out;
  // a label the classifier does not know
  mimic::test::write_bytes(dir.file("u.jsonl"), std::string(R"({"text": "a wonderful day", "label": "1"})") + "\n" +
                                                    R"({"text": "a terrible day", "label": "0"})" + "\n" + R"({"text": "a day", "label": "2"})" + "\n" +
                                                    R"({"text": "a night", "label": "3"})" + "\n");
  auto u = score("a", "u.jsonl");
  EXPECT_NE(u.code, 0);
  // every one (the first alone was named), and where each is found first (a label on the last line alone was not placed)
  // the file named by its path, as the loader names it (the fifteenth probe: its base name alone)
  EXPECT_EQ(u.err.find("mimic: error: " + dir.file("u.jsonl") + ": labels"), 0u) << u.err;
  EXPECT_NE(u.err.find(R"(labels ["2","3"] (first at )" + dir.file("u.jsonl") + ":3, " + dir.file("u.jsonl") + ":4) are not among"),
            std::string::npos) << u.err;
  EXPECT_NE(u.err.find(R"(["0","1"])"), std::string::npos) << u.err;
  // a test set of one class alone is scored through the classifier's labels (the loader refused a file with one
  // label: the eighth probe of 2026-11-29); a new classifier from it is refused, naming the file
  std::string one = R"({"text": "a day", "label": "1", "split": "train"})" "\n" R"({"text": "a day", "label": "1", "split": "validation"})" "\n";
  for (int i = 0; i < 3; ++i) one += nlohmann::json{{"text", "a wonderful day " + std::to_string(i)}, {"label", "1"}, {"split", "test"}}.dump() + "\n";
  mimic::test::write_bytes(dir.file("one.jsonl"), one);
  auto o1 = score("b", "one.jsonl");
  ASSERT_EQ(o1.code, 0) << o1.err;
  const auto j1 = nlohmann::json::parse(o1.out);
  EXPECT_EQ(j1["n"], 3);
  EXPECT_EQ(j1["labels"], (nlohmann::json{"1", "0"}));
  EXPECT_EQ(j1["confusion"][0][0].get<int64_t>() + j1["confusion"][0][1].get<int64_t>(), 3);  // all of label "1" (b's id 0)
  EXPECT_EQ(j1["confusion"][1][0].get<int64_t>() + j1["confusion"][1][1].get<int64_t>(), 0);
  // side by side, a ratio only of positive numbers: one class's MCC is 0 for both, and 0/0 printed "0.000x" (helper-52)
  auto side = mimic::test::mimic_cli("eval --task cls --model " + dir.file("b") + " --teacher " + dir.file("a") + " --data " + dir.file("one.jsonl") +
                                     " --split test --seq-len 16 --threads 1");
  ASSERT_EQ(side.code, 0) << side.err;
  EXPECT_NE(side.out.find("mcc                        0.0000         0.0000          -\n"), std::string::npos) << side.out;
  EXPECT_NE(side.out.find("1.000x"), std::string::npos) << side.out;  // the accuracies, b's and a's alike
  auto fresh = mimic::test::mimic_cli("finetune --task cls --model " + base + " --data " + dir.file("one.jsonl") +
                                      " --steps 2 --batch-size 4 --seq-len 16 --threads 1 --out " + dir.file("c"));
  EXPECT_EQ(fresh.code, 1);
  EXPECT_NE(fresh.err.find(R"(one.jsonl has one label (["1"]): a new classifier needs at least two)"), std::string::npos) << fresh.err;
  EXPECT_FALSE(fs::exists(dir.file("c")));
  // the library's guard: labels in another order than the classifier's
  mimic::models::LoadOptions lo;
  lo.head = "cls";
  lo.labels = {"0", "1"};
  EXPECT_MIMIC_ERROR(mimic::models::load_model(dir.file("b"), lo), "its classifier's labels are");
  // Integer labels are the ids themselves, whatever the classifier names them (the tenth probe: "label": 1 was matched
  // as the name "1", and a ham/spam classifier refused 0/1 labels). a's labels renamed: the ids score as a's names do.
  fs::copy(dir.file("a"), dir.file("named"), fs::copy_options::recursive);
  auto cfg = nlohmann::json::parse(mimic::test::read_bytes(dir.file("named/config.json")));
  cfg["id2label"] = {{"0", "ham"}, {"1", "spam"}};
  cfg["label2id"] = {{"ham", 0}, {"spam", 1}};
  mimic::test::write_bytes(dir.file("named/config.json"), cfg.dump());
  std::string ids = mixed;
  for (const auto& [from, to] : {std::pair<std::string, std::string>{R"("label":"0")", R"("label":0)"}, {R"("label":"1")", R"("label":1)"},
                                 {R"("label": "0")", R"("label": 0)"}, {R"("label": "1")", R"("label": 1)"}})
    for (size_t at; (at = ids.find(from)) != std::string::npos;) ids.replace(at, from.size(), to);
  ASSERT_EQ(ids.find(R"("label":")"), std::string::npos) << ids;
  mimic::test::write_bytes(dir.file("ids.jsonl"), ids);
  auto by_id = score("named", "ids.jsonl");
  ASSERT_EQ(by_id.code, 0) << by_id.err;
  EXPECT_EQ(nlohmann::json::parse(by_id.out)["accuracy"], ja["accuracy"]);
  EXPECT_EQ(nlohmann::json::parse(by_id.out)["labels"], (nlohmann::json{"ham", "spam"}));
  EXPECT_EQ(nlohmann::json::parse(by_id.out)["confusion"], ja["confusion"]);
  // an id beyond the classifier's outputs, and names and ids in one file, are refused naming the line or the label
  mimic::test::write_bytes(dir.file("id2.jsonl"), ids + R"({"text": "a night", "label": 2, "split": "test"})" + "\n");
  auto beyond = score("named", "id2.jsonl");
  EXPECT_NE(beyond.err.find(dir.file("id2.jsonl") + R"(: label 2 is an id beyond )" + dir.file("named") + R"('s 2 labels (ids 0 to 1: ["ham","spam"]))"),
            std::string::npos) << beyond.err;
  mimic::test::write_bytes(dir.file("both.jsonl"), ids + R"({"text": "a night", "label": "spam", "split": "test"})" + "\n");
  auto both = score("named", "both.jsonl");
  EXPECT_NE(both.err.find(R"(both.jsonl:10: label "spam" is a name, the lines before give ids (integers): give every label the same way)"),
            std::string::npos) << both.err;
}

// Issue 38: the numbers of a config.json every family reads lie in their range — a negative layer-norm epsilon ran and
// wrote all-NaN logits, a negative dropout was accepted — and id2label is a map of the ids 0..k-1.
TEST(Configs, EpsilonDropoutAndId2labelAreCheckedWhateverTheFamily) {
  const auto gpt2 = nlohmann::json::parse(mimic::test::read_bytes(mimic::test::model_with_tokenizer("gpt2-prefixed") + "/config.json"));
  const auto bert = nlohmann::json::parse(mimic::test::read_bytes(mimic::test::model_with_tokenizer("bert-mlm") + "/config.json"));
  auto with = [](nlohmann::json j, const std::string& key, const nlohmann::json& v) {
    j[key] = v;
    return j;
  };
  using mimic::models::parse_config;
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "layer_norm_epsilon", -1)), "layer_norm_epsilon -1 is a normalisation epsilon and must lie in (0, 1)");
  EXPECT_MIMIC_ERROR(parse_config(with(bert, "layer_norm_eps", 0)), "layer_norm_eps 0 is a normalisation epsilon");
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "resid_pdrop", -0.1)), "resid_pdrop -0.1 is a dropout probability and must lie in [0, 1)");
  EXPECT_MIMIC_ERROR(parse_config(with(bert, "hidden_dropout_prob", 1.0)), "hidden_dropout_prob 1 is a dropout probability");
  EXPECT_MIMIC_ERROR(parse_config(with(bert, "id2label", {{"0", "a"}, {"5", "b"}})), "id2label's keys must be the ids 0 to 1");
  EXPECT_MIMIC_ERROR(parse_config(with(bert, "id2label", {{"0", "a"}, {"1", 3}})), "id2label[1] must be a name");
  for (const char* key : {" 0", "+0", "00"})  // read as 0 (the fourth probe of 2026-11-27)
    EXPECT_MIMIC_ERROR(parse_config(with(bert, "id2label", {{key, "a"}, {"1", "b"}})), "written as decimals (\"0\", \"1\", ...), got '" + std::string(key) + "'");
  EXPECT_EQ(parse_config(with(bert, "id2label", {{"1", "spam"}, {"0", "ham"}})).labels, (std::vector<std::string>{"ham", "spam"}));
  EXPECT_TRUE(parse_config(with(bert, "id2label", {{"0", "LABEL_0"}, {"1", "LABEL_1"}})).labels.empty());  // HF's placeholders
  // the dropout keys mimic does not apply are still probabilities (the probe of 2026-11-27), null where HF allows it;
  // a name given to two ids is refused
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "attn_pdrop", 1.5)), "attn_pdrop is a dropout probability and must lie in [0, 1), got 1.5");
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "embd_pdrop", -0.1)), "embd_pdrop is a dropout probability");
  EXPECT_MIMIC_ERROR(parse_config(with(bert, "classifier_dropout", 2)), "classifier_dropout is a dropout probability");
  EXPECT_MIMIC_ERROR(parse_config(with(bert, "attention_probs_dropout_prob", "x")), "attention_probs_dropout_prob is a dropout probability");
  EXPECT_NO_THROW(parse_config(with(bert, "classifier_dropout", nullptr)));
  EXPECT_NO_THROW(parse_config(with(gpt2, "summary_first_dropout", 0.1)));
  EXPECT_MIMIC_ERROR(parse_config(with(bert, "id2label", {{"0", "a"}, {"1", "b"}, {"2", "a"}})), "id2label names 'a' twice (ids 0 and 2)");
  // HF's aliases of GPT-2's keys win in HF where both are given: one that differs is refused (the fifteenth probe:
  // another network in HF, the same tensors), and one HF cannot use (null, 4.0: the sixteenth); an equal one is accepted
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "num_attention_heads", gpt2["n_head"].get<int64_t>() * 2)),
                     "num_attention_heads " + std::to_string(gpt2["n_head"].get<int64_t>() * 2) + " differs from n_head " + gpt2["n_head"].dump());
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "hidden_size", 1)), "hidden_size 1 differs from n_embd");
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "num_hidden_layers", 99)), "num_hidden_layers 99 differs from n_layer");
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "max_position_embeddings", 3)), "max_position_embeddings 3 differs from n_positions");
  EXPECT_NO_THROW(parse_config(with(gpt2, "num_attention_heads", gpt2["n_head"])));
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "hidden_size", nullptr)), "hidden_size null is no integer like n_embd");
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "num_attention_heads", gpt2["n_head"].get<double>())), "num_attention_heads " +
                     nlohmann::json(gpt2["n_head"].get<double>()).dump() + " is no integer like n_head");
  // the third probe of 2026-11-27: a label2id contradicting id2label was accepted (and ignored); HF's default one
  // (LABEL_N) beside named id2label entries still loads
  const auto named = with(bert, "id2label", {{"0", "ham"}, {"1", "spam"}});
  EXPECT_MIMIC_ERROR(parse_config(with(named, "label2id", {{"ham", 1}, {"spam", 0}})), "label2id gives 'ham' the id 1, id2label the id 0");
  EXPECT_MIMIC_ERROR(parse_config(with(named, "label2id", {{"ham", 0}, {"spam", 1}, {"eggs", 2}})), "label2id names 'eggs', which id2label does not");
  EXPECT_EQ(parse_config(with(named, "label2id", {{"ham", 0}, {"spam", 1}})).labels, (std::vector<std::string>{"ham", "spam"}));
  EXPECT_NO_THROW(parse_config(with(named, "label2id", {{"LABEL_0", 0}, {"LABEL_1", 1}})));
  // without an id2label, label2id names the labels (it was ignored); it must be an object of ids 0..n-1
  auto only = bert;
  only.erase("id2label");
  EXPECT_EQ(parse_config(with(only, "label2id", {{"spam", 0}, {"ham", 1}})).labels, (std::vector<std::string>{"spam", "ham"}));
  EXPECT_MIMIC_ERROR(parse_config(with(only, "label2id", {{"spam", 0}, {"ham", 0}})), "label2id's ids must be 0 to 1 once each");
  EXPECT_MIMIC_ERROR(parse_config(with(only, "label2id", nlohmann::json::array({"ham", "spam"}))), "label2id must be an object");
  // keys that change what the model computes, which mimic does not implement, were ignored
  EXPECT_MIMIC_ERROR(parse_config(with(bert, "is_decoder", true)), "is_decoder true: a decoder-style (causal) BERT, which mimic does not implement");
  EXPECT_NO_THROW(parse_config(with(gpt2, "is_decoder", true)));  // a causal family is a decoder already (it was called a BERT)
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "add_cross_attention", true)), "add_cross_attention true: cross-attention layers");
  EXPECT_MIMIC_ERROR(parse_config(with(bert, "problem_type", "regression")), "problem_type \"regression\": mimic's classifiers are single-label");
  EXPECT_NO_THROW(parse_config(with(bert, "is_decoder", false)));
  EXPECT_MIMIC_ERROR(parse_config(with(bert, "pad_token_id", bert["vocab_size"].get<int64_t>())), "pad_token_id " + bert["vocab_size"].dump() +
                     " is not a token of the model's vocabulary (vocab_size " + bert["vocab_size"].dump() + ": ids 0 to ");
  // id2label decides the number of labels, as HF reads it (a num_labels beside a map of another size was refused as the
  // classifier's shape: the eleventh probe)
  EXPECT_EQ(parse_config(with(with(bert, "id2label", {{"0", "a"}, {"1", "b"}}), "num_labels", 3)).num_labels, 2);
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "eos_token_id", -1)), "eos_token_id -1 is not a token");
  EXPECT_NO_THROW(parse_config(with(gpt2, "pad_token_id", nullptr)));
  EXPECT_NO_THROW(parse_config(with(bert, "problem_type", "single_label_classification")));
  // the length a classifier was finetuned at (eval's default for it): a whole number of at least 3 tokens
  EXPECT_EQ(parse_config(with(bert, "mimic_classifier_seq_len", 256)).classifier_seq_len, 256);
  EXPECT_EQ(parse_config(bert).classifier_seq_len, 0);
  EXPECT_MIMIC_ERROR(parse_config(with(bert, "mimic_classifier_seq_len", 2)), "key 'mimic_classifier_seq_len' must be at least 3, got 2");
  EXPECT_MIMIC_ERROR(parse_config(with(bert, "mimic_classifier_seq_len", "256")), "key 'mimic_classifier_seq_len' must be an integer");
  // a head apart from the token embedding, which GPT-2 and BERT here do not have: it was ignored, and pretrain wrote it
  // beside tied weights (the eighth probe of 2026-11-29); a classifier has no such head
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "tie_word_embeddings", false)), "tie_word_embeddings false: a language-model head apart");
  EXPECT_NO_THROW(parse_config(with(gpt2, "tie_word_embeddings", true)));
  EXPECT_MIMIC_ERROR(parse_config(with(bert, "tie_word_embeddings", false)), "tie_word_embeddings false");  // its MLM decoder
  EXPECT_NO_THROW(parse_config(with(with(bert, "architectures", nlohmann::json::array({"BertForSequenceClassification"})), "tie_word_embeddings", false)));
  // sizes beyond any published model, whatever the key (the seventh probe of 2026-11-29: pretrain --config allocated
  // and trained 100,000 layers); the largest real sizes still load
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "n_layer", 100000)), "n_layer 100000 is beyond any published model's layers: mimic reads at most 1024");
  EXPECT_MIMIC_ERROR(parse_config(with(bert, "num_hidden_layers", 1025)), "num_hidden_layers 1025 is beyond any published model's layers");
  EXPECT_MIMIC_ERROR(parse_config(with(bert, "intermediate_size", 1 << 20)), "intermediate_size 1048576 is beyond any published model's inner (MLP) size: mimic reads at most 262144");
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "n_positions", 1 << 25)), "n_positions 33554432 is beyond any published model's context: mimic reads at most 16777216");
  EXPECT_NO_THROW(parse_config(with(with(gpt2, "n_layer", 126), "n_positions", 1 << 20)));
  // each refusal names the key the file holds and its value (the tenth probe: "the layer-norm epsilon" for
  // rms_norm_eps, "the number of heads 3", a model_type of the wrong type read as missing)
  EXPECT_MIMIC_ERROR(parse_config(with(bert, "num_attention_heads", 3)), "hidden_size " + bert["hidden_size"].dump() + " is not divisible by num_attention_heads 3");
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "n_head", 3)), "n_embd " + gpt2["n_embd"].dump() + " is not divisible by n_head 3");
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "model_type", 7)), "key 'model_type' must be a string naming the family (gpt2, bert, ");
  EXPECT_MIMIC_ERROR(parse_config(with(gpt2, "vocab_size", (1 << 24) + 1)), "vocab_size 16777217 is beyond any published model's vocabulary size");
  EXPECT_NO_THROW(parse_config(gpt2));
  EXPECT_NO_THROW(parse_config(bert));
}

// What --json prints: a string holding bytes that are not UTF-8 (a generated text cut inside a character) is printed
// with U+FFFD in their place; nlohmann's dump threw type_error.316 after generate's whole work (the probe of 2026-11-27).
TEST(JsonOutput, BytesThatAreNotUtf8PrintAsReplacementCharacters) {
  const nlohmann::json j = {{"text", std::string("caf\xC3")}, {"ok", "whale"}};
  EXPECT_THROW(j.dump(), nlohmann::json::type_error);  // the plain dump, which print_json used before
  EXPECT_EQ(mimic::json_dump(j, -1), "{\"ok\":\"whale\",\"text\":\"caf\xEF\xBF\xBD\"}");
  EXPECT_EQ(mimic::json_parse(mimic::json_dump(j), "the output")["text"], "caf\xEF\xBF\xBD");
  // and a file that is no UTF-8 JSON is named with its bytes shown, not quoted raw onto stderr (the fifth probe)
  try {
    mimic::json_parse("{\"name\": \"caf\xE9\"}", "c.json");
    ADD_FAILURE() << "parsed";
  } catch (const mimic::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("c.json: malformed JSON: "), std::string::npos) << what;
    EXPECT_NE(what.find("\\xE9"), std::string::npos) << what;
    EXPECT_EQ(what.find('\xE9'), std::string::npos) << what;
  }
}

// Issue 38, the probe of 2026-11-27: a key given twice in a config.json was read as its last value (a hand edit that
// added n_head instead of changing it); pretrain --config replaced a vocab_size or model_type it sets itself without
// a word. Both are refused by name; the same key in two different objects is not a repetition.
TEST(Configs, AKeyGivenTwiceAndKeysPretrainSetsAreRefusedByName) {
  EXPECT_MIMIC_ERROR(mimic::json_parse(R"({"n_head": 4, "n_layer": 2, "n_head": 8})", "config.json"),
                     "config.json: key 'n_head' is given twice in one object (give each key once)");
  EXPECT_MIMIC_ERROR(mimic::json_parse(R"({"a": {"x": 1, "x": 2}})", "f.json"), "f.json: key 'x' is given twice");
  const auto nested = mimic::json_parse(R"({"x": 1, "a": {"x": 2, "b": [{"x": 3}, {"x": 4}]}, "c": {"x": 5}})", "f.json");
  EXPECT_EQ(nested["c"]["x"], 5);
  EXPECT_MIMIC_ERROR(mimic::json_parse(R"({"b": [{"x": 1}, [{"y": 1, "y": 2}]]})", "f.json"), "f.json: key 'y' is given twice");
  EXPECT_EQ(mimic::json_parse(R"([{"y": [1, {"z": null}]}, 2.5, "s", true])", "f.json"), nlohmann::json::parse(R"([{"y": [1, {"z": null}]}, 2.5, "s", true])"));
  TempDir dir;
  const std::string model = mimic::test::model_with_tokenizer("gpt2-prefixed");
  fs::copy(model, dir.file("m"), fs::copy_options::recursive);
  const std::string text = mimic::test::read_bytes(dir.file("m/config.json"));
  const auto brace = text.find('{');
  ASSERT_NE(brace, std::string::npos);
  mimic::test::write_bytes(dir.file("m/config.json"), text.substr(0, brace + 1) + R"("n_head": 3, )" + text.substr(brace + 1));
  auto info = mimic::test::mimic_cli("info " + dir.file("m"));
  EXPECT_EQ(info.code, 1);
  EXPECT_NE(info.err.find("config.json: key 'n_head' is given twice in one object"), std::string::npos) << info.err;
  const std::string base = "pretrain --arch gpt2 --data sotu --steps 1 --seq-len 16 --batch-size 2 --out " + dir.file("p") + " --config ";
  mimic::test::write_bytes(dir.file("v.json"), R"({"n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 16, "vocab_size": 1000})");
  auto vocab = mimic::test::mimic_cli(base + dir.file("v.json"));
  EXPECT_EQ(vocab.code, 1);
  EXPECT_NE(vocab.err.find("v.json: vocab_size 1000 differs from the tokenizer's 50257, which pretrain sets: leave vocab_size out"),
            std::string::npos)
      << vocab.err;
  mimic::test::write_bytes(dir.file("t.json"), R"({"n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 16, "model_type": "bert"})");
  auto type = mimic::test::mimic_cli(base + dir.file("t.json"));
  EXPECT_EQ(type.code, 1);
  EXPECT_NE(type.err.find("t.json: model_type \"bert\" differs from --arch gpt2"), std::string::npos) << type.err;
  // the seventh probe of 2026-11-29: eos/bos_token_id and architectures were replaced by pretrain's own without a word;
  // a config within the size bounds that cannot fit in memory is refused before allocating
  for (const auto& [config, message] : std::vector<std::pair<std::string, std::string>>{
           {R"("eos_token_id": 13)", "e.json: eos_token_id 13 differs from the tokenizer's end-of-text id 50256, which pretrain sets: leave eos_token_id out"},
           {R"("bos_token_id": 0)", "e.json: bos_token_id 0 differs from the tokenizer's end-of-text id 50256"},
           {R"("architectures": ["GPT2Model"])", "e.json: architectures [\"GPT2Model\"] differs from the objective's [\"GPT2LMHeadModel\"]"},
           {R"("initializer_range": -1)", "e.json: initializer_range -1 differs from the initialisation's 0.02"},
           {R"("tie_word_embeddings": false)", "tie_word_embeddings false: a language-model head apart from the token embedding"},
           // a misspelt key trained the family's default in its place (the probe of 2026-12-02)
           {R"("n_iner": 64)", "e.json: n_iner is no key mimic reads in a GPT-2 config: did you mean n_inner? (absent, it takes its default)"},
           // the refusals name the file (the ninth probe: they said "model config")
           {R"("n_layer": 100000)", "e.json: n_layer 100000 is beyond any published model's layers"},
           {R"("n_layer": 1000, "n_embd": 65536)", "e.json: 1000 layers of width 65536 make about "}}) {
    std::string c = R"({"n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 16, )" + config + "}";
    if (config.find("n_layer") != std::string::npos) c = R"({"n_head": 2, "n_positions": 16, )" + config + (config.find("n_embd") == std::string::npos ? R"(, "n_embd": 8})" : "}");
    mimic::test::write_bytes(dir.file("e.json"), c);
    auto r = mimic::test::mimic_cli(base + dir.file("e.json"));
    EXPECT_EQ(r.code, 1) << c;
    EXPECT_NE(r.err.find(message), std::string::npos) << c << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  // what pretrain sets, given as it would set it, is no conflict
  mimic::test::write_bytes(dir.file("same.json"), R"({"n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 16, "eos_token_id": 50256, "architectures": ["GPT2LMHeadModel"]})");
  auto same = mimic::test::mimic_cli("pretrain --arch gpt2 --data sotu --steps 1 --seq-len 16 --batch-size 2 --threads 1 --out " + dir.file("same") +
                                     " --config " + dir.file("same.json"));
  EXPECT_EQ(same.code, 0) << same.err;
  fs::remove_all(dir.file("same"));
  // without --seq-len a context shorter than 256 is taken whole (the default 256 was refused: helper-56's probe of
  // 2026-12-04): the run is the one --seq-len 16 names, which a rerun with it finds finished
  const std::string short_run = "pretrain --arch gpt2 --data sotu --steps 1 --batch-size 2 --threads 1 --out " + dir.file("short") +
                                " --config " + dir.file("same.json");
  auto whole = mimic::test::mimic_cli(short_run);
  EXPECT_EQ(whole.code, 0) << whole.err;
  EXPECT_EQ(mimic::test::mimic_cli(short_run + " --seq-len 16").code, 0);
  auto other = mimic::test::mimic_cli(short_run + " --seq-len 8");
  EXPECT_EQ(other.code, 1);
  EXPECT_NE(other.err.find("seq_len (16 then, 8 now)"), std::string::npos) << other.err;
  fs::remove_all(dir.file("short"));
  mimic::test::write_bytes(dir.file("d.json"), R"({"n_embd": 8, "n_layer": 1, "n_head": 2, "n_head": 4, "n_positions": 16})");
  auto twice = mimic::test::mimic_cli(base + dir.file("d.json"));
  EXPECT_EQ(twice.code, 1);
  EXPECT_NE(twice.err.find("d.json: key 'n_head' is given twice"), std::string::npos) << twice.err;
  // a recall task longer than a Llama's context names the Llama key (it said n_positions, GPT-2's)
  mimic::test::write_bytes(dir.file("l.json"), R"({"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
      "num_attention_heads": 2, "max_position_embeddings": 16})");
  auto ctx = mimic::test::mimic_cli("pretrain --arch llama --data mqar:vocab=10,seq_len=24,pairs=3 --steps 1 --out " + dir.file("p") +
                                    " --config " + dir.file("l.json"));
  EXPECT_EQ(ctx.code, 1);
  EXPECT_NE(ctx.err.find("the task's seq_len 24 exceeds the model's context of 16 (max_position_embeddings in --config " + dir.file("l.json") + ")"), std::string::npos)
      << ctx.err;
  EXPECT_FALSE(fs::exists(dir.file("p")));
}

// Issue 38: numbers mean what they say. An empty layer or head list selected everything; it is refused at the
// boundary, before any work, in one line (so is a list that is not one). A request larger than the data — more
// samples than a text or a record holds — is clamped, and a note says so.
TEST(Numbers, EmptyListsAreRefusedAndRequestsBeyondTheDataAreClampedWithANote) {
  TempDir dir;
  for (const std::string& args : {"record --model gpt2-mini --data all --out " + dir.file("r.h5") + " --layers ''",
                                  "distill --record " + junk(dir, "none.h5") + " --out " + dir.file("m") + " --layers ' '",
                                  "report --record " + junk(dir, "none.h5") + " --out " + dir.file("d") + " --heads ''",
                                  "report --record " + junk(dir, "none.h5") + " --out " + dir.file("d") + " --plot-layers ''",
                                  "convert --model gpt2-mini --maps " + junk(dir, "none") + " --out " + dir.file("c") + " --layers ''"}) {
    auto r = mimic::test::mimic_cli(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.err.find("an empty list selects nothing"), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(dir.file("r.h5")));
  }
  // a text option whose empty value read as "not given" (the probe of 2026-11-27)
  for (const std::string& opt : {"--keep-softmax ''", "--probe-weights ' '"}) {
    auto r = mimic::test::mimic_cli("convert --model " + teacher() + " --maps " + good_maps() + " --out " + dir.file("c") + " " + opt);
    EXPECT_NE(r.code, 0) << opt;
    EXPECT_NE(r.err.find("an empty value means nothing here: leave the option out instead"), std::string::npos) << opt << ": " << r.err;
  }
  auto bad = mimic::test::mimic_cli("report --record " + junk(dir, "none.h5") + " --out " + dir.file("d") + " --layers 1,x");
  EXPECT_NE(bad.err.find("must be all or a list like 0,2,4-5, got '1,x'"), std::string::npos) << bad.err;
  // an index twice, or a range backwards, was taken without a word (the fourth probe of 2026-11-27)
  for (const auto& [list, message] : std::vector<std::pair<std::string, std::string>>{
           {"0,0", "names 0 twice in '0,0'"}, {"2,1-3", "names 2 twice in '2,1-3'"}, {"5-2", "the range '5-2' runs backwards: write 2-5"}}) {
    auto r = mimic::test::mimic_cli("distill --record " + junk(dir, "none.h5") + " --out " + dir.file("m") + " --layers " + list);
    EXPECT_NE(r.err.find(message), std::string::npos) << list << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  // more samples than the text gives, then than the record holds
  mimic::test::write_bytes(dir.file("t.txt"), mimic::test::text_lines(mimic::test::kDickens, 40));
  const std::string model = mimic::test::model_with_tokenizer("gpt2-prefixed");
  const std::string record = "record --model " + model + " --data " + dir.file("t.txt") + " --seq-len 16 --samples 100000 --out " +
                             dir.file("r.h5") + " --threads 1 --weights-samples 100001 --json";
  auto rec = mimic::test::mimic_cli(record);
  ASSERT_EQ(rec.code, 0) << rec.err;
  EXPECT_NE(rec.err.find("note: --samples 100000: the data gives "), std::string::npos) << rec.err;
  EXPECT_NE(rec.err.find("note: --weights-samples 100001: the file holds "), std::string::npos) << rec.err;
  EXPECT_GT(nlohmann::json::parse(rec.out)["tokens_per_second"].get<double>(), 0);
  // a rerun records nothing and measured no speed: null, not 0 tokens/s
  auto rerun = mimic::test::mimic_cli(record);
  ASSERT_EQ(rerun.code, 0) << rerun.err;
  const auto rj = nlohmann::json::parse(rerun.out);
  EXPECT_EQ(rj["recorded"], 0);
  EXPECT_TRUE(rj["tokens_per_second"].is_null()) << rerun.out;
  EXPECT_TRUE(rj["record_vs_forward"].is_null()) << rerun.out;
  auto rep = mimic::test::mimic_cli("report --record " + dir.file("r.h5") + " --samples 99999 --out " + dir.file("rep") + " --threads 1");
  ASSERT_EQ(rep.code, 0) << rep.err;
  EXPECT_NE(rep.err.find("note: --samples 99999: the record holds "), std::string::npos) << rep.err;
  // The seventh probe of 2026-11-29: more keys, tokens, samples, batches or vocabulary than exist were cut without a
  // word; a list with blanks (' 0') passed the check and was refused after loading (exit 1, not a usage error's 2).
  auto cut = mimic::test::mimic_cli("report --record " + dir.file("r.h5") + " --out " + dir.file("rep2") +
                                    " --threads 1 --json --layers ' 0' --heads '0 ,1' --mass-k 100000 --plot-tokens 100000");
  ASSERT_EQ(cut.code, 0) << cut.err;
  EXPECT_NE(cut.err.find("note: --mass-k 100000 is more than the record's tokens per sample (16): using 16"), std::string::npos) << cut.err;
  EXPECT_NE(cut.err.find("note: --plot-tokens 100000 is more than the record's tokens per sample (16): using 16"), std::string::npos) << cut.err;
  // and a default fitted to the record (--local-window 64 against 16 tokens) is no request of the user's: no note (the
  // eighteenth probe)
  EXPECT_EQ(cut.err.find("--local-window"), std::string::npos) << cut.err;
  const auto cj = nlohmann::json::parse(cut.out);
  EXPECT_EQ(cj["layers"], nlohmann::json::array({0}));
  EXPECT_EQ(cj["heads"], nlohmann::json::array({0, 1}));
  auto gen = mimic::test::mimic_cli("generate --model " + model + " --prompt whale --temperature 1 --top-k 1048576 --max-new-tokens 1 --threads 1");
  ASSERT_EQ(gen.code, 0) << gen.err;
  EXPECT_NE(gen.err.find("note: --top-k 1048576 is more than the model's vocabulary (50257): using 50257"), std::string::npos) << gen.err;
  // A training command's notes come before its work, above its progress lines: they came after the run, which may
  // last hours (helper-68's probe). MIMIC_PROGRESS=lines:0 prints a line for every step or epoch.
  mimic::test::ScopedEnv lines("MIMIC_PROGRESS", "lines:0");
  auto before_the_work = [](const std::string& err, const std::string& note, const std::string& progress) {
    const auto at = err.find(note), first = err.find(progress);
    EXPECT_NE(at, std::string::npos) << err;
    EXPECT_NE(first, std::string::npos) << "no progress line: " << err;
    EXPECT_LT(at, first) << "the note after the work began: " << err;
  };
  auto online = mimic::test::mimic_cli("distill --model " + model + " --data " + dir.file("t.txt") + " --seq-len 16 --samples 10000000 " +
                                       "--epochs 1 --layers 0 --threads 1 --out " + dir.file("on.safetensors"));
  ASSERT_EQ(online.code, 0) << online.err;
  before_the_work(online.err, "note: --samples 10000000 is more than what --data gives at this --seq-len (", "layer_00 [");
  // --samples 0 takes every sample, as record's does (it was refused: helper-68's leftover), and says the memory
  // that holds before the work: 4 tensors × N × H 2 × T 16 × d 4 × 4 bytes = 2048·N bytes for this model
  const auto given = online.err.find("at this --seq-len (");
  ASSERT_NE(given, std::string::npos) << online.err;
  const int64_t n = std::stoll(online.err.substr(given + std::string("at this --seq-len (").size()));
  auto every = mimic::test::mimic_cli("distill --model " + model + " --data " + dir.file("t.txt") + " --seq-len 16 --samples 0 " +
                                      "--epochs 1 --layers 0 --threads 1 --out " + dir.file("on0.safetensors"));
  ASSERT_EQ(every.code, 0) << every.err;
  before_the_work(every.err,
                  "note: --samples 0 takes every sample of the data: " + std::to_string(n) + " samples of 16 tokens, whose q, k, v and o take " +
                      mimic::byte_size(2048.0 * static_cast<double>(n)) + " of memory while a layer trains; --samples N takes fewer\n",
                  "layer_00 [");
  EXPECT_EQ(mimic::test::read_bytes(dir.file("on0.safetensors")), mimic::test::read_bytes(dir.file("on.safetensors")))
      << "every sample is what the clamped request took";
  auto ft = mimic::test::mimic_cli("finetune --task lm --model " + model + " --data " + dir.file("t.txt") + " --seq-len 8 --batch-size 1 " +
                                   "--steps 1 --eval-batches 10000000 --threads 1 --out " + dir.file("ft"));
  ASSERT_EQ(ft.code, 0) << ft.err;
  before_the_work(ft.err, "note: --eval-batches 10000000 is more than the validation split holds (", "train [");
  before_the_work(ft.err, "note: no warm-up: the default", "train [");
  // a snapshot interval beyond the run wrote none without a word (the thirteenth probe)
  mimic::test::write_bytes(dir.file("c.json"), R"({"n_embd": 16, "n_layer": 1, "n_head": 2, "n_positions": 32})");
  auto snap = mimic::test::mimic_cli("pretrain --arch gpt2 --config " + dir.file("c.json") + " --data mqar:vocab=10,seq_len=24,pairs=3 " +
                                     "--steps 2 --batch-size 2 --warmup 0 --eval-every 0 --snapshot-every 10 --threads 1 --out " + dir.file("p"));
  ASSERT_EQ(snap.code, 0) << snap.err;
  EXPECT_NE(snap.err.find("note: --snapshot-every 10 is more than --steps (2): no snapshot is written"), std::string::npos) << snap.err;
  for (const std::string& args : {"convert --model " + model + " --maps " + dir.file("on.safetensors") + " --layers '0, 0' --out " + dir.file("c"),
                                  "record --model " + model + " --data all --out " + dir.file("r2.h5") + " --layers ' 0-x'"}) {
    auto r = mimic::test::mimic_cli(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;  // the parser's refusal, before any model loads
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// Issue 38: a folder holds one run's result among the files mimic writes there. A BERT exported into a folder
// where a GPT-2 was saved loses the GPT-2's vocab.json and merges.txt (before, the saved BERT then tokenized
// with GPT-2's BPE and exit 0); a converted model's mimic.json goes when plain weights replace it; a report's
// figures of layers the next report does not draw go; files mimic never writes (a user's notes) stay.
// The probe of 2026-11-27: convert or export into a finished training run's folder left its checkpoint and log, and
// the run's rerun then reported the converted model as its own; a report went into a model folder, a finetune into
// a distillation's checkpoint folder. A folder holding another kind of result is refused in one line, untouched.
// The probe of 2026-11-27: tokenize, eval and forward took a binary --file (eval of a record ran past 120 s); --data
// refused the same file. --file is UTF-8 text, refused in one line otherwise.
TEST(Inputs, AFileGivenAsTextThatIsNotUtf8IsRefusedInOneLine) {
  TempDir dir;
  mimic::test::write_bytes(dir.file("b.bin"), std::string("ok \xff\xfe\x00 binary", 13));
  for (const std::string& cmd : {"tokenize --model " + teacher(), "eval --model " + teacher(), "forward --model " + teacher() + " --out " + dir.file("f.safetensors")}) {
    auto r = mimic::test::mimic_cli(cmd + " --file " + dir.file("b.bin") + " --threads 1");
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_NE(r.err.find("b.bin: not valid UTF-8 (--file takes UTF-8 text)"), std::string::npos) << cmd << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(OutputFolders, AFolderHoldingAnotherKindOfResultIsRefusedByTheFileThatShowsIt) {
  TempDir dir;
  fs::create_directories(dir.file("run"));
  mimic::test::write_bytes(dir.file("run/checkpoint.safetensors"), "a training run's");
  mimic::test::write_bytes(dir.file("run/log.jsonl"), "{}\n");
  fs::copy(teacher(), dir.file("model"), fs::copy_options::recursive);
  fs::create_directories(dir.file("rep"));
  mimic::test::write_bytes(dir.file("rep/report.html"), "<html>");
  fs::create_directories(dir.file("m.ckpt"));
  mimic::test::write_bytes(dir.file("m.ckpt/done.safetensors"), "a distillation's");
  // a report killed while it drew: its table and figures, no page yet (helper-66's review of 2026-12-05)
  fs::create_directories(dir.file("half"));
  mimic::test::write_bytes(dir.file("half/metrics.csv"), "source,kind,layer,head,entropy,kl\n");
  // a metrics.csv of the user's own is no report: the model goes beside it
  fs::create_directories(dir.file("mine"));
  mimic::test::write_bytes(dir.file("mine/metrics.csv"), "epoch,accuracy\n1,0.5\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"export --model " + teacher() + " --out " + dir.file("run"), "holds a training run (checkpoint.safetensors)"},
      {"convert --model " + teacher() + " --maps " + good_maps() + " --out " + dir.file("run"), "holds a training run"},
      {"export --model " + teacher() + " --out " + dir.file("rep"), "holds a report (report.html)"},
      {"convert --model " + teacher() + " --maps " + good_maps() + " --out " + dir.file("half"), "holds a report (metrics.csv)"},
      {"finetune --task lm --model " + teacher() + " --data all --steps 1 --out " + dir.file("m.ckpt"),
       "holds a distillation's checkpoint folder (done.safetensors)"},
      {"finetune --task lm --model " + teacher() + " --data all --steps 1 --out " + dir.file("rep"), "holds a report"},
      // a model alone (an export, a converted model) is not a training run's folder: finetune replaced it (the fourth
      // probe of 2026-11-27)
      {"finetune --task lm --model " + teacher() + " --data all --steps 1 --out " + dir.file("model"), "holds a model (config.json)"}};
  for (const auto& [args, why] : cases) {
    auto r = mimic::test::mimic_cli(args + " --threads 1");
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_NE(r.err.find(why), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_EQ(mimic::test::read_bytes(dir.file("run/checkpoint.safetensors")), "a training run's");
  EXPECT_FALSE(fs::exists(dir.file("run/config.json")));
  EXPECT_FALSE(fs::exists(dir.file("half/config.json")));
  auto beside = mimic::test::mimic_cli("export --model " + teacher() + " --out " + dir.file("mine") + " --threads 1");
  EXPECT_EQ(beside.code, 0) << beside.err;
  EXPECT_EQ(mimic::test::read_bytes(dir.file("mine/metrics.csv")), "epoch,accuracy\n1,0.5\n");
  // what each kind may find there: a model mimic wrote under a model, a report over a report; a model mimic did not
  // write (the fixture's copy) is the user's, and no model writer replaces it (the probe of 2026-12-01)
  auto first = mimic::test::mimic_cli("export --model " + teacher() + " --out " + dir.file("model") + "2 --threads 1");
  EXPECT_EQ(first.code, 0) << first.err;
  auto over = mimic::test::mimic_cli("export --model " + dir.file("model") + " --out " + dir.file("model") + "2 --threads 1");
  EXPECT_EQ(over.code, 0) << over.err;
  auto foreign = mimic::test::mimic_cli("export --model " + dir.file("model") + "2 --out " + dir.file("model") + " --threads 1");
  EXPECT_EQ(foreign.code, 1);
  EXPECT_NE(foreign.err.find("holds a model mimic did not write"), std::string::npos) << foreign.err;
}

TEST(OutputFolders, AFolderHoldsOneRunsFilesAndLeavesOthersAlone) {
  TempDir dir;
  const std::string out = dir.file("m");
  auto gpt2 = mimic::test::mimic_cli("export --model " + teacher() + " --out " + out);
  ASSERT_EQ(gpt2.code, 0) << gpt2.err;
  ASSERT_TRUE(fs::exists(out + "/vocab.json") && fs::exists(out + "/merges.txt"));
  mimic::test::write_bytes(out + "/notes.txt", "mine");
  auto bert = mimic::test::mimic_cli("export --model " + mimic::test::model_with_tokenizer("bert-mlm") + " --out " + out);
  ASSERT_EQ(bert.code, 0) << bert.err;
  EXPECT_FALSE(fs::exists(out + "/vocab.json"));
  EXPECT_FALSE(fs::exists(out + "/merges.txt"));
  EXPECT_TRUE(fs::exists(out + "/vocab.txt"));
  EXPECT_EQ(mimic::test::read_bytes(out + "/notes.txt"), "mine");
  // it tokenizes as the BERT it holds (WordPiece with [CLS] ... [SEP]), not with the GPT-2's BPE left before
  const std::string text = " --text 'hello there' --tokens";
  auto tok = mimic::test::mimic_cli("tokenize --model " + out + text);
  ASSERT_EQ(tok.code, 0) << tok.err;
  EXPECT_EQ(tok.out, mimic::test::mimic_cli("tokenize --model " + mimic::test::model_with_tokenizer("bert-mlm") + text).out);
  EXPECT_NE(tok.out.find("[CLS]"), std::string::npos) << tok.out;

  // a report drawing fewer layers into the folder of one that drew more
  mimic::test::write_bytes(dir.file("t.txt"), mimic::test::text_lines(mimic::test::kDickens, 40));
  auto rec = mimic::test::mimic_cli("record --model " + teacher() + " --data " + dir.file("t.txt") + " --seq-len 16 --samples 4 --threads 1 --out " +
                                    dir.file("r.h5"));
  ASSERT_EQ(rec.code, 0) << rec.err;
  const std::string report = "report --record " + dir.file("r.h5") + " --threads 1 --out " + dir.file("rep") + " --plot-layers ";
  ASSERT_EQ(mimic::test::mimic_cli(report + "0,1").code, 0);
  ASSERT_TRUE(fs::exists(dir.file("rep/heatmaps_layer00.png")));
  mimic::test::write_bytes(dir.file("rep/notes.txt"), "mine");
  auto again = mimic::test::mimic_cli(report + "1");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_FALSE(fs::exists(dir.file("rep/heatmaps_layer00.png")));
  EXPECT_FALSE(fs::exists(dir.file("rep/heatmaps_layer00.svg")));
  EXPECT_TRUE(fs::exists(dir.file("rep/heatmaps_layer01.png")));
  EXPECT_TRUE(fs::exists(dir.file("rep/notes.txt")));
}

// Issue 38: every error one line in mimic's words. An argument that is not UTF-8 (a Latin-1 prompt, a path with a
// byte that is no character) surfaced as nlohmann's "[json.exception.type_error.316]" after the work — and convert
// left a folder without its mimic.json; it is refused before any work, naming the argument.
TEST(Messages, NonUtf8ArgumentsAreRefusedInOneLineBeforeAnyWork) {
  TempDir dir;
  auto gen = mimic::test::mimic_cli("generate --model gpt2-mini --prompt 'caf\xE9' --new-tokens 2 --json");
  EXPECT_NE(gen.code, 0);
  EXPECT_EQ(std::count(gen.err.begin(), gen.err.end(), '\n'), 1) << gen.err;
  EXPECT_NE(gen.err.find("argument 5 ('caf\\xE9') is not valid UTF-8"), std::string::npos) << gen.err;
  EXPECT_EQ(gen.err.find("json.exception"), std::string::npos) << gen.err;
  const std::string out = dir.file("conv\xFF");
  auto conv = mimic::test::mimic_cli("convert --model " + teacher() + " --maps " + good_maps() + " --out '" + out + "'");
  EXPECT_NE(conv.code, 0);
  EXPECT_NE(conv.err.find("is not valid UTF-8"), std::string::npos) << conv.err;
  EXPECT_FALSE(fs::exists(out));
  // UTF-8 beyond ASCII is text like any other
  auto ok = mimic::test::mimic_cli("generate --model gpt2-mini --prompt 'café' --new-tokens 1 --threads 1");
  EXPECT_EQ(ok.code, 0) << ok.err;
}

// Issue 38: a resume compares what shaped the run. distill resumed onto another teacher's record at the same path
// (its check compared the path, the sample count and the length) and labelled the mixed maps with the new teacher;
// record resumed a file of the same weights under another config (activation). Both are refused, naming it.
TEST(Resumes, AnotherTeachersRecordOrAnotherConfigIsNotResumed) {
  TempDir dir;
  mimic::test::write_bytes(dir.file("t.txt"), mimic::test::text_lines(mimic::test::kDickens, 40));
  auto record = [&](const std::string& model, const std::string& out, const std::string& extra) {
    return mimic::test::mimic_cli("record --model " + model + " --data " + dir.file("t.txt") + " --seq-len 16 --samples 8 --threads 1 --out " +
                                  out + extra);
  };
  // teacher B: teacher A with one weight changed
  {
    auto b = mimic::models::load_model(teacher());
    torch::NoGradGuard ng;
    b->module().parameters()[0].mul_(1.5);
    b->save(dir.file("b"));
  }
  ASSERT_EQ(record(teacher(), dir.file("r.h5"), "").code, 0);
  mimic::distill::DistillOptions o;
  o.record = dir.file("r.h5");
  o.feature_map = "hedgehog";
  o.epochs = 2;
  o.batch_size = 4;
  o.out = dir.file("maps.safetensors");
  o.progress = false;
  o.stop_after_epochs = 1;
  ASSERT_TRUE(mimic::distill::distill(o).interrupted);
  auto again = record(dir.file("b"), dir.file("r.h5"), " --fresh");  // the same path, another teacher
  ASSERT_EQ(again.code, 0) << again.err;
  o.stop_after_epochs = 0;
  EXPECT_MIMIC_ERROR(mimic::distill::distill(o), "other settings: source");
  // the same weights, another activation: the record is not resumed
  fs::create_directories(dir.file("relu"));
  for (const auto& e : fs::directory_iterator(teacher())) fs::copy_file(e.path(), fs::path(dir.file("relu")) / e.path().filename());
  auto cfg = nlohmann::json::parse(mimic::test::read_bytes(dir.file("relu/config.json")));
  cfg["activation_function"] = "relu";
  mimic::test::write_bytes(dir.file("relu/config.json"), cfg.dump());
  ASSERT_EQ(record(teacher(), dir.file("r2.h5"), "").code, 0);
  auto relu = record(dir.file("relu"), dir.file("r2.h5"), "");
  EXPECT_NE(relu.code, 0);
  EXPECT_NE(relu.err.find("was recorded with other settings: network"), std::string::npos) << relu.err;
  // --samples 0's note of what the file will hold comes after the checks of the file: above the refusal it made two
  // lines (helper-71's probe)
  auto every = mimic::test::mimic_cli("record --model " + dir.file("relu") + " --data " + dir.file("t.txt") + " --seq-len 16 --samples 0 --threads 1 --out " +
                                      dir.file("r2.h5"));
  EXPECT_NE(every.code, 0);
  EXPECT_EQ(std::count(every.err.begin(), every.err.end(), '\n'), 1) << every.err;
  EXPECT_NE(every.err.find("was recorded with other settings: network"), std::string::npos) << every.err;
  // the seventh probe: a conversion of the teacher (the same weights and network, other attention) resumed the
  // teacher's record, exit 0, two models' samples in one file
  auto converted = mimic::test::mimic_cli("convert --model " + teacher() + " --maps " + good_maps() + " --out " + dir.file("conv") +
                                          " --threads 1");
  ASSERT_EQ(converted.code, 0) << converted.err;
  auto mixed = record(dir.file("conv"), dir.file("r2.h5"), "");
  EXPECT_NE(mixed.code, 0);
  EXPECT_NE(mixed.err.find("was recorded with other settings: attention"), std::string::npos) << mixed.err;
  // the fifth probe of 2026-11-27: an online distill and a pretrain from --init resumed onto the same weights under
  // another config, exit 0 (two teachers' maps in one file; two networks in one run)
  fs::create_directories(dir.file("t2"));
  for (const auto& e : fs::directory_iterator(teacher())) fs::copy_file(e.path(), fs::path(dir.file("t2")) / e.path().filename());
  mimic::distill::DistillOptions online;
  online.model_dir = dir.file("t2");
  online.data = dir.file("t.txt");
  online.samples = 8;
  online.seq_len = 16;
  online.feature_map = "hedgehog";
  online.epochs = 2;
  online.batch_size = 4;
  online.out = dir.file("online.safetensors");
  online.progress = false;
  online.stop_after_epochs = 1;
  ASSERT_TRUE(mimic::distill::distill(online).interrupted);
  const auto original = mimic::test::read_bytes(dir.file("t2/config.json"));
  mimic::test::write_bytes(dir.file("t2/config.json"), cfg.dump());  // relu
  online.stop_after_epochs = 0;
  EXPECT_MIMIC_ERROR(mimic::distill::distill(online), "other settings: source");
  mimic::test::write_bytes(dir.file("t2/config.json"), original);
  const std::string pre = "pretrain --arch gpt2 --init " + dir.file("t2") + " --data " + dir.file("t.txt") +
                          " --seq-len 16 --batch-size 2 --steps 2 --warmup 0 --eval-every 0 --threads 1 --out " + dir.file("p");
  ASSERT_EQ(mimic::test::mimic_cli(pre).code, 0);
  mimic::test::write_bytes(dir.file("t2/config.json"), cfg.dump());
  auto changed = mimic::test::mimic_cli(pre);
  EXPECT_NE(changed.code, 0);
  EXPECT_NE(changed.err.find("was written with other settings: init_network"), std::string::npos) << changed.err;
}

// The tenth probe (2026-11-29): a user's file in a training run's best/ or best.new/ went with the folder when a fresh run
// replaced it (a converted model placed there too). The run now refuses before it trains, naming the file, which stays.
TEST(OutputFolders, AUsersFileInARunsBestFolderIsNamedAndKept) {
  TempDir dir;
  const std::string config = dir.file("c.json"), out = dir.file("out");
  mimic::test::write_bytes(config, R"({"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64})");
  const std::string run = "pretrain --arch gpt2 --config " + config +
                          " --data mqar:vocab=64,seq_len=32,pairs=4 --seq-len 32 --batch-size 4 --steps 2 --warmup 1 --eval-every 1 "
                          "--eval-batches 1 --threads 1 --out " + out;
  // a finished run; then the user's notes where a rerun exports, refused before anything changes — --fresh included,
  // whose removal of the finished run's model came before this check (the thirteenth probe: the model was gone and
  // the message said to give another --out)
  auto ok = mimic::test::mimic_cli(run);
  ASSERT_EQ(ok.code, 0) << ok.err;
  const std::string model = mimic::test::read_bytes(out + "/model.safetensors");
  for (const std::string sub : {"best", "best.new"}) {
    for (const std::string fresh : {"", " --fresh"}) {
      fs::create_directories(out + "/" + sub);
      mimic::test::write_bytes(out + "/" + sub + "/notes.txt", "mine");
      auto r = mimic::test::mimic_cli(run + fresh);
      EXPECT_EQ(r.code, 1) << sub << fresh;
      EXPECT_NE(r.err.find(sub + "/notes.txt is not a file of the model this run exports there"), std::string::npos) << r.err;
      EXPECT_EQ(mimic::test::read_bytes(out + "/" + sub + "/notes.txt"), "mine");
      EXPECT_EQ(mimic::test::read_bytes(out + "/model.safetensors"), model) << sub << fresh;
      EXPECT_TRUE(fs::exists(out + "/config.json")) << sub << fresh;
      fs::remove_all(out + "/" + sub);
    }
  }
  // a link at a snapshot a --fresh run would write: refused, the model kept
  fs::create_directories(dir.file("elsewhere"));
  fs::create_directory_symlink(dir.file("elsewhere"), out + "/step-1");
  auto link = mimic::test::mimic_cli(run + " --fresh --snapshot-every 1");
  EXPECT_EQ(link.code, 1);
  EXPECT_NE(link.err.find("step-1 is a link"), std::string::npos) << link.err;
  EXPECT_EQ(mimic::test::read_bytes(out + "/model.safetensors"), model);
  fs::remove(out + "/step-1");
  // the folder as it was: a fresh run replaces its own model
  auto again = mimic::test::mimic_cli(run + " --fresh");
  ASSERT_EQ(again.code, 0) << again.err;
}

// What another command made where a training run exports (best/, last/, step-N/), with no run in the folder yet: a
// converted model, an export, a finished finetune run. A fresh run replaced or removed them, exit 0 (the thirteenth
// probe of 2026-11-30); now it is refused by name before it trains, and they are left as they were.
TEST(OutputFolders, AFreshRunRefusesAnotherCommandsResultWhereItExports) {
  TempDir dir;
  const std::string config = dir.file("c.json");
  mimic::test::write_bytes(config, R"({"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64})");
  const std::string run = "pretrain --arch gpt2 --config " + config +
                          " --data mqar:vocab=64,seq_len=32,pairs=4 --seq-len 32 --batch-size 4 --steps 2 --warmup 1 --eval-every 1 "
                          "--eval-batches 1 --snapshot-every 1 --threads 1 --out ";
  for (const std::string sub : {"best", "last", "step-1"}) {
    const std::string out = dir.file("o-" + sub);
    auto placed = mimic::test::mimic_cli("export --model " + teacher() + " --threads 1 --out " + out + "/" + sub);
    ASSERT_EQ(placed.code, 0) << placed.err;
    const std::string weights = mimic::test::read_bytes(out + "/" + sub + "/model.safetensors");
    for (const std::string fresh : {"", " --fresh"}) {
      auto r = mimic::test::mimic_cli(run + out + fresh);
      EXPECT_EQ(r.code, 1) << sub << fresh;
      EXPECT_NE(r.err.find(out + "/" + sub + " holds what no run in " + out + " wrote"), std::string::npos) << r.err;
      EXPECT_EQ(mimic::test::read_bytes(out + "/" + sub + "/model.safetensors"), weights) << sub << fresh;
      EXPECT_TRUE(fs::exists(out + "/" + sub + "/vocab.json")) << sub << fresh;
    }
  }
}

// A file result of mimic's (forward's tensors, distill's maps) under a model's weights name in --out is another
// command's: a model written there replaced it, or removed it as a stale shard, exit 0 (the thirteenth probe).
TEST(OutputFolders, AModelNeverReplacesAnotherCommandsFileAtAWeightsName) {
  TempDir dir;
  for (const std::string name : {"model.safetensors", "model-00001-of-00002.safetensors", "model.safetensors.index.json"}) {
    const std::string out = dir.file("s-" + name);
    fs::create_directories(out);
    auto fwd = mimic::test::mimic_cli("forward --model " + teacher() + " --text hi --threads 1 --out " + out + "/" + name);
    ASSERT_EQ(fwd.code, 0) << fwd.err;
    const std::string bytes = mimic::test::read_bytes(out + "/" + name);
    for (const std::string& cmd : {"export --model " + teacher() + " --shard-embeddings", "export --model " + teacher(),
                                  "finetune --task lm --model " + teacher() + " --data sotu --steps 1 --seq-len 16 --batch-size 2"}) {
      auto r = mimic::test::mimic_cli(cmd + " --threads 1 --out " + out);
      EXPECT_NE(r.code, 0) << cmd;
      EXPECT_NE(r.err.find(name + " is a mimic-forward-1 file (another command's result)"), std::string::npos) << r.err;
      EXPECT_EQ(mimic::test::read_bytes(out + "/" + name), bytes) << cmd;
    }
  }
  // a record (HDF5, no safetensors metadata to read) at a weights name: replaced by export, exit 0 (the fourteenth probe)
  fs::create_directories(dir.file("rec"));
  auto rec = mimic::test::mimic_cli("record --model " + teacher() + " --data sotu --samples 2 --seq-len 16 --threads 1 --out " +
                                    dir.file("rec/model-00001-of-00002.safetensors"));
  ASSERT_EQ(rec.code, 0) << rec.err;
  const std::string record = mimic::test::read_bytes(dir.file("rec/model-00001-of-00002.safetensors"));
  auto ex = mimic::test::mimic_cli("export --model " + teacher() + " --threads 1 --out " + dir.file("rec"));
  EXPECT_NE(ex.code, 0);
  EXPECT_NE(ex.err.find("model-00001-of-00002.safetensors is an HDF5 file (a record) (another command's result)"),
            std::string::npos) << ex.err;
  EXPECT_EQ(mimic::test::read_bytes(dir.file("rec/model-00001-of-00002.safetensors")), record);
  // inside a finished run's export folders too: a rerun and a --fresh one replaced or removed it (the fourteenth probe)
  mimic::test::write_bytes(dir.file("c.json"), R"({"n_embd": 16, "n_layer": 1, "n_head": 2, "n_positions": 32})");
  const std::string run = "pretrain --arch gpt2 --config " + dir.file("c.json") + " --data mqar:vocab=10,seq_len=24,pairs=3 --steps 2 " +
                          "--batch-size 2 --warmup 0 --eval-every 0 --snapshot-every 1 --threads 1 --out " + dir.file("p");
  auto done = mimic::test::mimic_cli(run);
  ASSERT_EQ(done.code, 0) << done.err;
  fs::copy_file(dir.file("s-model.safetensors/model.safetensors"), dir.file("p/step-1/model.safetensors.index.json"));
  for (const std::string fresh : {"", " --fresh"}) {
    auto again = mimic::test::mimic_cli(run + fresh);
    EXPECT_EQ(again.code, 1) << fresh;
    EXPECT_NE(again.err.find("step-1/model.safetensors.index.json is a mimic-forward-1 file"), std::string::npos) << again.err;
    EXPECT_TRUE(fs::exists(dir.file("p/model.safetensors"))) << fresh;
  }
}

// The tenth probe: a Llama's rotary settings were no part of a record's (or a finetune's, or an online distillation's)
// description of the network, so a record resumed over a rope_theta edit (logits 0.26 apart) with exit 0. The
// refusal names the part that differs.
TEST(Resumes, ARotaryEditIsAnotherNetwork) {
  TempDir dir;
  fs::copy(mimic::test::fixture("models/llama"), dir.file("l"), fs::copy_options::recursive);
  fs::copy(mimic::test::fixture("models/llama"), dir.file("l2"), fs::copy_options::recursive);
  auto j = nlohmann::json::parse(mimic::test::read_bytes(dir.file("l2/config.json")));
  j["rope_theta"] = 20000.0;
  mimic::test::write_bytes(dir.file("l2/config.json"), j.dump());
  const std::string rec = " --data mqar:vocab=10,seq_len=24,pairs=3 --out " + dir.file("r.h5") + " --threads 1";
  auto first = mimic::test::mimic_cli("record --model " + dir.file("l") + " --samples 2" + rec);
  ASSERT_EQ(first.code, 0) << first.err;
  auto edited = mimic::test::mimic_cli("record --model " + dir.file("l2") + " --samples 4" + rec);
  EXPECT_EQ(edited.code, 1);
  EXPECT_NE(edited.err.find("network is \"rope_theta 10000\" in the file, \"rope_theta 20000\" for this run"), std::string::npos)
      << edited.err;
}

// The fifteenth probe of 2026-11-30: distill --fresh removed its layer folders whole (remove_all), a kernel copied by
// hand into a layer's best/ and the user's notes included, and a link at OUT.ckpt/layer_NN was written through. Each
// layer's folder is a training run's: --fresh removes what that run wrote, checked against its export book first.
TEST(Outputs, DistillFreshRemovesOnlyWhatItsLayerRunsWroteAndNeverWritesThroughALink) {
  const auto refused = [](const mimic::test::RunResult& r, const std::string& message) {
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  };
  TempDir dir;
  fs::copy(mimic::test::fixture("models/llama"), dir.file("l"), fs::copy_options::recursive);
  auto rec = mimic::test::mimic_cli("record --model " + dir.file("l") + " --data mqar:vocab=10,seq_len=24,pairs=3 --samples 4 --out " +
                                    dir.file("r.h5") + " --threads 1");
  ASSERT_EQ(rec.code, 0) << rec.err;
  const std::string distill = "distill --record " + dir.file("r.h5") + " --feature-map hedgehog --epochs 2 --batch-size 2 --threads 1 --out ";
  ASSERT_EQ(mimic::test::mimic_cli(distill + dir.file("m.safetensors")).code, 0);
  const std::string layer = dir.file("m.safetensors.ckpt/layer_00");
  ASSERT_TRUE(fs::exists(layer + "/best/kernel.safetensors"));
  mimic::test::write_bytes(layer + "/notes.txt", "mine");
  auto fresh = mimic::test::mimic_cli(distill + dir.file("m.safetensors") + " --fresh");
  ASSERT_EQ(fresh.code, 0) << fresh.err;
  EXPECT_EQ(mimic::test::read_bytes(layer + "/notes.txt"), "mine");
  // another kernel copied into the layer's best/ (here: the run's own with one bit of its last weight changed) is refused
  // by --fresh, and kept (a rerun without it finds the distillation done and touches nothing)
  auto theirs = mimic::test::read_bytes(layer + "/best/kernel.safetensors");
  theirs.back() ^= 1;
  mimic::test::write_bytes(layer + "/best/kernel.safetensors", theirs);
  for (const std::string again : {" --fresh"}) {
    auto r = mimic::test::mimic_cli(distill + dir.file("m.safetensors") + again);
    refused(r, layer + "/best/kernel.safetensors is not a file this run wrote");
    EXPECT_EQ(mimic::test::read_bytes(layer + "/best/kernel.safetensors"), theirs);
  }
  theirs.back() ^= 1;  // the run's own again
  mimic::test::write_bytes(layer + "/best/kernel.safetensors", theirs);
  // a file of the user's in an export folder (here a snapshot's name) is named before anything is cleared: it kept its
  // folder once the run's files went, and the layer's run then refused the folder as nobody's (the sixteenth probe)
  fs::create_directories(layer + "/step-1");
  mimic::test::write_bytes(layer + "/step-1/notes.txt", "mine too");
  refused(mimic::test::mimic_cli(distill + dir.file("m.safetensors") + " --fresh"), layer + "/step-1/notes.txt is not a file the run exported there");
  EXPECT_TRUE(fs::exists(layer + "/best/kernel.safetensors"));
  EXPECT_TRUE(fs::exists(layer + "/checkpoint.safetensors"));
  // a link at a layer's folder: refused, and nothing written where it points
  fs::create_directories(dir.file("elsewhere"));
  fs::create_directories(dir.file("n.safetensors.ckpt"));
  fs::create_directory_symlink(dir.file("elsewhere"), dir.file("n.safetensors.ckpt/layer_00"));
  for (const std::string again : {"", " --fresh"}) {
    auto r = mimic::test::mimic_cli(distill + dir.file("n.safetensors") + again);
    refused(r, dir.file("n.safetensors.ckpt/layer_00") + " is a link, where distill keeps a layer's run");
    EXPECT_TRUE(fs::is_empty(dir.file("elsewhere")));
  }
}

// The tenth probe: any regular file at distill's OUT.ckpt was called "a checkpoint of an older mimic", and the --fresh
// the message suggested deleted it. Only a file that is a mimic checkpoint is; another is named and kept.
TEST(Outputs, DistillNeverDeletesAFileOfTheUsersAtItsCheckpointPath) {
  TempDir dir;
  fs::copy(mimic::test::fixture("models/llama"), dir.file("l"), fs::copy_options::recursive);
  auto rec = mimic::test::mimic_cli("record --model " + dir.file("l") + " --data mqar:vocab=10,seq_len=24,pairs=3 --samples 2 --out " +
                                    dir.file("r.h5") + " --threads 1");
  ASSERT_EQ(rec.code, 0) << rec.err;
  mimic::test::write_bytes(dir.file("m.safetensors.ckpt"), "my precious notes");
  for (const std::string fresh : {"", " --fresh"}) {
    auto r = mimic::test::mimic_cli("distill --record " + dir.file("r.h5") + " --feature-map hedgehog --epochs 1 --out " +
                                    dir.file("m.safetensors") + " --threads 1" + fresh);
    EXPECT_EQ(r.code, 1) << fresh;
    EXPECT_NE(r.err.find("m.safetensors.ckpt is a file that is not a mimic checkpoint"), std::string::npos) << r.err;
    EXPECT_EQ(mimic::test::read_bytes(dir.file("m.safetensors.ckpt")), "my precious notes");
  }
}
