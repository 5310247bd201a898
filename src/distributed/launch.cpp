#include "mimic/distributed/launch.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "mimic/core/error.h"
#include "mimic/distributed/group.h"

namespace mimic::distributed {

namespace {

// The ranks' pids, for the signal handler that passes SIGINT / SIGTERM on: a launch stopped by the user or a job
// scheduler stops its ranks rather than leaving them to wait out their timeout. Each rank leads a process group of
// its own, and every signal goes to the whole group: a rank that is a shell (`-- sh -c '... mimic pretrain ...'`)
// took the signal alone, and the training it had started ran on as an orphan, writing its --out after the launcher
// had said it stopped it (helper-56's probe of 2026-12-04).
constexpr int kMaxRanks = 4096;
volatile pid_t g_pids[kMaxRanks];
volatile int g_count = 0;

// (sigaction, not signal: it is safe inside a handler)
void handle(int sig, void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(sig, &action, nullptr);
}

void forward_signal(int sig) {
  for (int i = 0; i < g_count; ++i)
    if (g_pids[i] > 0) {
      ::kill(-g_pids[i], sig);
      ::kill(-g_pids[i], SIGCONT);  // a stopped rank would hold the signal until continued
    }
  // then end as the signal would have ended the launcher (delivered when this handler returns)
  handle(sig, SIG_DFL);
  ::raise(sig);
}

// Job control: Ctrl-Z reaches the terminal's foreground group, the launcher's alone (each rank leads its own), so the
// launcher stops the ranks and then itself, and continues them when it is continued (`fg`, `bg`, kill -CONT). Without
// this the ranks ran on while the shell said the launch was stopped (the last read of 2026-12-04).
void stop_ranks(int);

void stop_ranks(int) {
  const int saved = errno;
  for (int i = 0; i < g_count; ++i)
    if (g_pids[i] > 0) ::kill(-g_pids[i], SIGSTOP);
  // stop as SIGTSTP would have: the default action, delivered at once (the handler blocks it while it runs)
  handle(SIGTSTP, SIG_DFL);
  sigset_t tstp;
  sigemptyset(&tstp);
  sigaddset(&tstp, SIGTSTP);
  ::raise(SIGTSTP);
  ::sigprocmask(SIG_UNBLOCK, &tstp, nullptr);
  // continued here (continue_ranks has run)
  handle(SIGTSTP, stop_ranks);
  errno = saved;
}

void continue_ranks(int) {
  const int saved = errno;
  for (int i = 0; i < g_count; ++i)
    if (g_pids[i] > 0) ::kill(-g_pids[i], SIGCONT);
  errno = saved;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + ::strsignal(WTERMSIG(status)) + ")";
  return "ended with wait status " + std::to_string(status);
}

}  // namespace

int free_port(const std::string& addr) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  MIMIC_CHECK(::getaddrinfo(addr.c_str(), "0", &hints, &res) == 0 && res, "--master-addr ", addr, ": not an address of this machine");
  const int fd = ::socket(res->ai_family, SOCK_STREAM, 0);
  const bool bound = fd >= 0 && ::bind(fd, res->ai_addr, res->ai_addrlen) == 0;
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  const bool named = bound && ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(res);
  MIMIC_CHECK(named, "no free TCP port on ", addr, " (", std::strerror(err), "): give one with --master-port");
  return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

std::string unresolved_address(const std::string& addr) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const int rc = ::getaddrinfo(addr.c_str(), "0", &hints, &res);
  if (res) ::freeaddrinfo(res);
  return rc == 0 ? "" : ::gai_strerror(rc);
}

std::string port_taken(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as the store does: a port in TIME_WAIT is free
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool taken = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno == EADDRINUSE;
  ::close(fd);
  return taken ? std::strerror(EADDRINUSE) : "";
}

bool is_local_address(const std::string& addr) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (::getaddrinfo(addr.c_str(), "0", &hints, &res) != 0 || !res) return false;
  bool local = false;
  for (addrinfo* r = res; r && !local; r = r->ai_next) {
    const int fd = ::socket(r->ai_family, SOCK_STREAM, 0);
    local = fd >= 0 && ::bind(fd, r->ai_addr, r->ai_addrlen) == 0;
    if (fd >= 0) ::close(fd);
  }
  ::freeaddrinfo(res);
  return local;
}

LaunchResult launch(const LaunchOptions& o) {
  MIMIC_CHECK(o.nproc >= 1 && o.nproc <= kMaxRanks, "--nproc must lie in [1, ", kMaxRanks, "], got ", o.nproc);
  MIMIC_CHECK(!o.command.empty(), "give the command the ranks run after --, e.g. mimic launch --nproc 2 -- mimic finetune ...");
  // ranks of this very build (a first word "mimic") cannot form a group where it has no gloo: say so before starting
  // any, since a rank could fail first on something else (rank 1's --device auto on a machine with one GPU). Other
  // commands (sh, a script) may form their own groups, or none.
  if (o.nproc > 1 && o.command[0] == "mimic") require_multi_process();
  LaunchResult r;
  r.master_port = o.master_port > 0 ? o.master_port : free_port(o.master_addr);
  std::vector<std::string> argv = o.command;
  if (argv[0] == "mimic" && !o.self.empty()) argv[0] = o.self;
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  std::vector<pid_t> pids(static_cast<size_t>(o.nproc), -1);
  auto previous_int = ::signal(SIGINT, forward_signal);
  auto previous_term = ::signal(SIGTERM, forward_signal);
  auto previous_tstp = ::signal(SIGTSTP, stop_ranks);
  auto previous_cont = ::signal(SIGCONT, continue_ranks);
  const pid_t parent = ::getpid();
  for (int rank = 0; rank < o.nproc; ++rank) {
    const pid_t pid = ::fork();
    MIMIC_CHECK(pid >= 0, "could not start rank ", rank, ": ", std::strerror(errno));
    if (pid == 0) {
      ::setpgid(0, 0);
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::signal(SIGTSTP, SIG_DFL);
      ::signal(SIGCONT, SIG_DFL);
      // A rank must not outlive a launcher killed with -9 (which cannot pass anything on).
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(o.nproc).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(o.nproc).c_str(), 1);
      ::setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
      ::setenv("MASTER_PORT", std::to_string(r.master_port).c_str(), 1);
      if (o.timeout_seconds > 0) ::setenv("MIMIC_DIST_TIMEOUT", std::to_string(o.timeout_seconds).c_str(), 1);
      ::execvp(cargv[0], cargv.data());
      std::fprintf(stderr, "mimic: error: rank %d: cannot run %s: %s\n", rank, cargv[0], std::strerror(errno));
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // as the child does: whichever runs first, the group exists before a signal is sent to it
    pids[static_cast<size_t>(rank)] = pid;
    g_pids[rank] = pid;
    g_count = rank + 1;
  }

  // Poll rather than block in waitpid: after a failure the grace period needs a clock.
  using Clock = std::chrono::steady_clock;
  int running = o.nproc;
  Clock::time_point term_at{}, kill_at{};
  bool terminated = false;
  while (running > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      int rank = 0;
      while (rank < o.nproc && pids[static_cast<size_t>(rank)] != pid) ++rank;
      if (rank == o.nproc) continue;  // not one of ours
      pids[static_cast<size_t>(rank)] = -1;
      g_pids[rank] = -1;
      --running;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && r.failed_rank < 0) {
        r.failed_rank = rank;
        r.failure = describe(status);
        r.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        const auto grace = std::chrono::milliseconds(static_cast<int64_t>(o.grace_seconds * 1000));
        const bool usage = o.command[0] == "mimic" && r.exit_status == 2;
        term_at = Clock::now() + (usage ? grace : Clock::duration::zero());
        kill_at = term_at + grace;
      }
      continue;
    }
    if (r.failed_rank >= 0 && !terminated && Clock::now() >= term_at) {
      for (pid_t p : pids)
        if (p > 0) {
          ::kill(-p, SIGTERM);
          ::kill(-p, SIGCONT);  // a rank stopped (Ctrl-Z) holds SIGTERM until continued
          ++r.stopped;
        }
      terminated = true;
    }
    if (r.failed_rank >= 0 && Clock::now() > kill_at)
      for (pid_t p : pids)
        if (p > 0) ::kill(-p, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  g_count = 0;
  ::signal(SIGINT, previous_int);
  ::signal(SIGTERM, previous_term);
  ::signal(SIGTSTP, previous_tstp);
  ::signal(SIGCONT, previous_cont);
  return r;
}

}  // namespace mimic::distributed
