#include "mimic/bench/measure.h"

#include "mimic/bench/text.h"
#include "mimic/core/error.h"
#include "mimic/core/runtime.h"

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <string>

namespace mimic::bench {

namespace {

using Clock = std::chrono::steady_clock;

c10::Device& device_slot() {
  static c10::Device d(c10::kCPU);
  return d;
}

// LibTorch's default CPU allocator reports every allocation and free (with its size) to the
// MemoryReportingInfoBase installed as the thread's PROFILER_STATE debug info, when that object says memory
// profiling is on: the hook the PyTorch profiler's profile_memory uses. The debug info travels with the
// thread-local state into autograd's backward, which runs on the calling thread for CPU tensors. The tracker
// keeps the running sum of live bytes allocated since it was installed, and its maximum.
class PeakTracker : public c10::MemoryReportingInfoBase {
 public:
  explicit PeakTracker(c10::DeviceType type) : type_(type) {}
  // LibTorch 2 reports the allocator's totals as size_t (1.13: int64_t)
#if TORCH_VERSION_MAJOR >= 2
  void reportMemoryUsage(void*, int64_t alloc_size, size_t, size_t, c10::Device device) override {
#else
  void reportMemoryUsage(void*, int64_t alloc_size, int64_t, int64_t, c10::Device device) override {
#endif
    if (device.type() != type_) return;
    const int64_t now = current_.fetch_add(alloc_size) + alloc_size;
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
  }
  bool memoryProfilingEnabled() const override { return true; }
  int64_t peak() const { return peak_.load(); }
  int64_t current() const { return current_.load(); }

 private:
  c10::DeviceType type_;
  std::atomic<int64_t> current_{0}, peak_{0};
};

}  // namespace

void set_bench_device(const c10::Device& device) { device_slot() = device; }
c10::Device bench_device() { return device_slot(); }

Sample measure_once(const std::function<void()>& prepare, const std::function<void()>& run) {
  const c10::Device device = bench_device();
  if (prepare) prepare();
  auto tracker = std::make_shared<PeakTracker>(device.type());
  Sample s;
  {
    c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, tracker);
    synchronize(device);
    auto t0 = Clock::now();
    run();
    synchronize(device);
    s.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }
  s.peak_bytes = tracker->peak();
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Sample measure(int repeats, const std::function<void()>& prepare, const std::function<void()>& run) {
  measure_once(prepare, run);
  std::vector<double> times;
  int64_t peak = 0;
  for (int r = 0; r < repeats; ++r) {
    auto s = measure_once(prepare, run);
    times.push_back(s.ms);
    peak = std::max(peak, s.peak_bytes);
  }
  return {median(times), peak};
}

double gemm_gflops() {
  const auto on = at::TensorOptions().device(bench_device());
  auto a = at::randn({2048, 2048}, on), b = at::randn({2048, 2048}, on);
  auto s = measure(5, nullptr, [&] { at::mm(a, b); });
  return 2.0 * 2048 * 2048 * 2048 / (s.ms * 1e-3) / 1e9;
}

double copy_bandwidth(int64_t bytes, int repeats) {
  const int64_t n = std::max<int64_t>(1, bytes / static_cast<int64_t>(sizeof(float)));
  // Both buffers written once before timing, so that every page is mapped: the first touch of a fresh
  // allocation costs page faults, not bandwidth.
  auto src = at::ones({n}), dst = at::zeros({n});
  auto s = measure(repeats, nullptr, [&] { dst.copy_(src); });
  return 2.0 * static_cast<double>(n * sizeof(float)) / (s.ms * 1e-3);
}

double available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024.0;
  return 0;
}

void refuse_beyond_memory(double need, const std::string& needs, const std::string& detail, const std::string& cure) {
  const double avail = available_memory_bytes();
  MIMIC_CHECK(avail <= 0 || need <= 0.8 * avail, needs, " about ", strf("%.1f", need / 1e9), " GB", detail, ", more than 80% of the ",
              strf("%.1f", avail / 1e9), " GB available: ", cure);
}

bool is_out_of_memory(const std::exception& e) {
  std::string w = e.what();
  return w.find("can't allocate memory") != std::string::npos || w.find("out of memory") != std::string::npos;
}

OpProfile profile_ops(const std::function<void()>& run, int64_t units) {
  namespace prof = torch::autograd::profiler;
  const auto me = at::RecordFunction::currentThreadId();
  prof::enableProfilerLegacy(torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU));
  auto t0 = Clock::now();
  try {
    run();
  } catch (...) {
    prof::disableProfilerLegacy();
    throw;
  }
  const double wall_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  auto lists = prof::disableProfilerLegacy();
  // Pair each push with its pop on a stack; an operator's self time is its span minus its children's spans.
  struct Open {
    const prof::LegacyEvent* push;
    double children_us;
  };
  std::map<std::string, OpShare> by_name;
  double top_us = 0, calls = 0, top_calls = 0;
  for (const auto& list : lists) {
    std::vector<Open> stack;
    for (const auto& e : list) {
      if (e.threadId() != me) continue;
      if (e.kind() == prof::EventKind::PushRange) {
        stack.push_back({&e, 0.0});
      } else if (e.kind() == prof::EventKind::PopRange && !stack.empty()) {
        const Open open = stack.back();
        stack.pop_back();
        const double span = open.push->cpuElapsedUs(e);
        auto& op = by_name[open.push->name()];
        op.name = open.push->name();
        op.share += span - open.children_us;
        op.calls += 1;
        calls += 1;
        if (stack.empty()) {
          top_us += span;
          top_calls += 1;
        } else {
          stack.back().children_us += span;
        }
      }
    }
  }
  OpProfile out;
  const double per = static_cast<double>(std::max<int64_t>(units, 1));
  for (auto& [name, op] : by_name) {
    op.share /= wall_us;
    op.calls /= per;
    out.ops.push_back(op);
  }
  std::sort(out.ops.begin(), out.ops.end(), [](const OpShare& a, const OpShare& b) { return a.share > b.share; });
  out.outside_share = std::max(0.0, 1.0 - top_us / wall_us);
  out.operators = calls / per;
  out.top_level = top_calls / per;
  return out;
}

}  // namespace mimic::bench
