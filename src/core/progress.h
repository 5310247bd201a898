// Progress reporting for long work, on stderr: on a terminal, a bar with count, rate and ETA redrawn in place;
// elsewhere (a log file, a pipe, a batch job's output) plain lines, one a minute and a last one, and only for work
// that lasts a minute (short runs leave logs clean; a convert --keep-softmax auto:8 piped to a file was silent
// for minutes). MIMIC_PROGRESS chooses: 0 (none), 1 or bar, lines (every 60 s) or lines:SECONDS.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace mimic {

class Progress {
 public:
  // total <= 0: unknown total (no bar, no ETA). `unit` names what is counted ("tok", "step", "sample").
  Progress(std::string label, int64_t total, std::string unit = "it");
  ~Progress();
  void update(int64_t done, const std::string& extra = "");  // absolute position
  void advance(int64_t n = 1, const std::string& extra = "");
  void finish();
  bool enabled() const { return mode_ != Mode::Off; }
  void disable() { mode_ = Mode::Off; }
  double elapsed_seconds() const;

 private:
  enum class Mode { Off, Bar, Lines };
  void draw(bool final);
  std::string label_, unit_, extra_;
  int64_t total_ = 0, done_ = 0;
  Mode mode_ = Mode::Off;
  double line_every_ = 60;  // Lines: seconds between lines
  bool finished_ = false, lines_written_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// What is wrong with MIMIC_PROGRESS, or "" (the CLI asks before any work, so that a typo is not found when the
// first bar is made, minutes into a run).
std::string progress_setting_problem();

// Human-readable duration, e.g. "1m 05s".
std::string format_duration(double seconds);

}  // namespace mimic
