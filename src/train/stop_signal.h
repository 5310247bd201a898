// A stop asked by SIGINT (Ctrl-C) or SIGTERM (a job's time limit) during a single-process run, honoured where the
// run can end with nothing lost: the trainer after its step, with a checkpoint; distill after its layer.
#pragma once
#include <csignal>
#include <string>
#include <utility>
#include <vector>

namespace mimic::train {

// While one lives (active), SIGINT and SIGTERM do not end the process: the first sets a request that the run reads
// at its next safe point, says so on stderr, and puts back the handler that was there before (the output lock's, or
// the default), so the same signal again ends the process at once. A signal the process ignores (a run started with `&` or under nohup ignores SIGINT) stays
// ignored. What was installed before (the output lock's handler) is put back when the outermost one ends.
//
// Nestable, because distill's layers each run the trainer: the outermost one installs the handler and clears the
// request; one made while another lives only reads it (nested()), so a signal between two layers is still the
// outer run's request, and the stop a nested run cannot honour at its own end (its training done) is reported by
// the outer one, after it has recorded the layer.
inline constexpr const char* kStopAfterStep = "\nmimic: stopping after this step, with a checkpoint (the same signal again stops at once)\n";

class StopOnSignal {
 public:
  // `announce`: the line the first signal prints (a string literal: the handler writes it as it is), the outermost's
  explicit StopOnSignal(bool active, const char* announce = kStopAfterStep);
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
  // the signal that asked for the stop (SIGINT or SIGTERM), or 0
  int requested() const;
  bool nested() const { return nested_; }

 private:
  bool counted_ = false, nested_ = false;
  std::vector<std::pair<int, struct sigaction>> installed_;
};

// "SIGINT (Ctrl-C)" or "SIGTERM", for the line that ends a stopped run
std::string stop_signal_name(int sig);

// The exit status of a command a signal stopped with a checkpoint: 128 + sig, as a shell reports a command the
// signal ended (the error that says so carries it: mimic::Error::exit_status)
int stopped_status(int sig);

}  // namespace mimic::train
