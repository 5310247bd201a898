// Head-level placement: which heads of the converted layers keep softmax attention (`convert --keep-softmax`).
// Two rules rank the heads for `auto:K` and `auto:P%`:
//   kl     the heads whose distilled student fits the teacher worst (the highest held-out KL distill measured).
//          Per head and blind to circuits: an induction head copies from where a previous-token head of an earlier
//          layer points, and that partner may be easy to fit (low KL) yet break the copy when it turns linear.
//   probe  by measured effect: the converted model runs a calibration set drawn from the training split with
//          candidate heads restored to softmax, and a score of what it keeps of the teacher (in-context copy gain,
//          passkey retrieval, LM loss; probe_score below) decides. Greedy forward selection: restore the head that
//          raises the score most, measure again with it kept, repeat — so that the second half of a circuit is
//          found once the first is kept. To keep the cost down every head is screened once (restored alone into the
//          all-student model, and turned linear alone in the teacher: both halves of a circuit show in the second),
//          and each greedy step re-measures only the leaders of that screen. docs/convert.md, "Placement".
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mimic::models { class Model; }
namespace mimic::text { class Tokenizer; }
namespace mimic::attention {
class AttentionKernelImpl;
class DistillableKernel;
}  // namespace mimic::attention

namespace mimic::convert {

struct HeadRef {
  int64_t layer = 0, head = 0;
  bool operator==(const HeadRef& o) const { return layer == o.layer && head == o.head; }
  bool operator<(const HeadRef& o) const { return layer != o.layer ? layer < o.layer : head < o.head; }
};
std::string head_name(const HeadRef& h);  // "3.1"
// The heads of `layer` among `heads`, sorted (a layer's kept set, as a kernel's options list it).
std::vector<int64_t> heads_in_layer(const std::vector<HeadRef>& heads, int64_t layer);

// What --keep-softmax (or --cache-heads) asks for: nothing, auto:K (a number of heads), auto:P% (heads until the
// probe's copy gain reaches P% of the teacher's) or a list LAYER.HEAD,... Malformed specs are mimic::Errors naming
// `option`.
struct KeepSpec {
  enum class Kind { None, Count, Share, List };
  Kind kind = Kind::None;
  int64_t count = 0;            // Count
  double share = 0;             // Share, as a fraction in (0, 1]
  std::vector<HeadRef> heads;   // List, in the order given
};
KeepSpec parse_keep_spec(const std::string& spec, const std::string& option = "--keep-softmax");

// ---------------------------------------------------------------------------------------------- calibration
// The probe's calibration set. Copy segments are token runs of the *training* split (or of a text file the user
// names), each run doubled as [A A] (eval/copy.h); the passkey trials are eval/passkey.h's synthetic prompts with
// keys of the probe's own seed stream: per trial the prompt holding the key, the same prompt holding a decoy key,
// the key's tokens and alternatives' tokens.
struct ProbePasskey {
  std::vector<int64_t> prompt, decoy_prompt, key;
  std::vector<std::vector<int64_t>> alternatives;
};
struct ProbeCalibration {
  std::vector<std::vector<int64_t>> copy_segments;  // all of one length
  std::vector<int64_t> opening;                     // ids before each copy run (eval::CopyOptions::opening)
  std::vector<std::vector<int64_t>> lm_windows;     // all of one length; the LM loss scores their second halves
  std::vector<ProbePasskey> passkeys;
  std::string source;  // "the train split of all", "FILE"
  uint64_t seed = 0;   // the passkey trials' draws come from it: a placement is reproduced with it (helper-93's probe)
};
struct CalibrationOptions {
  std::string data = "all";  // a corpus (all, sotu, moby-dick: its train split, never validation or test) or a text file
  int64_t segments = 16;     // copy segments
  int64_t segment_len = 0;   // tokens per segment (the model runs twice as many); 0: min(128, context / 2)
  int64_t lm_windows = 4;    // prose windows for the LM loss (0: the first copies' NLL instead)
  int64_t lm_len = 0;        // tokens per LM window; 0: min(512, context)
  int64_t passkeys = 8;      // passkey trials (0: none; the score's passkey term is then left out)
  int64_t passkey_len = 0;   // tokens per passkey prompt and key; 0: min(256, context)
  int64_t alternatives = 9;  // wrong keys the true one is ranked against in the curve's passkey column
  uint64_t seed = 0;
};
// Builds the set for a causal LM of `context` positions (`context_note`: where a capped context comes from, named
// in the refusals as models::context_words does); sizes that do not fit the context or the text are mimic::Errors
// naming the option.
ProbeCalibration probe_calibration(const text::Tokenizer& tok, int64_t context, const std::string& context_note, const CalibrationOptions& o);

// What the probe measures of a model (its kernels as set) on the calibration set.
struct ProbeMeasure {
  double copy_gain = 0;  // nats/token: first-copy minus second-copy NLL of the segments (eval/copy.h's definition)
  double lm_loss = 0;    // nats/token: the NLL of the LM windows' second halves (positions len/2..len-1, where `eval`'s
                         // default stride scores them); without LM windows, the first copies' NLL
  double key_gain = 0;   // nats: log p(key | prompt) − log p(key | decoy prompt), mean over the trials (0 without)
};
ProbeMeasure probe_measure(models::Model& model, const ProbeCalibration& cal, int64_t batch_size = 8);
// The passkey trials whose true key is more likely than every alternative (the eval's "ranked first").
int64_t probe_passkeys_ranked_first(models::Model& model, const ProbeCalibration& cal);

// ---------------------------------------------------------------------------------------------- the score
// score = copy · g/g_T + passkey · k/k_T − lm · (L − L_T), with g the copy gain, k the key gain, L the LM loss and
// _T the teacher's (every head softmax). The recall terms count in shares of the teacher's, so that copy and
// passkey weigh alike whatever their units; a term whose teacher value is below kProbeFloor is left out (the teacher
// has nothing there to keep, and a share of noise would steer the choice). The LM term is in nats, measured at long
// positions: kept induction heads fed by linear heads can copy confidently from false matches deep in a context
// (measured on gpt2-mini, validation perplexity at positions 256-511: the 8 recall heads kept 815, all-linear 284,
// teacher 188), and one more kept head that shapes their input (1.6) brings it to 234 while the copy gain rises.
// The first copies' positions (< 128) do not show this, so the LM term reads its own long windows.
struct ProbeWeights {
  double copy = 1.0, passkey = 1.0, lm = 1.0;
};
inline constexpr double kProbeFloor = 0.05;
double probe_score(const ProbeMeasure& m, const ProbeMeasure& teacher, const ProbeWeights& w);
// "copy=1,passkey=1,lm=1" (any subset; non-negative numbers); anything else is a mimic::Error.
ProbeWeights parse_probe_weights(const std::string& spec);

// ---------------------------------------------------------------------------------------------- greedy selection
// Measures the model with exactly `kept` restored to softmax (every other candidate head runs its student).
using HeadSetMeasure = std::function<ProbeMeasure(const std::vector<HeadRef>& kept)>;

struct GreedyOptions {
  int64_t count = 0;    // stop at this many heads (auto:K) ...
  double share = 0;     // ... or once the copy gain reaches this share of the teacher's (auto:P%)
  int64_t leaders = 16; // heads of the screen each step re-measures (the pool refills from the screen when spent)
  ProbeWeights weights;
  bool progress = true;
  std::string option = "--keep-softmax";  // the option that asked, for messages
};
struct ScreenRow {
  HeadRef head;
  double restore = 0;  // score(this head alone kept) − score(none kept)
  double ablate = 0;   // score(every head kept) − score(every head but this one kept)
  double value() const { return restore > ablate ? restore : ablate; }
};
struct PlacementStep {
  HeadRef head;
  double score_before = 0, score_after = 0;
  ProbeMeasure measure;      // with the head kept
  // every head the step tried (the pool, in its order) and the score with it kept: a step is audited from these (only
  // its winner was kept: helper-73's probe)
  std::vector<std::pair<HeadRef, double>> candidates;
  int64_t measured = 0;      // candidate sets measured in this step
  double seconds = 0;        // the step's wall time
};
struct GreedyPlacement {
  std::vector<HeadRef> kept;  // in the order chosen
  ProbeMeasure student, teacher;
  double student_score = 0, teacher_score = 0;
  std::vector<ScreenRow> screen;  // by screen value, highest first
  std::vector<PlacementStep> steps;
  int64_t measured = 0;  // sets measured in all (the screen included)
  double seconds = 0;
  bool reached = true;   // the target was met (auto:P% may run out of candidates)
};
// count > 0 or share > 0 (not both); candidates non-empty and distinct. Sets measured once are not measured again.
GreedyPlacement greedy_placement(const HeadSetMeasure& measure, const std::vector<HeadRef>& candidates, const GreedyOptions& o);

// What a user must know before trusting the heads a probe kept, or "": that the teacher showed no recall on the
// probe's text (neither its copy gain nor its passkey key gain reached kProbeFloor, so the heads were ranked by LM
// loss alone), that the heads kept recover less than kLittleRecall of the teacher's copy gain (which it has), and that
// no head moved the score by kIndistinct or more (the heads kept are then arbitrary). A probe on a teacher without
// recall kept heads without a word (helper-68's probe: every score 0.000).
inline constexpr double kIndistinct = 1e-3;
inline constexpr double kLittleRecall = 0.1;
std::string placement_caveat(const GreedyPlacement& g, const GreedyOptions& o);

// The placement's record for mimic.json and --json: rule, weights, calibration, screen, every step, the caveat.
nlohmann::json placement_json(const GreedyPlacement& g, const GreedyOptions& o, const ProbeCalibration& cal);

// ---------------------------------------------------------------------------------------------- on a model
// The kernels of a model's converted layers for a set of heads kept softmax: the layer's student alone, the mixed
// kind (some heads kept; mixed_kernel.h), or the layer's kernel as it was when the placer was made (every head kept).
// Students are built once, so the probe can place hundreds of sets.
class HeadPlacer {
 public:
  // students: one distillable kernel per converted layer (all n_head heads).
  HeadPlacer(models::Model& model, std::map<int64_t, std::shared_ptr<attention::DistillableKernel>> students);
  // Sets every converted layer's kernel; returns the layers that run a student (alone or mixed).
  std::vector<int64_t> place(const std::vector<HeadRef>& kept);
  std::vector<HeadRef> candidates() const;  // every head of the converted layers

 private:
  models::Model& model_;
  int64_t n_head_;
  std::map<int64_t, std::shared_ptr<attention::DistillableKernel>> students_;
  std::map<int64_t, std::shared_ptr<attention::AttentionKernelImpl>> originals_;
};

// The probe on a model: greedy_placement with each set measured by probe_measure after `placer` placed it; then the
// curve's passkey column (the trials ranked first with the first i heads kept, i = 0 .. K, and with every head
// kept). Returns the heads kept and the record (placement_json + that column). The model is left with the kept
// heads placed.
struct ProbeResult {
  std::vector<HeadRef> kept;
  nlohmann::json record;
};
ProbeResult run_probe(models::Model& model, HeadPlacer& placer, const ProbeCalibration& cal, const GreedyOptions& o,
                      int64_t batch_size = 8);

}  // namespace mimic::convert
