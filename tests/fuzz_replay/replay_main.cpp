// The fuzz corpora replayed in every test run (issue 38): each libFuzzer target of bench/fuzz/ is compiled into this
// one program with its entry point renamed (LLVMFuzzerTestOneInput → mimic_replay_<reader>, tests/CMakeLists.txt),
// without libFuzzer or the sanitizers, and runs every input of its corpus (bench/fuzz/corpus/<reader>/). A target
// treats mimic::Error as a refused file; an input that crashes, or throws anything else, fails the test named for
// it, between fuzzing runs (bench/fuzz.sh) rather than at the next one.
//   mimic_fuzz_replay READER CORPUS_DIR
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_replay_targets.h"  // generated: kReplayTargets, {name, entry point} per target

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: mimic_fuzz_replay READER CORPUS_DIR\n");
    return 2;
  }
  const std::string reader = argv[1];
  const auto target = std::find_if(std::begin(kReplayTargets), std::end(kReplayTargets), [&](const auto& t) { return reader == t.name; });
  if (target == std::end(kReplayTargets)) {
    std::fprintf(stderr, "no fuzz target '%s'\n", reader.c_str());
    return 2;
  }
  std::vector<std::filesystem::path> inputs;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(argv[2], ec))
    if (e.is_regular_file()) inputs.push_back(e.path());
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {  // a replay of nothing would pass whatever the reader does
    std::fprintf(stderr, "%s: no corpus inputs in %s\n", reader.c_str(), argv[2]);
    return 1;
  }
  for (const auto& path : inputs) {
    std::ifstream f(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    try {
      target->run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: corpus input %s threw an exception that is not a mimic::Error: %s\n", reader.c_str(), path.c_str(), e.what());
      return 1;
    }
  }
  std::printf("%s: %zu corpus inputs replayed\n", reader.c_str(), inputs.size());
  return 0;
}
