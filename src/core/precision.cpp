#include "mimic/core/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include "mimic/core/checked_device.h"
#include "mimic/core/error.h"

namespace mimic {

// LibTorch 2.4 replaced the per-device functions (set_enabled for CUDA, set_cpu_enabled, ...) by ones that take the
// device type, and deprecated the old ones; 1.13 has only the old ones.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define MIMIC_AUTOCAST_BY_DEVICE_TYPE 1
#endif

namespace {
bool autocast_enabled(c10::DeviceType t) {
#ifdef MIMIC_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::is_autocast_enabled(t);
#else
  return t == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}
void set_autocast_enabled(c10::DeviceType t, bool on) {
#ifdef MIMIC_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_enabled(t, on);
#else
  if (t == c10::DeviceType::CUDA)
    at::autocast::set_enabled(on);
  else
    at::autocast::set_cpu_enabled(on);
#endif
}
at::ScalarType autocast_dtype(c10::DeviceType t) {
#ifdef MIMIC_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::get_autocast_dtype(t);
#else
  return t == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#endif
}
void set_autocast_dtype(c10::DeviceType t, at::ScalarType d) {
#ifdef MIMIC_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_dtype(t, d);
#else
  if (t == c10::DeviceType::CUDA)
    at::autocast::set_autocast_gpu_dtype(d);
  else
    at::autocast::set_autocast_cpu_dtype(d);
#endif
}
}  // namespace

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::Fp32;
  if (name == "bf16") return Precision::Bf16;
  throw Error("unknown precision '" + name + "' (fp32 or bf16)");
}

const char* precision_name(Precision p) { return p == Precision::Bf16 ? "bf16" : "fp32"; }

void check_precision_on(Precision p, const c10::Device& device) {
  if (p == Precision::Bf16 && !device.is_cuda() && !device.is_cpu())
    throw Error("--precision bf16 (autocast) runs on a CUDA device or the CPU, not on " + device_label(device));
}

AutocastGuard::AutocastGuard(Precision p, const c10::Device& device) {
  if (p == Precision::Fp32) return;
  check_precision_on(p, device);
  type_ = device.type();
  was_enabled_ = autocast_enabled(type_);
  dtype_before_ = static_cast<int>(autocast_dtype(type_));
  set_autocast_dtype(type_, at::kBFloat16);
  set_autocast_enabled(type_, true);
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // the outermost guard drops the cast weights: the optimizer changes them before the next forward
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast_enabled(type_, was_enabled_);
  set_autocast_dtype(type_, static_cast<at::ScalarType>(dtype_before_));
}

AutocastOff::AutocastOff() {
  cpu_ = autocast_enabled(c10::DeviceType::CPU);
  cuda_ = autocast_enabled(c10::DeviceType::CUDA);
  if (cpu_) set_autocast_enabled(c10::DeviceType::CPU, false);
  if (cuda_) set_autocast_enabled(c10::DeviceType::CUDA, false);
}

AutocastOff::~AutocastOff() {
  if (cpu_) set_autocast_enabled(c10::DeviceType::CPU, true);
  if (cuda_) set_autocast_enabled(c10::DeviceType::CUDA, true);
}

c10::ScalarType float_or_wider(c10::ScalarType t) { return t == at::kBFloat16 || t == at::kHalf ? at::kFloat : t; }

at::Tensor float_or_wider(const at::Tensor& t) {
  const auto wide = float_or_wider(t.scalar_type());
  return wide == t.scalar_type() ? t : t.to(wide);
}

}  // namespace mimic
