// mimic launch --nproc N [--master-port P] [--timeout S] -- COMMAND ... — run N ranks of a distributed run on this
// machine (torchrun's variables set for each), forward their result, and stop them all when one fails.
#include <unistd.h>

#include <cctype>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "cli.h"
#include "mimic/core/error.h"
#include "mimic/distributed/environment.h"
#include "mimic/distributed/launch.h"
#include "ranges.h"

namespace mimic::cli {
namespace {

struct LaunchArgs {
  distributed::LaunchOptions o;
};

// This executable, so that `-- mimic ...` runs the same build.
std::string self_path() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

void run(LaunchArgs& a, const CLI::App& sub) {
  // `-- pretrain ...` ran a program called pretrain (not found, once per rank): the first word is a program, and a mimic
  // command needs the word mimic before it. A program of that name may exist (info), so this asks rather than guesses.
  if (const auto* parent = sub.get_parent(); parent != nullptr && !a.o.command.empty() && a.o.command.front() != "mimic")
    for (const auto* c : parent->get_subcommands([](const CLI::App*) { return true; }))
      MIMIC_USAGE_CHECK(c->get_name() != a.o.command.front(), "launch: the command starts with '", c->get_name(), "', a mimic command: write -- mimic ",
                        c->get_name(), " ... (the first word after -- is the program each rank runs; 'mimic' is this mimic)");
  // a launch inside a launch's rank (or under torchrun) started runs of its own that collided on their --out
  // (helper-56's probe of 2026-12-04): the ranks come from one launcher
  const auto& env = distributed::environment();
  MIMIC_USAGE_CHECK(!env.distributed(), "launch runs as the launcher of a run, not as one of its WORLD_SIZE=", env.world_size,
                    " ranks: start the training command itself under the one launch (mimic launch --nproc N -- mimic pretrain ...)");
  MIMIC_USAGE_CHECK(a.o.command.size() < 2 || a.o.command[0] != "mimic" || a.o.command[1] != "launch",
                    "launch -- mimic launch: a launch inside a launch starts runs of its own; give the training command after the one --");
  a.o.self = self_path();
  const auto r = distributed::launch(a.o);
  if (r.failed_rank < 0) return;
  const std::string what = "rank " + std::to_string(r.failed_rank) + " of " + std::to_string(a.o.nproc) + " " + r.failure +
                           (r.stopped > 0 ? "; stopped the other " + std::to_string(r.stopped) + (r.stopped == 1 ? " rank" : " ranks") : "");
  // A mimic rank that exits with a status has said why in its own line ("mimic: error: rank 1: ..."; a usage error
  // rank 0 alone says): the launcher adds what it did as a note and leaves with that status, so that a failed run is
  // one error line, and a usage error exits 2 as it does without the launcher. A rank killed by a signal said
  // nothing, nor need another program: the launcher's line is the error then.
  if (a.o.command.front() != "mimic" || r.exit_status <= 0) fail(what);
  if (r.stopped > 0) std::fprintf(stderr, "mimic: note: %s\n", what.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(r.exit_status);
}

}  // namespace

void register_launch(CLI::App& app) {
  auto a = std::make_shared<LaunchArgs>();
  auto* sub = app.add_subcommand("launch", "Run a training command as N processes of one data-parallel run on this machine "
                                           "(sets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; docs/distributed.md)");
  sub->add_option("--nproc", a->o.nproc, "Processes (ranks) to start; each takes cores/N threads by default")->required()->transform(range::processes());
  sub->add_option("--master-port", a->o.master_port, "TCP port of rank 0's rendezvous store (default: a free port)")->transform(range::port());
  sub->add_option("--master-addr", a->o.master_addr, "Address rank 0 listens on")->capture_default_str();
  sub->add_option("--timeout", a->o.timeout_seconds, "Seconds a rendezvous or a collective waits for a peer (MIMIC_DIST_TIMEOUT; default 60)")
      ->transform(range::seconds());
  sub->add_option("command", a->o.command, "The command each rank runs, after --; a first word 'mimic' is this mimic")->required();
  sub->callback([a, sub]() { run(*a, *sub); });
}

}  // namespace mimic::cli
