// Classification data as JSON lines ({"text": ..., "label": ..., "split": ...}): load_classification on the input,
// then every split is read, as finetune and record do.
#include "fuzz_util.h"
#include "mimic/data/classification.h"
#include "mimic/data/corpus.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = mimic::fuzz::write_file("data.jsonl", data, size);
  MIMIC_FUZZ_EXPECT_ERRORS({
    auto d = mimic::data::load_classification(path);
    for (auto s : {mimic::data::Split::Train, mimic::data::Split::Validation, mimic::data::Split::Test})
      for (const auto& ex : d.split(s)) (void)ex.text.size();
  });
  return 0;
}
