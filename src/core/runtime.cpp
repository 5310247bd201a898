#include "mimic/core/runtime.h"

#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <thread>

#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "mimic/core/error.h"
#include "mimic/core/version.h"

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

void init_runtime(int threads) {
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);
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
