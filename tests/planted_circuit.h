// A hand-built GPT-2 with a planted two-head induction circuit and sharp decoy heads: the fixture for
// "placement by measured effect". Per-head KL placement (keep softmax where a head's linear student is furthest
// from it) looks at each head alone and cannot see a circuit — an induction head copies from where a
// previous-token head of an earlier layer points — and it prefers sharp heads. This model's sharpest heads are
// decoys whose output projection is zero, and its circuit heads are softer: keeping the heads of highest KL
// keeps decoys, while restoring heads and measuring the copy gain (eval::copy_eval) finds the circuit.
//
// The construction (weights set by hand, see planted_circuit.cpp): 2 layers × 4 heads, vocabulary 64, context
// 64 (segments of up to 32 tokens run as [A A]).
//   layer 0, head 0: previous-token head (attends to t − 1, writes the previous token's identity);
//   layer 1, head 0: induction head (attends to the key whose previous token is the current token, copies the
//                    token there into the logits);
//   heads 1–3 of both layers: decoys attending to a fixed offset (self, 1, 2 or 3 back) with a logit gap of 25,
//                    their values read and their output projection rows zero.
// Measured (tests/test_planted_circuit.cpp): copy gain ≈ 3.5 nats/token with softmax everywhere, ≈ 10% of it
// left with the previous-token head and ≈ 6% with the induction head run by an untrained elu student, all of it
// with every decoy so run; the elu student's KL ≈ 1.4 (previous-token), 1.7 (induction), ≥ 2.9 (decoys).
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "mimic/models/model.h"

namespace mimic::test {

using HeadId = std::pair<int64_t, int64_t>;  // (layer, head)

// The knobs of the construction, as logit gaps (nats, after GPT-2's 1/sqrt(head_dim) scale): the defaults are
// the model the tests measure. Sharper circuit heads raise the copy gain a little and their KL to a linear
// student a lot: from a previous-token gap of ≈ 7 (KL ≈ 2.9) that head's KL reaches the decoys'.
struct PlantedCircuitOptions {
  double previous_token_gap = 4.0;  // logit of key t − 1 over the other keys in the previous-token head
  double induction_gap = 8.0;       // logit of a key whose previous token matches, per unit of previous-token weight
  double decoy_gap = 25.0;          // logit of a decoy's target key over the others
  double output_gap = 6.0;          // LM logit of a token per unit of induction attention on it
};

struct PlantedCircuit {
  std::unique_ptr<models::Model> model;  // GPT-2 (causal LM head, tied to wte), every layer softmax, eval mode
  int64_t vocab = 0, context = 0;
  HeadId previous_token_head;            // (0, 0)
  HeadId induction_head;                 // (1, 0)
  std::vector<HeadId> decoys;            // sharp attention, no effect on the output
};

PlantedCircuit planted_circuit_model(const PlantedCircuitOptions& options = {});

// n segments of len token ids, each uniform in [0, vocab) (splitmix64 from `seed`: the same ids on every
// platform), for copy tests.
std::vector<std::vector<int64_t>> random_segments(int64_t vocab, int64_t n, int64_t len, uint64_t seed);

}  // namespace mimic::test
