// config.json: load_config (the model families' readers of HF configs) on the input.
#include "fuzz_util.h"
#include "mimic/models/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = mimic::fuzz::write_file("config.json", data, size);
  MIMIC_FUZZ_EXPECT_ERRORS(mimic::models::load_config(path));
  return 0;
}
