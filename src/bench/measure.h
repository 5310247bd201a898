// Measuring a piece of work for the benchmarks: wall time (median of repeats after a warm-up) and the peak of
// tensor bytes LibTorch's CPU allocator held while it ran, beyond what was alive before; and the machine's
// rates the benchmarks set their numbers against (a GEMM's FLOP/s, a large copy's bytes/s).
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace mimic::bench {

// The device the benchmarks compute on (bench attention/train --device; default the CPU). measure_once waits for
// it before starting and before stopping the clock (CUDA queues work asynchronously), and counts the peak of the
// tensor bytes its allocator holds (on CUDA: the caching allocator's blocks, which round sizes up).
void set_bench_device(const c10::Device& device);
c10::Device bench_device();

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
// The machine's dense fp32 rate: a 2048³ GEMM (at::mm) on the bench device, median of 5, in GFLOP/s.
double gemm_gflops();
// The machine's memory bandwidth as the decoding benchmark sets it against: a copy of `bytes` between two
// tensors (LibTorch's parallel copy, the threads set now), median of `repeats`, counted as STREAM's Copy counts
// it — bytes read + bytes written, 2 × bytes per copy — in bytes per second. `bytes` should be far above the
// last-level cache (the default, 256 MiB, is) so that the copy streams from DRAM.
double copy_bandwidth(int64_t bytes = int64_t{256} << 20, int repeats = 5);
// MemAvailable from /proc/meminfo in bytes (0 if unknown).
double available_memory_bytes();
// Refuses work whose memory `need` (bytes) passes 80% of available_memory_bytes(), before a benchmark runs it (the
// allocator or the OOM killer met such work minutes in): "<needs> about X GB<detail>, more than 80% of the Y GB
// available: <cure>". Nothing is refused where the available memory is unknown. For CPU runs.
void refuse_beyond_memory(double need, const std::string& needs, const std::string& detail, const std::string& cure);
// True for LibTorch's allocation failures (so a benchmark can skip a size instead of failing).
bool is_out_of_memory(const std::exception& e);

}  // namespace mimic::bench

namespace mimic::bench {

// Where the time of a piece of work goes, by LibTorch operator (its legacy profiler's RecordFunction events
// on the calling thread): per operator name its self time (without the operators it calls) as a share of
// the wall time of `run`, and what no operator covers (our own code between operators). The profiler adds
// about a microsecond per operator, so small-operator shares come out somewhat high: read them as shares.
struct OpShare {
  std::string name;
  double share = 0;      // self time / wall time
  double calls = 0;      // per unit (see profile_ops)
};
struct OpProfile {
  std::vector<OpShare> ops;     // largest share first
  double outside_share = 0;     // wall time not inside any operator / wall time
  double operators = 0;         // operator calls (all depths) per unit
  double top_level = 0;         // operator calls from our code (depth 0) per unit
};
// `units` divides the call counts (e.g. the decoding steps run).
OpProfile profile_ops(const std::function<void()>& run, int64_t units);

}  // namespace mimic::bench
