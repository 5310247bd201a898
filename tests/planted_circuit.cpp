#include "planted_circuit.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "mimic/core/error.h"

namespace mimic::test {

namespace {

// Sizes. Every head codes positions and tokens one-hot in its own dimensions, so head_dim >= max(vocab,
// context); d_model = 4 heads × 80.
constexpr int64_t kVocab = 64, kContext = 64, kHeads = 4, kHeadDim = 80, kDim = kHeads * kHeadDim, kLayers = 2;

// The residual stream, in disjoint subspaces (dimensions [begin, begin + size)):
//   A [0, 64)    token identity, +1 at the token: the input token (from wte) and what the induction head copies
//   B [64, 128)  token identity, −1 at the token (from wte only): cancels A's input token in the LM head
//   P [128, 192) position, e_t − 1/C (from wpe)
//   R [192, 256) the previous token's identity, written by the previous-token head (e_x − 1/V, weighted)
//   Z [256, 258) ballast (from wpe): +N, −N, so that the stream's norm, and with it LayerNorm's scale, is
//                constant
// Every code sums to zero, so LayerNorm subtracts nothing (mean 0 at every position, in every layer). Its
// scale: the embedding's squared norm is 2 (token) + 1 − 1/C (position) + 2N² (ballast), which N makes
// exactly d_model: the variance is 1 and LayerNorm (weight 1, bias 0) is the identity at layer 0. The heads
// add at most ≈ 2 to the squared norm of 320 later on, so LayerNorm stays the identity within 0.3%
// in layer 1 and ln_f: the hand-set scales below hold through it.
constexpr int64_t kA = 0, kB = kVocab, kP = 2 * kVocab, kR = 2 * kVocab + kContext, kZ = kR + kVocab;
static_assert(kZ + 2 <= kDim, "the subspaces must fit the residual stream");
static_assert(kVocab <= kHeadDim && kContext <= kHeadDim, "one-hot codes must fit a head");

// GPT-2's Conv1D weights are (in, out): c_attn's columns are [q | k | v], head h at h·head_dim within each;
// c_proj's rows are the heads' output dimensions side by side.
struct LayerWeights {
  at::Tensor c_attn = torch::zeros({kDim, 3 * kDim}), c_proj = torch::zeros({kDim, kDim});
  float& q(int64_t in, int64_t head, int64_t j) { return c_attn.accessor<float, 2>()[in][head * kHeadDim + j]; }
  float& k(int64_t in, int64_t head, int64_t j) { return c_attn.accessor<float, 2>()[in][kDim + head * kHeadDim + j]; }
  float& v(int64_t in, int64_t head, int64_t j) { return c_attn.accessor<float, 2>()[in][2 * kDim + head * kHeadDim + j]; }
  float& o(int64_t head, int64_t j, int64_t out) { return c_proj.accessor<float, 2>()[head * kHeadDim + j][out]; }
};

// A head attending from position t to t − back by position alone: query dimension t − back and key dimension s
// carry the position codes (P), so q_t·k_s·scale = gap at s = t − back and (up to the codes' −1/C terms: gap/C
// more at the last `back` keys) the same at every other key. Rows t < back see no target: they spread uniformly.
void position_head(LayerWeights& w, int64_t head, int64_t back, double gap) {
  const double c = std::sqrt(gap * std::sqrt(static_cast<double>(kHeadDim)));  // c² / sqrt(head_dim) = gap
  for (int64_t t = back; t < kContext; ++t) w.q(kP + t, head, t - back) = static_cast<float>(c);
  for (int64_t s = 0; s < kContext; ++s) w.k(kP + s, head, s) = static_cast<float>(c);
}

// The head's value is the token identity (A), as head_dim dimensions 0..V−1.
void token_values(LayerWeights& w, int64_t head) {
  for (int64_t x = 0; x < kVocab; ++x) w.v(kA + x, head, x) = 1.0f;
}

// Writes value dimension x into subspace `base` as e_x − 1/V (zero sum: LayerNorm's mean stays 0).
void write_tokens(LayerWeights& w, int64_t head, int64_t base, double gain) {
  for (int64_t x = 0; x < kVocab; ++x)
    for (int64_t y = 0; y < kVocab; ++y) w.o(head, x, base + y) = static_cast<float>(gain * ((x == y ? 1.0 : 0.0) - 1.0 / kVocab));
}

}  // namespace

PlantedCircuit planted_circuit_model(const PlantedCircuitOptions& options) {
  MIMIC_CHECK(options.previous_token_gap > 0 && options.induction_gap > 0 && options.decoy_gap > 0 && options.output_gap > 0,
              "planted circuit: the logit gaps must be positive");
  // No dropout anywhere (and eval mode below): the model is a fixed function. The MLPs are zero (they add nothing
  // to the residual stream), and narrow so that they cost no time.
  const nlohmann::json config = {{"model_type", "gpt2"},  {"architectures", {"GPT2LMHeadModel"}},
                                 {"vocab_size", kVocab},  {"n_positions", kContext},
                                 {"n_embd", kDim},        {"n_layer", kLayers},
                                 {"n_head", kHeads},      {"n_inner", 8},
                                 {"resid_pdrop", 0.0},    {"embd_pdrop", 0.0},
                                 {"attn_pdrop", 0.0},     {"layer_norm_epsilon", 1e-5}};
  PlantedCircuit pc;
  {
    // create_model draws its initial weights (all overwritten below) from torch's global generator: give the
    // generator its state back, so that building the fixture changes nothing for the code that runs after it.
    auto gen = at::detail::getDefaultCPUGenerator();
    at::Tensor state;
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      state = gen.get_state();
    }
    pc.model = models::create_model(config.dump(), "");
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  }
  pc.vocab = kVocab;
  pc.context = kContext;
  pc.previous_token_head = {0, 0};
  pc.induction_head = {1, 0};

  std::map<std::string, at::Tensor> values;  // every parameter not set here is zero (biases, MLPs)

  // Embeddings. wte[x] = e^A_x − e^B_x (the tied LM head reads both, see ln_f); wpe[t] = e^P_t − 1/C + ballast.
  auto wte = torch::zeros({kVocab, kDim}), wpe = torch::zeros({kContext, kDim});
  for (int64_t x = 0; x < kVocab; ++x) wte[x][kA + x] = 1.0, wte[x][kB + x] = -1.0;
  const double ballast = std::sqrt((static_cast<double>(kDim) - 2.0 - (1.0 - 1.0 / kContext)) / 2.0);
  for (int64_t t = 0; t < kContext; ++t) {
    wpe[t].narrow(0, kP, kContext).fill_(-1.0 / kContext);
    wpe[t][kP + t] += 1.0;
    wpe[t][kZ] = ballast, wpe[t][kZ + 1] = -ballast;
  }
  values["wte.weight"] = wte;
  values["wpe.weight"] = wpe;

  // The decoys: a fixed offset each, sharp (gap 25: weight ≈ 1 − 64·e⁻²⁵ on the target), their values the token
  // identity as a real head's would be, and their output projection rows zero — what they compute never reaches
  // the residual stream. Layer 1's offset-1 decoy is a previous-token head too (sharper than the real one).
  const std::vector<std::vector<int64_t>> decoy_back = {{0, 2, 3}, {0, 1, 2}};

  LayerWeights l0, l1;
  // Layer 0, head 0: the previous-token head, deliberately soft (gap 4: weight e⁴/(e⁴ + t) on t − 1, from
  // ≈ 0.98 at t = 1 to ≈ 0.46 at t = 63) — enough signal for the induction head, and a high-entropy row that a
  // linear student is not far from in KL. It writes the tokens it reads into R.
  position_head(l0, 0, 1, options.previous_token_gap);
  token_values(l0, 0);
  write_tokens(l0, 0, kR, 1.0);
  // Layer 1, head 0: the induction head. Query = the current token (A), key = the previous token written into R,
  // so q_t·k_s·scale = induction_gap · (the weight the previous-token head of s gave to x_t − 1/V): the keys right
  // after earlier occurrences of x_t win. In the first copy of [A A] no key matches (but for A's own repeats) and
  // the row stays near uniform; in the second copy it points at the token after x_t's first occurrence. The
  // value is that token (A), written back into A, where the LM head reads it.
  const double gamma = options.induction_gap * std::sqrt(static_cast<double>(kHeadDim));
  for (int64_t x = 0; x < kVocab; ++x) l1.q(kA + x, 0, x) = static_cast<float>(gamma), l1.k(kR + x, 0, x) = 1.0f;
  token_values(l1, 0);
  write_tokens(l1, 0, kA, 1.0);
  for (int64_t i = 0; i < 3; ++i) {
    position_head(l0, 1 + i, decoy_back[0][static_cast<size_t>(i)], options.decoy_gap);
    position_head(l1, 1 + i, decoy_back[1][static_cast<size_t>(i)], options.decoy_gap);
    token_values(l0, 1 + i);
    token_values(l1, 1 + i);
    pc.decoys.push_back({0, 1 + i});
  }
  for (int64_t i = 0; i < 3; ++i) pc.decoys.push_back({1, 1 + i});
  int64_t layer = 0;
  for (auto* l : {&l0, &l1}) {
    const std::string p = "h." + std::to_string(layer++) + ".";
    values[p + "attn.c_attn.weight"] = l->c_attn;
    values[p + "attn.c_proj.weight"] = l->c_proj;
    values[p + "ln_1.weight"] = torch::ones({kDim});
    values[p + "ln_2.weight"] = torch::ones({kDim});
  }

  // ln_f: weight +λ on A, −λ on B, 0 elsewhere. The tied head's logit of token y is then
  // λ·(x_A[y] + x_B[y])·1: the input token's own code (+1 in A, −1 in B) cancels, and what the induction head
  // wrote into A (its attention on y, minus a constant) is what remains — λ = output_gap per unit of attention.
  auto ln_f = torch::zeros({kDim});
  ln_f.narrow(0, kA, kVocab).fill_(options.output_gap);
  ln_f.narrow(0, kB, kVocab).fill_(-options.output_gap);
  values["ln_f.weight"] = ln_f;

  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  for (auto& p : pc.model->module().named_parameters()) {
    auto it = values.find(p.key());
    if (it == values.end()) {
      p.value().zero_();
      continue;
    }
    MIMIC_CHECK(p.value().sizes() == it->second.sizes(), "planted circuit: ", p.key(), " has shape ", p.value().sizes(), ", expected ",
                it->second.sizes());
    p.value().copy_(it->second);
    used.insert(p.key());
  }
  for (const auto& [name, t] : values) MIMIC_CHECK(used.count(name), "planted circuit: the network has no parameter ", name);
  pc.model->module().eval();
  return pc;
}

std::vector<std::vector<int64_t>> random_segments(int64_t vocab, int64_t n, int64_t len, uint64_t seed) {
  MIMIC_CHECK(vocab >= 1 && n >= 0 && len >= 0, "random_segments: vocab must be >= 1 and n, len >= 0");
  uint64_t state = seed;
  auto next = [&state] {  // splitmix64
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(n), std::vector<int64_t>(static_cast<size_t>(len)));
  for (auto& seg : out)
    for (auto& id : seg) id = static_cast<int64_t>(next() % static_cast<uint64_t>(vocab));  // bias < 2⁻⁵⁰ for small vocabularies
  return out;
}

}  // namespace mimic::test
