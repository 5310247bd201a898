#include "mimic/core/runtime.h"

#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "mimic/core/error.h"
#include "mimic/core/utf8.h"
#include "mimic/core/version.h"

#if defined(__SANITIZE_ADDRESS__)  // GCC's -fsanitize=address
#define MIMIC_UNDER_ASAN 1
#elif defined(__has_feature)  // clang's
#if __has_feature(address_sanitizer)
#define MIMIC_UNDER_ASAN 1
#endif
#endif
#ifdef MIMIC_UNDER_ASAN
#include <sanitizer/allocator_interface.h>
#include <sanitizer/asan_interface.h>
#endif

namespace mimic {

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

namespace {
// LibTorch's default CPU allocator asks glibc for posix_memalign(64, n). glibc serves that from a chunk of
// n + 64 + 32 bytes, hands back the n it needs and frees the leading and trailing remainders (tens of bytes)
// as chunks of their own, where the next small allocation (a TensorImpl, a vector) often settles. When the
// tensor is freed, its chunk cannot merge with those neighbours, so it is n bytes: less than the n + 96 the
// next tensor of the same size asks for. Every pass of a model then takes new memory at the top of the heap
// (M_MMAP_MAX = 0 puts big tensors there) and faults its pages in: measured with softmax attention at 8K tokens
// (scores of 256 MB), the heap grew 0.95 → 1.49 → 2.03 → 2.29 GB over four identical forwards, each pass after
// the first faulting in 512 MB of fresh pages — the bench's "forward slower than forward + backward" anomaly —
// and reached 3.4 GB where the live peak is 0.87 GB. This allocator asks for plain malloc(n + 64 + 8) and aligns
// inside: a freed tensor's chunk is exactly what the next tensor of its size asks for, and in the same
// measurement the heap stayed at 1.02 GB from the second pass on, every later pass without a page fault.
// The raw pointer is stored just before the aligned one, so the deleter needs the data pointer alone (as
// raw_allocate's users require). Sizes go to LibTorch's profiled memory reporter as the default allocator's
// do, so that a profiler's memory hook (bench's peak memory) sees every allocation and free.
// LibTorch 1.13's Allocator::allocate is const and has no copy_data; 2.x's allocate is not const and copy_data
// is pure virtual. Both spellings are defined, none marked override: each version overrides the ones it declares.
class HeapCpuAllocator final : public at::Allocator {
 public:
  static constexpr size_t kAlign = c10::gAlignment;
  static constexpr size_t kSlack = kAlign + sizeof(void*);

  at::DataPtr allocate(size_t nbytes) const {
    void* data = nullptr;
    if (nbytes > 0) {
      void* raw = nbytes <= SIZE_MAX - kSlack ? std::malloc(nbytes + kSlack) : nullptr;
      TORCH_CHECK(raw, "mimic's CPU allocator: can't allocate memory: you tried to allocate ", nbytes, " bytes (out of memory)");
      const auto at = (reinterpret_cast<uintptr_t>(raw) + sizeof(void*) + kAlign - 1) & ~static_cast<uintptr_t>(kAlign - 1);
      data = reinterpret_cast<void*>(at);
      reinterpret_cast<void**>(data)[-1] = raw;
#ifdef MIMIC_UNDER_ASAN
      // the slack around the tensor's bytes is poisoned, so that AddressSanitizer stops a kernel that reads or
      // writes past a tensor as it would with LibTorch's exact-size allocation
      auto* first = static_cast<char*>(raw);
      auto* slot = reinterpret_cast<char*>(reinterpret_cast<void**>(data) - 1);
      ASAN_POISON_MEMORY_REGION(first, static_cast<size_t>(slot - first));
      ASAN_POISON_MEMORY_REGION(static_cast<char*>(data) + nbytes, static_cast<size_t>(first + nbytes + kSlack - (static_cast<char*>(data) + nbytes)));
#endif
      c10::profiledCPUMemoryReporter().New(data, nbytes);
    }
    return {data, data, &release, at::Device(at::DeviceType::CPU)};
  }
  at::DataPtr allocate(size_t nbytes) { return static_cast<const HeapCpuAllocator*>(this)->allocate(nbytes); }
  at::DeleterFnPtr raw_deleter() const { return &release; }
  void copy_data(void* dest, const void* src, size_t count) const {
    if (count > 0) std::memcpy(dest, src, count);
  }

  static void release(void* data) {
    if (!data) return;
    c10::profiledCPUMemoryReporter().Delete(data);
    void* raw = reinterpret_cast<void**>(data)[-1];
#ifdef MIMIC_UNDER_ASAN
    ASAN_UNPOISON_MEMORY_REGION(raw, __sanitizer_get_allocated_size(raw));
#endif
    std::free(raw);
  }
};
}  // namespace

void install_cpu_allocator() {
  static HeapCpuAllocator allocator;  // lives as long as the process: tensors outlive any scope that could own it
  // priority 1: above LibTorch's own registration (0), so a later re-registration of the default does not undo it
  c10::SetCPUAllocator(&allocator, /*priority=*/1);
}

std::string cpu_allocator_setting_problem() {
  const char* v = std::getenv("MIMIC_CPU_ALLOCATOR");
  if (!v || !*v || std::strcmp(v, "mimic") == 0 || std::strcmp(v, "libtorch") == 0) return "";
  return "MIMIC_CPU_ALLOCATOR=" + shown_excerpt(v, 40) + ": expected mimic (the default) or libtorch (LibTorch's own CPU allocator)";
}

void init_runtime(int threads) {
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);
  // LibTorch's own allocator stays available, to compare with in one binary and as the way back should a platform's
  // malloc not suit mimic's (docs/cli.md)
  const std::string problem = cpu_allocator_setting_problem();
  MIMIC_CHECK(problem.empty(), problem);
  const char* which = std::getenv("MIMIC_CPU_ALLOCATOR");
  if (!which || std::strcmp(which, "libtorch") != 0) install_cpu_allocator();
  int n = threads > 0 ? threads : available_cores();
  at::set_num_threads(n);
}

void seed_everything(uint64_t seed) { torch::manual_seed(seed); }

std::string mimic_version() { return MIMIC_VERSION; }

namespace {
// Shared objects mapped into this process whose file name contains `needle`.
std::set<std::string> mapped_libraries(const std::string& needle) {
  std::set<std::string> found;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    auto base = path.substr(path.rfind('/') + 1);
    if (base.find(needle) != std::string::npos && base.find(".so") != std::string::npos) found.insert(path);
  }
  return found;
}
std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out.empty() ? "none found" : out;
}
}  // namespace

SystemInfo system_info() {
  SystemInfo info;
  info.threads = at::get_num_threads();
  info.cores = available_cores();
  info.torch_version = TORCH_VERSION;
  // Touch BLAS so that a lazily loaded implementation is mapped.
  auto a = torch::ones({8, 8});
  (void)torch::mm(a, a).sum().item<float>();
  auto blas = mapped_libraries("blas");
  auto lapack = mapped_libraries("lapack");
  blas.insert(lapack.begin(), lapack.end());
  // Debian's alternatives make libblas.so.3 a symlink: report where it points.
  std::set<std::string> resolved;
  for (const auto& p : blas) {
    char buf[4096];
    ssize_t n = readlink(p.c_str(), buf, sizeof(buf) - 1);
    resolved.insert(n > 0 ? p + " -> " + std::string(buf, n) : p);
  }
  info.blas = join(resolved);
  auto omp = mapped_libraries("omp");
  info.openmp = join(omp);
  info.parallel_info = at::get_parallel_info();
  info.mimic_version = mimic_version();
  info.cpu_allocator = dynamic_cast<HeapCpuAllocator*>(c10::GetCPUAllocator()) ? "mimic" : "libtorch";
  return info;
}


c10::Device resolve_device(const std::string& spec, int local_rank) {
  const bool cuda = torch::cuda::is_available();
  if (spec == "auto") {
    if (!cuda) return c10::Device(c10::kCPU);
    const auto n = static_cast<int64_t>(torch::cuda::device_count());
    MIMIC_CHECK(local_rank >= 0 && local_rank < n, "--device auto: LOCAL_RANK ", local_rank, " but ", n, " CUDA device", n == 1 ? "" : "s",
                " visible");
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
  }
  if (spec == "cpu-checked") return checked_device();
  const bool known = spec == "cpu" || spec == "cuda" || (spec.rfind("cuda:", 0) == 0 && spec.size() > 5 && spec.size() <= 8 &&
                                                        spec.find_first_not_of("0123456789", 5) == std::string::npos);
  MIMIC_CHECK(known, "--device: unknown device '", spec, "' (known: auto, cpu, cuda, cuda:N, cpu-checked)");
  if (spec == "cpu") return c10::Device(c10::kCPU);
  MIMIC_CHECK(cuda, "--device ", spec, ": no CUDA device is available (",
              torch::cuda::device_count() == 0 ? "this LibTorch sees none; a CPU-only LibTorch never does" : "CUDA is not usable", ")");
  const int64_t index = spec == "cuda" ? 0 : std::stoll(spec.substr(5));
  const auto n = static_cast<int64_t>(torch::cuda::device_count());
  MIMIC_CHECK(index < n, "--device ", spec, ": only ", n, " CUDA device", n == 1 ? "" : "s", " visible (cuda:0 ... cuda:", n - 1, ")");
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
}

at::Tensor host(const at::Tensor& t) { return t.device().is_cpu() ? t.contiguous() : t.to(torch::kCPU).contiguous(); }

void synchronize(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

}  // namespace mimic
