#include "mimic/core/runtime.h"

#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <thread>

#include <torch/torch.h>
#include <torch/version.h>

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

}  // namespace mimic
