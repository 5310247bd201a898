#include "mimic/core/checked_device.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>
#include <torch/torch.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "mimic/core/error.h"

namespace mimic {
namespace {

constexpr c10::DeviceType kStandIn = c10::kPrivateUse1;

// A stand-in storage's data pointer is its CPU memory's address with the top bit flipped: not an address user
// space has (x86-64 and AArch64 alike), so dereferencing it faults. The memory itself is reached through the
// CPU storage the DataPtr's context holds.
constexpr std::uintptr_t kPoison = std::uintptr_t{1} << 63;
void* poisoned(const void* p) { return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) ^ kPoison); }

struct Holder {
  c10::Storage cpu;
};
void release_holder(void* ctx) { delete static_cast<Holder*>(ctx); }

bool is_stand_in(const at::Tensor& t) { return t.defined() && t.device().type() == kStandIn; }

const c10::Storage& cpu_storage(const at::Tensor& t) {
  const c10::DataPtr& dp = t.storage().data_ptr();
  MIMIC_CHECK(dp.get_deleter() == &release_holder, "--device cpu-checked: a ", c10::DeviceTypeName(kStandIn),
              " tensor that mimic's checked CPU did not make");
  return static_cast<Holder*>(dp.get_context())->cpu;
}

// The stand-in's pointer to `cpu`'s memory (poisoned), holding `cpu` alive.
c10::DataPtr stand_in_data(const c10::Storage& cpu) {
  return c10::DataPtr(poisoned(cpu.data()), new Holder{cpu}, &release_holder, c10::Device(kStandIn, 0));
}

c10::Storage stand_in_storage(const c10::Storage& cpu) {
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), static_cast<int64_t>(cpu.nbytes()),
                                                            stand_in_data(cpu), /*allocator=*/nullptr, /*resizable=*/false));
}

// `t`'s view (sizes, strides, offset, conjugate and negative bits) over other storage, as a tensor of the given
// backend; an inference tensor exactly when `t` is one (made under InferenceMode, a view of a normal tensor is not).
at::Tensor rewrap(const at::Tensor& t, c10::Storage storage, c10::DispatchKey key) {
  c10::InferenceMode mode(t.is_inference());
  auto out = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(key), t.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides());
  out.unsafeGetTensorImpl()->set_storage_offset(t.storage_offset());
  if (t.is_conj()) out._set_conj(true);
  if (t.is_neg()) out._set_neg(true);
  return out;
}

// Points a stand-in storage at its CPU storage's memory again after the CPU kernel reallocated it (a resize): every
// tensor sharing the stand-in storage sees the change, as views of one GPU storage do.
void follow(c10::StorageImpl& stand_in, const c10::Storage& cpu) {
  if (stand_in.data() == poisoned(cpu.data()) && stand_in.nbytes() == cpu.nbytes()) return;
  stand_in.set_data_ptr_noswap(stand_in_data(cpu));
  stand_in.set_nbytes(cpu.nbytes());
}

at::Tensor as_cpu(const at::Tensor& t) { return rewrap(t, cpu_storage(t), c10::DispatchKey::CPU); }

at::Tensor as_stand_in(const at::Tensor& c) { return rewrap(c, stand_in_storage(c.storage()), c10::DispatchKey::PrivateUse1); }

std::string describe(const at::Tensor& t) {
  std::ostringstream os;
  os << c10::toString(t.scalar_type()) << t.sizes();
  return os.str();
}

// The operators that take tensors of two devices on purpose: copies between devices; and indexing, whose index
// lists may be on the CPU (a GPU's indexing takes CPU indices too) — the indexed tensor and the values may not.
bool copies(const std::string& name) { return name == "aten::_copy_from" || name == "aten::_copy_from_and_resize"; }
bool takes_cpu_indices(const std::string& name) {
  return name == "aten::index" || name == "aten::index_put_" || name == "aten::_index_put_impl_" || name == "aten::index_put";
}

// Replaces each tensor `v` holds — itself, or the elements of a list of tensors or of optional tensors — by
// f(tensor, in_optional_list), true for the elements of a Tensor?[] (indexing's index lists); anything else stays.
template <typename F>
void map_tensors(c10::IValue& v, F& f) {
  if (v.isTensor()) {
    v = f(v.toTensor(), false);
  } else if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(f(t, false));
    v = out;
  } else if (v.isList()) {
    auto list = v.toList();
    c10::impl::GenericList out(list.elementType());
    out.reserve(list.size());
    for (const c10::IValue& e : list) out.push_back(e.isTensor() ? c10::IValue(f(e.toTensor(), true)) : e);
    v = out;
  }
}

// The one kernel of the stand-in device: the operation on the CPU, over the same memory.
void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t n_args = schema.arguments().size();
  const bool copy = copies(schema.name()), cpu_indices = takes_cpu_indices(schema.name());
  struct Passed {
    at::Tensor cpu;     // what the CPU kernel got
    at::Tensor caller;  // the caller's tensor
  };
  std::vector<Passed> passed;
  std::string stray;
  bool to_another_device = false;  // a device argument that names neither the stand-in nor the default
  auto in = [&](const at::Tensor& t, bool in_optional_list) -> at::Tensor {
    if (!t.defined()) return t;
    const bool may_be_cpu = t.dim() == 0 || copy || (cpu_indices && in_optional_list);
    if (!is_stand_in(t) && !may_be_cpu && stray.empty()) stray = describe(t) + " on " + t.device().str();
    at::Tensor cpu = is_stand_in(t) ? as_cpu(t) : t;
    passed.push_back({cpu, t});
    return cpu;
  };
  for (size_t i = stack->size() - n_args; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    map_tensors(v, in);
    if (v.isDevice()) {
      if (v.toDevice().type() == kStandIn)
        v = c10::IValue(c10::Device(c10::kCPU));
      else
        to_another_device = true;
    }
  }
  MIMIC_CHECK(stray.empty(), "--device cpu-checked: ", schema.name(), " got a tensor on the CPU (", stray,
              ") beside the run's device tensors: something made it without the run's device (on a GPU this operation fails too)");

  if (copy) {
    // The copies between a device and the CPU, which LibTorch leaves to the device: here both sides are CPU memory.
    const bool resize = schema.name() == "aten::_copy_from_and_resize";
    at::Tensor src = (*stack)[stack->size() - n_args].toTensor(), dst = (*stack)[stack->size() - n_args + 1].toTensor();
    torch::jit::drop(*stack, n_args);
    if (resize) dst.resize_as_(src);
    dst.copy_(src);
    torch::jit::push(*stack, dst);
  } else {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  }

  // An in-place or out= operation may have resized its output (the caller's tensor follows its CPU view) or
  // reallocated or replaced its storage (the stand-in storage follows the CPU one).
  for (auto& p : passed) {
    if (!is_stand_in(p.caller)) continue;
    auto* impl = p.caller.unsafeGetTensorImpl();
    if (p.cpu.sizes() != p.caller.sizes() || p.cpu.strides() != p.caller.strides()) impl->set_sizes_and_strides(p.cpu.sizes(), p.cpu.strides());
    if (p.cpu.storage_offset() != p.caller.storage_offset()) impl->set_storage_offset(p.cpu.storage_offset());
    if (p.cpu.storage().is_alias_of(cpu_storage(p.caller)))
      follow(*p.caller.storage().unsafeGetStorageImpl(), p.cpu.storage());
    else
      impl->set_storage_keep_dtype(stand_in_storage(p.cpu.storage()));
  }
  auto out = [&](const at::Tensor& t, bool) -> at::Tensor {
    if (!t.defined()) return t;
    for (const auto& p : passed)
      if (p.cpu.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return p.caller;  // in place or out=: the caller's own tensor
    if (to_another_device || !t.device().is_cpu()) return t;
    MIMIC_CHECK(t.layout() == at::kStrided, "--device cpu-checked: ", schema.name(), " returned a ", t.layout(),
                " tensor (the checked CPU takes strided tensors only)");
    // a view of an argument shares the argument's stand-in storage, as a view on a GPU shares its base's
    for (const auto& p : passed)
      if (is_stand_in(p.caller) && t.storage().is_alias_of(p.cpu.storage())) return rewrap(t, p.caller.storage(), c10::DispatchKey::PrivateUse1);
    return as_stand_in(t);
  };
  for (size_t i = stack->size() - schema.returns().size(); i < stack->size(); ++i) map_tensors((*stack)[i], out);
}

// Module::to moves a parameter with set_data, which LibTorch allows only between the devices it knows as dense:
// a CPU tensor and a stand-in one are the same kind of tensor here.
bool compatible_for_set_data(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) { return t.layout() == at::kStrided && (t.device().is_cpu() || is_stand_in(t)); };
  if (dense(self) && dense(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

// One device, no streams: what LibTorch's autograd engine and device guards ask of a device.
struct StandInGuard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kStandIn; }
  c10::Device exchangeDevice(c10::Device) const override { return c10::Device(kStandIn, 0); }
  c10::Device getDevice() const override { return c10::Device(kStandIn, 0); }
  void setDevice(c10::Device) const override {}
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const noexcept override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override { return c10::Stream(c10::Stream::DEFAULT, s.device()); }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
};

// Registered when the library loads, not when the device is first asked for: the autograd engine counts the devices
// once, at the first backward pass of the process, and a device registered later has no queue there.
C10_REGISTER_GUARD_IMPL(PrivateUse1, StandInGuard);

}  // namespace

c10::Device checked_device() {
  // Registered once per process, and kept for its lifetime (the dispatcher drops a library's kernels when its Library
  // object goes; the static pointers keep them reachable).
  static const bool registered = [] {
    static auto* fallback = new torch::Library(torch::Library::IMPL, "_", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    fallback->fallback(torch::CppFunction::makeFromBoxedFunction<&run_on_cpu>());
    // An operator with a CPU kernel and a generic (composite) one would run the generic one on the stand-in
    // (layer norm's, say, which rounds differently): it gets the CPU kernel too, so that the values are the CPU's.
    static auto* same_kernels = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    auto& dispatcher = c10::Dispatcher::singleton();
    for (const auto& name : dispatcher.getAllOpNames()) {
      if (name.name.rfind("aten::", 0) != 0) continue;
      const auto op = dispatcher.findOp(name);
      if (!op || !op->hasKernelForDispatchKey(c10::DispatchKey::CPU)) continue;
      if (!op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
          !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional))
        continue;
      const std::string unqualified = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
      same_kernels->impl(unqualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&run_on_cpu>());
    }
    // The copies see a conjugate or negative view as it is (the CPU copy below resolves the bits): through the
    // fallbacks of those keys, a copy would materialise its source with clone, which copies, which clones ...
    static torch::Library* lazy_bits[] = {new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::Conjugate, __FILE__, __LINE__),
                                          new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::Negative, __FILE__, __LINE__)};
    for (auto* lazy : lazy_bits) {
      lazy->impl("_copy_from", torch::CppFunction::makeFallthrough());
      lazy->impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
    }
    static auto* set_data = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::AutogradPrivateUse1, __FILE__, __LINE__);
    set_data->impl("_has_compatible_shallow_copy_type", TORCH_FN(compatible_for_set_data));
    return true;
  }();
  (void)registered;
  return c10::Device(kStandIn, 0);
}

bool is_checked_device(const c10::Device& d) { return d.type() == kStandIn; }

std::string device_label(const c10::Device& d) { return is_checked_device(d) ? "cpu-checked" : d.str(); }

at::Tensor as_library_tensor(const at::Tensor& t) { return is_stand_in(t) ? as_cpu(t) : t; }

bool computes_on_cpu(const c10::Device& d) { return d.is_cpu() || is_checked_device(d); }

}  // namespace mimic
