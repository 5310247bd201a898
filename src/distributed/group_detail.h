// What group.cpp and overlapped_average.cpp share (internal to src/distributed): the packing of tensors into the
// flat buckets every all-reduce sends, synchronous or overlapped, and how a c10d error is quoted.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace at { class Tensor; }

namespace mimic::distributed::detail {

// The largest bucket in bytes for --bucket-mb `mb`, checked to lie in (0, 4096].
int64_t bucket_bytes(double mb);
// The first line of a c10d or Gloo message (they run to many lines of C++ context).
std::string first_line(const std::string& s);
// One flat tensor of the tensors' elements, in order (one message instead of one per tensor), and its values
// written back into them.
at::Tensor pack(const std::vector<at::Tensor>& tensors);
void unpack(const at::Tensor& flat, std::vector<at::Tensor>& tensors);

}  // namespace mimic::distributed::detail
