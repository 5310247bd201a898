// How messages name things: the name a mistyped word was meant to be (the "did you mean" of unknown commands and
// options, and of config.json keys mimic does not read), and a count with its noun.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mimic {

// The name among `names` a few letters from `word` (a typo of it: at most about a quarter of its letters off, or at
// most `most` edits when given), or "".
std::string nearest_name(const std::string& word, const std::vector<std::string>& names, size_t most = 0);

// "1 sample", "2 samples", "0 samples": `n` and the noun, plural unless n is 1 ("s" added, or `many` where given:
// "1 process", "2 processes").
std::string count_of(int64_t n, const std::string& one, const std::string& many = "");

// The note on an option's value cut to what the input allows ("--eval-batches 10 is more than the validation split
// holds (1): using 1"), or "" when `used` is not less than `asked`. The CLI's and the library's notes say it alike.
std::string clamped_note(const std::string& option, int64_t asked, int64_t used, const std::string& what);

// A size in bytes as a note says it: "3.21 GB", "12.6 MB", "512 kB".
std::string byte_size(double bytes);

}  // namespace mimic
