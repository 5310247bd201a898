// Process-wide runtime set-up: threads, allocator tuning, seeding, and a description of the system.
#pragma once
#include <cstdint>
#include <string>

namespace mimic {

// Call once at start-up (every CLI command does). threads <= 0 means all cores. Sets LibTorch's intra-op
// threads explicitly (it picks 1 on this machine otherwise) and tunes glibc malloc so that large tensors
// are not re-mmapped on every allocation (M_MMAP_MAX=0, M_TRIM_THRESHOLD=-1).
void init_runtime(int threads);

// Seed every random generator mimic uses (LibTorch's CPU generator).
void seed_everything(uint64_t seed);

// Number of cores available to this process.
int available_cores();

struct SystemInfo {
  int threads = 0;             // LibTorch intra-op threads in use
  int cores = 0;               // cores available
  std::string torch_version;   // e.g. 1.13.1
  std::string blas;            // BLAS library actually loaded (path from the process's mappings)
  std::string openmp;          // OpenMP runtime loaded
  std::string parallel_info;   // at::get_parallel_info()
  std::string mimic_version;
};
SystemInfo system_info();

std::string mimic_version();

}  // namespace mimic
