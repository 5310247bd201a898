// Shared by the libFuzzer targets of bench/fuzz/: every reader under test takes a path, so an input is written
// to a file in a private scratch folder (on /dev/shm when there is one, to keep the disk out of the loop).
// A target calls the real reader and treats mimic::Error as the expected outcome of a bad file; any other
// exception escapes and aborts (libFuzzer reports it), as do crashes, sanitizer reports, leaks and hangs.
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mimic/core/error.h"

namespace mimic::fuzz {

// A folder of its own per process (several targets or jobs may run at once), removed at exit.
inline const std::string& scratch() {
  static const std::string dir = [] {
    namespace fs = std::filesystem;
    const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string d = (base / "mimic-fuzz-XXXXXX").string();
    if (!mkdtemp(d.data())) std::abort();
    static struct Cleanup {
      std::string d;
      ~Cleanup() {
        std::error_code ec;
        std::filesystem::remove_all(d, ec);
      }
    } cleanup{d};
    return d;
  }();
  return dir;
}

inline std::string write_file(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}
inline std::string write_file(const std::string& name, const std::string& text) {
  return write_file(name, reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

// Splits an input into parts at a separator line (for readers that take several files), at most `n` parts;
// missing parts are empty.
inline std::vector<std::string> split_parts(const uint8_t* data, size_t size, size_t n, const std::string& sep = "\n----\n") {
  std::string s(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t at = 0;
  while (parts.size() + 1 < n) {
    size_t p = s.find(sep, at);
    if (p == std::string::npos) break;
    parts.push_back(s.substr(at, p - at));
    at = p + sep.size();
  }
  parts.push_back(s.substr(at));
  parts.resize(n);
  return parts;
}

// The repository's root, for the embedded tokenizers and fixtures some targets load once at start.
inline std::string source_dir() { return MIMIC_SOURCE_DIR; }

}  // namespace mimic::fuzz

// The body of a target: a mimic::Error is a refused file, which is what a bad input should give.
#define MIMIC_FUZZ_EXPECT_ERRORS(body) \
  try {                                \
    body;                              \
  } catch (const ::mimic::Error&) {    \
  }
