// The valid ranges of mimic's numeric options, in one place (docs/reliability.md, "Options and their ranges").
//
// Every numeric option of every command takes one of these validators with ->check(...). CLI11 runs it while
// parsing, before any command has started work (no model loaded, no file read or written), so an out-of-range
// value is one line — "mimic: error: --OPTION: must be an integer in [LO, HI], got X" — and a non-zero exit; and
// the validator's description is the range that --help prints next to the option ("INT:[1, 10^9]"). The library
// checks the same limits again where a library user could bypass the CLI (train::train, the feature maps, ...);
// what only the data can decide (a length against the model's context) stays there.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace mimic::cli::range {

// Caps shared by every option of one kind, so that commands agree. They are far above any real use and only
// keep a typo from asking for unbounded time or memory.
inline constexpr int64_t kMaxSteps = 1'000'000'000;  // optimizer steps, warm-up, "every N steps"
inline constexpr int64_t kMaxTokens = 1 << 20;       // sequence lengths, windows, strides, tokens to generate
inline constexpr int64_t kMaxBatch = 65536;          // batch sizes, gradient accumulation
inline constexpr int64_t kMaxCount = 10'000'000;     // samples, examples, evaluation batches

// A whole number in [lo, hi]; `note` (e.g. "0: all cores") is added to the error message.
CLI::Validator integer(int64_t lo, int64_t hi, const std::string& note = "");
// A finite number in [lo, hi]; open_low / open_high exclude the bound: (lo, hi], [lo, hi).
CLI::Validator real(double lo, double hi, bool open_low = false, bool open_high = false);

// The ranges by kind of option.
CLI::Validator steps();                               // optimizer steps, "every N" with no 0 meaning: [1, 10^9]
CLI::Validator steps_or_zero();                       // warm-up, "every N" where 0 means never / only at the end: [0, 10^9]
CLI::Validator batch();                               // batch sizes, micro-batches per step: [1, 65536]
CLI::Validator tokens(int64_t lo);                    // lengths in tokens: [lo, 2^20]
CLI::Validator count(int64_t lo);                     // samples, examples, batches: [lo, 10^7]
CLI::Validator learning_rate();                       // (0, 10]
// logit distillation's temperature: [0.01, 100] (logits divided by less overflow: --kd 1e-300's loss was NaN), and 0 for
// off where the option has an off (finetune's; bench train's times a step at T, so its --kd has none)
CLI::Validator kd_temperature(bool zero_is_off);
CLI::Validator weight_decay();                        // [0, 10]
CLI::Validator fraction();                            // [0, 1]
CLI::Validator threads();                             // [0, 4 × cores]; 0: all cores
CLI::Validator seed();                                // [0, 2^64 − 1] (a negative seed would wrap around silently)
// Layer and head selections: "all" or a non-empty list of indices and ranges like 0,2,4-5 (whether they exist is
// the data's to decide); an empty string selected everything before and is refused now.
CLI::Validator index_list();
// A text option whose empty value would silently mean "not given" (--keep-softmax '', --probe-weights ''): refused.
CLI::Validator non_empty();
// A text to run a model on (generate's --prompt, forward's --text): "" refused as non_empty refuses it, while blank
// text is text (a space is a token: a prompt of spaces was refused as empty, where tokenize and --file took it).
// `instead`: what to do rather (an optional text: leave it out; a required one, forward's: give one).
CLI::Validator non_empty_text(const std::string& instead = "leave the option out instead");
CLI::Validator gigabytes();                           // memory budgets in GB: [0, 10^6]; what 0 means, the option says
CLI::Validator processes();                           // processes of a distributed run on one machine: [1, 4 × cores]
CLI::Validator port();                                // TCP ports: [1, 65535]
CLI::Validator seconds();                             // time limits in whole seconds: [1, 86400]

}  // namespace mimic::cli::range
