// The process's place in a distributed run, read from the variables torchrun, Slurm scripts and `mimic launch`
// set: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (all or none), and optionally LOCAL_WORLD_SIZE
// (processes on this machine: the default thread count divides the cores by it) and MIMIC_DIST_TIMEOUT (seconds
// a rendezvous or a collective may wait for a peer). None set: one process, and nothing changes.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace mimic::distributed {

// Default of MIMIC_DIST_TIMEOUT: long enough for a peer that is still loading a model on a busy machine, short
// enough that a run whose peer never comes ends within a minute instead of hanging.
inline constexpr int kDefaultTimeoutSeconds = 60;

struct Environment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;  // LOCAL_WORLD_SIZE, or 1 when absent
  std::string master_addr;   // empty in a single process
  int master_port = 0;
  int timeout_seconds = kDefaultTimeoutSeconds;
  // More than one process: training joins a process group.
  bool distributed() const { return world_size > 1; }
  bool lead() const { return rank == 0; }
  // Started by a launcher (mimic launch, torchrun, a Slurm script: the five variables set), a world of one included.
  // Signals are then the launcher's to handle: it passes Ctrl-C on to its ranks and ends, so a rank that stopped
  // after its step would finish that step as an orphan after the prompt came back (helper-66's review of 2026-12-05).
  bool launched() const { return !master_addr.empty(); }
};

// Reads and checks the variables through `getenv` (tests pass their own). A malformed or out-of-range value, or
// only some of the five, is a mimic::Error naming the variable and what is valid.
Environment read_environment(const std::function<const char*(const char*)>& getenv);

// This process's environment, read once (the first call may throw; later calls read again until one succeeds).
const Environment& environment();

// "rank R: " in a distributed run, else "": the CLI puts it before an error line so that a user reading the
// interleaved output of several ranks knows which one failed. Never throws.
std::string rank_prefix();

// Threads per process when --threads is not given: the cores divided by the processes on this machine
// (LOCAL_WORLD_SIZE), at least 1.
int default_threads(int cores);

}  // namespace mimic::distributed
