// Measuring a piece of work for the benchmarks: wall time (median of repeats after a warm-up) and the peak of
// tensor bytes LibTorch's CPU allocator held while it ran, beyond what was alive before.
#pragma once
#include <cstdint>
#include <exception>
#include <functional>
#include <vector>

namespace mimic::bench {

struct Sample {
  double ms = 0;
  int64_t peak_bytes = 0;
};

// Runs `prepare` (untimed, untracked) then `run` (timed, its allocations tracked). Everything `run` allocates
// and drops is freed inside the tracked scope.
Sample measure_once(const std::function<void()>& prepare, const std::function<void()>& run);
// One warm-up, then `repeats` timed runs: the median time and the largest peak.
Sample measure(int repeats, const std::function<void()>& prepare, const std::function<void()>& run);
double median(std::vector<double> v);
// MemAvailable from /proc/meminfo in bytes (0 if unknown).
double available_memory_bytes();
// True for LibTorch's allocation failures (so a benchmark can skip a size instead of failing).
bool is_out_of_memory(const std::exception& e);

}  // namespace mimic::bench
