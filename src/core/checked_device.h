// The checked CPU (`--device cpu-checked`): the CPU's own kernels behind a device that is not the CPU, so that a
// machine without a GPU catches what only a GPU run used to — a tensor made on the CPU (a factory without the run's
// device, a constant, a host copy kept) meeting the run's device tensors in an operation.
//
// How: LibTorch's open device slot (PrivateUse1) gets one boxed kernel for every operator. It hands each
// operation's stand-in tensors to the CPU kernel as CPU tensors over the same memory, and wraps what comes back as
// stand-in tensors again (a view shares its base's stand-in storage), so the values are the CPU's. An operation
// given a CPU tensor with dimensions beside stand-in ones is a mimic::Error naming the operator and the tensor —
// except the copies between devices, and indexing's index lists, which a GPU takes from the CPU too (not the indexed
// tensor or the values written). A 0-dimensional CPU tensor passes anywhere (CUDA takes one in elementwise
// operations only: index_select with a 0-dimensional CPU index passes here and fails there). A stand-in tensor's
// data pointer does not point at its memory: a raw read (data_ptr without mimic::host) crashes at once instead of
// reading what a GPU would not let it read.
//
// Random numbers come from the CPU generator, in the order a CPU run draws them. bf16 autocast does not run there
// (the CPU's autocast is for CPU tensors): it is refused. Outside what mimic computes (its stages' values are held to
// the CPU's byte for byte by the tests): convolutions (LibTorch picks their backend by device type and has none for
// this one), torch::save of a stand-in tensor (set_ with a storage), and an operator with both a CPU kernel and a
// decomposition (mish's backward, LSTM), whose values can differ from the CPU's in the last place.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <string>

namespace mimic {

// The stand-in device; registers its kernels the first time (once per process).
c10::Device checked_device();
bool is_checked_device(const c10::Device& d);
// For a library outside LibTorch's dispatcher that takes CPU tensors only (Gloo's collectives): a checked-CPU tensor
// as the CPU tensor over the same memory (writes go through); any other tensor as it is.
at::Tensor as_library_tensor(const at::Tensor& t);

// The device as the user names it: "cpu", "cuda:0", "cpu-checked".
std::string device_label(const c10::Device& d);
// Whether `d`'s computation is the CPU's (cpu, cpu-checked): its random numbers come from the CPU generator, so a
// run there resumes and repeats as a CPU run does.
bool computes_on_cpu(const c10::Device& d);

}  // namespace mimic
