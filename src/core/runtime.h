// Process-wide runtime set-up: threads, allocator tuning, seeding, and a description of the system.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "mimic/core/checked_device.h"

#include <cstdint>
#include <string>

namespace mimic {

// Call once at start-up (every CLI command does). threads <= 0 means all cores. Sets LibTorch's intra-op
// threads explicitly (it picks 1 on this machine otherwise) and tunes glibc malloc so that large tensors
// are not re-mmapped on every allocation (M_MMAP_MAX=0, M_TRIM_THRESHOLD=-1), and installs mimic's CPU allocator
// unless MIMIC_CPU_ALLOCATOR=libtorch (a value cpu_allocator_setting_problem refuses is an error).
void init_runtime(int threads);

// What is wrong with MIMIC_CPU_ALLOCATOR, or "" when it is unset, empty, mimic or libtorch: a typo must not silently
// run (or measure) the allocator it meant to leave out. The CLI checks it before any command, as MIMIC_PROGRESS.
std::string cpu_allocator_setting_problem();

// Makes LibTorch's CPU tensors come from mimic's allocator: plain malloc with the alignment made inside, so that
// the memory a freed tensor leaves serves the next tensor of its size (LibTorch's own posix_memalign leaves it a
// few bytes short, and the heap grows pass after pass; runtime.cpp says what was measured). Idempotent; tensors
// allocated before keep their own deleters.
void install_cpu_allocator();

// Seed every random generator mimic uses (LibTorch's CPU generator).
void seed_everything(uint64_t seed);

// Number of cores available to this process.
int available_cores();

// The device a command computes on, from its --device argument: "cpu", "cuda" (the first GPU), "cuda:N", or
// "auto" — cuda:local_rank when LibTorch sees a CUDA device, the CPU otherwise — or "cpu-checked", the CPU behind a
// stand-in device that catches a tensor left on the CPU (mimic/core/checked_device.h; never picked by auto). local_rank is the launcher's
// LOCAL_RANK as the caller read and checked it (distributed::environment(); core does not read the environment
// twice). A name LibTorch does not know, "cuda" without a CUDA device (a CPU-only LibTorch, or no GPU visible) and N
// beyond the devices present are a mimic::Error saying which.
c10::Device resolve_device(const std::string& spec, int local_rank = 0);
// `t` in host memory and contiguous: what every raw read of a tensor's bytes (data_ptr) starts from, since a GPU
// tensor's data pointer is device memory. No copy when `t` already is.
at::Tensor host(const at::Tensor& t);
// Waits until the work queued on `device` is done (CUDA runs asynchronously; timings must wait). No-op on the CPU.
void synchronize(const c10::Device& device);

struct SystemInfo {
  int threads = 0;             // LibTorch intra-op threads in use
  int cores = 0;               // cores available
  std::string torch_version;   // e.g. 1.13.1
  std::string blas;            // BLAS library actually loaded (path from the process's mappings)
  std::string openmp;          // OpenMP runtime loaded
  std::string parallel_info;   // at::get_parallel_info()
  std::string mimic_version;
  std::string cpu_allocator;   // "mimic" (install_cpu_allocator's) or "libtorch" (MIMIC_CPU_ALLOCATOR=libtorch)
};
SystemInfo system_info();

std::string mimic_version();

}  // namespace mimic
