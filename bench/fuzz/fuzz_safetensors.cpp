// safetensors, one file: SafeTensorsFile::open on the input, then every tensor it accepts is loaded, as stored
// and converted to float32 (what load_model does with F16/BF16 checkpoints).
#include <torch/torch.h>

#include "fuzz_util.h"
#include "mimic/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = mimic::fuzz::write_file("model.safetensors", data, size);
  MIMIC_FUZZ_EXPECT_ERRORS({
    auto f = mimic::io::SafeTensorsFile::open(path);
    for (const auto& name : f.names()) {
      auto t = f.load(name);
      if (t.is_floating_point()) f.load(name, at::kFloat);
    }
  });
  return 0;
}
