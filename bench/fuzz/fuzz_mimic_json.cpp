// mimic.json (a converted model's attention description): load_model on a copy of the tiny GPT-2 fixture
// (tests/fixtures/models/gpt2-plain: 2 layers, 4 heads of 8) with the input as its mimic.json. Each layer's
// kernel is built from the kind and options the input gives; the fixture has no kernel tensors, so a
// description that builds then stops at the first missing one, which is an error like any other.
#include <filesystem>

#include "fuzz_util.h"
#include "mimic/models/model.h"

namespace {
const std::string& model_dir() {
  static const std::string dir = [] {
    namespace fs = std::filesystem;
    const fs::path src = fs::path(mimic::fuzz::source_dir()) / "tests/fixtures/models/gpt2-plain";
    const fs::path d = fs::path(mimic::fuzz::scratch()) / "model";
    fs::create_directories(d);
    for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(src / f, d / f, fs::copy_options::overwrite_existing);
    return d.string();
  }();
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& dir = model_dir();
  mimic::fuzz::write_file("model/mimic.json", data, size);
  MIMIC_FUZZ_EXPECT_ERRORS(mimic::models::load_model(dir));
  return 0;
}
