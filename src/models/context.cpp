// How refusals name a model's context, and the one check of a --seq-len against it (declared in model.h).
#include <string>

#include "mimic/core/error.h"
#include "mimic/models/model.h"

namespace mimic::models {

std::string context_words(int64_t context, const std::string& note) {
  return "the model's context of " + std::to_string(context) + (note.empty() ? "" : " (" + note + ")");
}
std::string context_words(const ModelSummary& s) { return context_words(s.max_positions, s.context_note); }

void check_seq_len(int64_t seq_len, int64_t context, const std::string& context_note, int64_t least, const std::string& least_why) {
  MIMIC_CHECK(seq_len >= least && seq_len <= context, "--seq-len ", seq_len, " must lie in ", least, "..", context, " (",
              least_why.empty() ? "" : std::to_string(least) + ": " + least_why + "; ", context, ": the model's context",
              context_note.empty() ? "" : " — " + context_note, ")");
}

}  // namespace mimic::models
