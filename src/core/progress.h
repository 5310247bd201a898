// Progress reporting for long work: a bar with count, rate and ETA redrawn on a terminal (stderr), and
// nothing at all when stderr is not a terminal (logs stay clean). Force with MIMIC_PROGRESS=0/1.
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
  bool enabled() const { return enabled_; }
  void disable() { enabled_ = false; }
  double elapsed_seconds() const;

 private:
  void draw(bool final);
  std::string label_, unit_, extra_;
  int64_t total_ = 0, done_ = 0;
  bool enabled_ = false, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// Human-readable duration, e.g. "1m 05s".
std::string format_duration(double seconds);

}  // namespace mimic
