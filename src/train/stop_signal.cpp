#include "mimic/train/stop_signal.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

namespace mimic::train {

namespace {

// written by the handler, which may run on any of the process's threads (a worker of the intra-op pool): an atomic,
// lock-free so that the handler may touch it (volatile sig_atomic_t covers a handler on the reading thread only)
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);
int g_depth = 0;  // StopOnSignal objects alive and active (the process's main thread alone makes them)
const char* volatile g_announce = kStopAfterStep;
size_t g_announce_size = 0;
// what the outermost one replaced (the output lock's handler, or the default), put back by the first signal: the
// second then ends the process as it would have without a stop handler, the lock's clean-up included (the default
// there left the run's lock file behind: helper-65's probe of 2026-12-05)
struct sigaction g_before_int {}, g_before_term {};

extern "C" void request_stop(int sig) {
  g_stop_signal = sig;
  [[maybe_unused]] const auto n = ::write(STDERR_FILENO, g_announce, g_announce_size);
  ::sigaction(sig, sig == SIGINT ? &g_before_int : &g_before_term, nullptr);
}

}  // namespace

StopOnSignal::StopOnSignal(bool active, const char* announce) {
  if (!active) return;
  counted_ = true;
  nested_ = g_depth++ > 0;
  if (nested_) return;
  g_stop_signal = 0;
  g_announce = announce;
  g_announce_size = std::strlen(announce);
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction now {}, before {};
    now.sa_handler = request_stop;
    now.sa_flags = SA_RESTART;  // the run goes on: a read or write the signal interrupted resumes instead of failing (EINTR)
    sigemptyset(&now.sa_mask);
    if (::sigaction(sig, nullptr, &before) != 0 || before.sa_handler == SIG_IGN) continue;
    (sig == SIGINT ? g_before_int : g_before_term) = before;  // before the handler can run
    if (::sigaction(sig, &now, &before) == 0) installed_.push_back({sig, before});
  }
}

StopOnSignal::~StopOnSignal() {
  if (!counted_) return;
  --g_depth;
  if (nested_) return;
  for (auto& [sig, before] : installed_) ::sigaction(sig, &before, nullptr);
  g_stop_signal = 0;
}

int StopOnSignal::requested() const { return counted_ ? g_stop_signal.load() : 0; }

std::string stop_signal_name(int sig) { return sig == SIGINT ? "SIGINT (Ctrl-C)" : "SIGTERM"; }
int stopped_status(int sig) { return 128 + sig; }

}  // namespace mimic::train
