// maps files (a distill output, maps.safetensors with format mimic-distill-1): DistilledMaps::open on the input,
// then every layer's kernel is built and loaded, and its per-head metrics read, as convert and report do.
#include "fuzz_util.h"
#include "mimic/attention/distillable.h"
#include "mimic/distill/maps_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = mimic::fuzz::write_file("maps.safetensors", data, size);
  MIMIC_FUZZ_EXPECT_ERRORS({
    auto m = mimic::distill::DistilledMaps::open(path);
    m.feature_map();
    m.sla();
    for (auto layer : m.layers()) {
      MIMIC_FUZZ_EXPECT_ERRORS(m.head_kl(layer));
      m.kernel(layer);
    }
  });
  return 0;
}
