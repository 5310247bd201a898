// `mimic launch`: runs N processes of one command on this machine as the ranks of one distributed run, with the
// variables torchrun sets (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), and watches
// them: when one fails (non-zero exit or a signal) the others are stopped (SIGTERM, then SIGKILL after a grace
// period) and the launch reports that rank. A mimic rank that exits 2 found a usage error, which every rank finds in
// the same command line: the others are given the grace period to end by themselves (rank 0, which alone says a
// usage error, is then not stopped before it has said it) before they are stopped.
#pragma once
#include <string>
#include <vector>

namespace mimic::distributed {

struct LaunchOptions {
  int nproc = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;      // 0: a free port of this machine
  int timeout_seconds = 0;  // > 0: MIMIC_DIST_TIMEOUT for the ranks; 0: theirs (environment.h's default)
  double grace_seconds = 5; // after a failure: SIGTERM to the others, SIGKILL after this long
  // The command each rank runs (argv). A first word "mimic" runs `self` (this very executable), so that the
  // ranks are the build that launched them, not whatever `mimic` the PATH holds.
  std::vector<std::string> command;
  std::string self;
};

struct LaunchResult {
  int failed_rank = -1;  // the first rank that failed; -1: all exited 0
  std::string failure;   // how it failed: "exited with status 1", "was killed by signal 9 (Killed)"
  int exit_status = -1;  // the status it exited with; -1: it ended by a signal
  int stopped = 0;       // ranks the launcher stopped after that
  int master_port = 0;   // the port used
};

// A TCP port of `addr` that is free now (the kernel's choice; another program could take it before rank 0 does).
int free_port(const std::string& addr);

// What can be told about a rendezvous address before c10d tries it, each as one line's cause ("" when nothing):
// whether `addr` resolves at all; whether `port` is taken on this machine (rank 0's store listens on every
// address); whether `addr` is an address of this machine (rank 0's store must be reachable there — said only
// after c10d failed, since a cluster's service address may route to rank 0 without being one of its own).
std::string unresolved_address(const std::string& addr);
std::string port_taken(int port);
bool is_local_address(const std::string& addr);

// Starts the ranks and waits for them all. Throws mimic::Error when a rank cannot be started; a rank's failure
// is in the result.
LaunchResult launch(const LaunchOptions& options);

}  // namespace mimic::distributed
