// safetensors, sharded: TensorStore::open_index on a fuzzed model.safetensors.index.json beside a fuzzed shard.
// The input is the index, a "\n----\n" line, then the bytes of model-00001-of-00002.safetensors; the second
// shard, model-00002-of-00002.safetensors, is a fixed valid file, so an index may name one, both or neither.
#include <torch/torch.h>

#include "fuzz_util.h"
#include "mimic/io/safetensors.h"
#include "mimic/io/tensor_store.h"

namespace {
void write_fixed_shard() {
  static bool done = false;
  if (done) return;
  done = true;
  mimic::io::save_safetensors(mimic::fuzz::scratch() + "/model-00002-of-00002.safetensors",
                              {{"h.0.w", torch::ones({2, 3})}, {"h.0.b", torch::zeros({3}, at::kHalf)}});
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  write_fixed_shard();
  const auto parts = mimic::fuzz::split_parts(data, size, 2);
  const auto index = mimic::fuzz::write_file("model.safetensors.index.json", parts[0]);
  mimic::fuzz::write_file("model-00001-of-00002.safetensors", parts[1]);
  MIMIC_FUZZ_EXPECT_ERRORS({
    auto s = mimic::io::TensorStore::open_index(index);
    for (const auto& name : s.names()) s.load(name, at::kFloat);
  });
  return 0;
}
