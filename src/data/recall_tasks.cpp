#include "mimic/data/recall_tasks.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <regex>
#include <sstream>

#include "mimic/core/error.h"

namespace mimic::data {

namespace {

int64_t parse_int(const std::string& key, const std::string& value, const std::string& spec) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  // decimal digits only (stoll also takes leading blanks and a sign: vocab= 64 and +64 were accepted)
  MIMIC_CHECK(used == value.size() && !value.empty() && value.find_first_not_of("0123456789", value[0] == '-' ? 1 : 0) == std::string::npos,
              "recall task '", spec, "': ", key, " must be a whole number, got '", value, "'");
  return v;
}

// One generator per (seed, split, index): examples do not depend on which others were made before.
std::mt19937_64 example_rng(uint64_t seed, Split split, int64_t index) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(split) + 0x5EC0u,
                    static_cast<uint32_t>(index), static_cast<uint32_t>(static_cast<uint64_t>(index) >> 32)};
  return std::mt19937_64(seq);
}

}  // namespace

bool is_recall_task(const std::string& data) {
  return data == "mqar" || data == "ar" || data.rfind("mqar:", 0) == 0 || data.rfind("ar:", 0) == 0;
}

int64_t lm_seq_len(const std::string& data, bool given, int64_t value) {
  if (!is_recall_task(data)) return value;
  const int64_t task = RecallTaskSpec::parse(data).seq_len;
  MIMIC_CHECK(!given || value == task, "--seq-len ", value, " differs from the task's seq_len ", task, " (", data,
              "): leave --seq-len out, or set the task's seq_len");
  return task;
}

RecallTaskSpec RecallTaskSpec::parse(const std::string& spec) {
  MIMIC_CHECK(is_recall_task(spec), "'", spec, "' is not a recall task (mqar or ar, e.g. mqar:vocab=8192,seq_len=256,pairs=16)");
  RecallTaskSpec s;
  const auto colon = spec.find(':');
  s.kind = spec.substr(0, colon);
  if (s.kind == "ar") {
    s.vocab = 40;
    s.seq_len = 128;
  }
  if (colon != std::string::npos) {
    const std::string rest = spec.substr(colon + 1);
    // getline drops a trailing empty item (mqar:vocab=64, was accepted)
    MIMIC_CHECK(!rest.empty() && rest.back() != ',', "recall task '", spec, "': expected key=value items separated by single commas");
    std::stringstream items(rest);
    std::string item;
    std::set<std::string> given;
    while (std::getline(items, item, ',')) {
      const auto eq = item.find('=');
      MIMIC_CHECK(eq != std::string::npos, "recall task '", spec, "': '", item, "' is not key=value");
      const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
      // as --attention refuses it: which of two values counts is a guess (the probe of 2026-11-27)
      MIMIC_CHECK(given.insert(key).second, "recall task '", spec, "': ", key, " is given twice");
      if (key == "vocab") s.vocab = parse_int(key, value, spec);
      else if (key == "seq_len") s.seq_len = parse_int(key, value, spec);
      else if (key == "pairs" && s.kind == "mqar") s.pairs = parse_int(key, value, spec);
      else if (key == "power_a" && s.kind == "mqar") {
        // decimal notation only, as every real option (stod took 0x1p-1, leading blanks and trailing text)
        static const std::regex decimal(R"(^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$)");
        MIMIC_CHECK(std::regex_match(value, decimal), "recall task '", spec, "': power_a must be a number, got '", value, "'");
        s.power_a = std::stod(value);
      } else {
        fail("recall task '", spec, "': unknown key '", key, "' (", s.kind == "mqar" ? "vocab, seq_len, pairs, power_a" : "vocab, seq_len",
             ")");
      }
    }
  }
  if (s.kind == "ar") s.pairs = (s.seq_len - 1) / 2;
  s.validate();
  return s;
}

void RecallTaskSpec::validate() const {
  MIMIC_CHECK(kind == "mqar" || kind == "ar", "recall task kind must be mqar or ar, got '", kind, "'");
  MIMIC_CHECK(vocab >= 4 && vocab <= 65536, "recall task vocab must be in [4, 65536], got ", vocab);
  MIMIC_CHECK(seq_len >= 4 && seq_len <= (1 << 20), "recall task seq_len must be in [4, 1048576], got ", seq_len);
  MIMIC_CHECK(pairs >= 1, "recall task pairs must be >= 1, got ", pairs);
  const int64_t keys = vocab / 2 - 1;
  if (kind == "mqar") {
    MIMIC_CHECK(power_a > 0 && power_a <= 1, "mqar power_a must be in (0, 1], got ", power_a);
    MIMIC_CHECK(pairs <= keys, "mqar: ", pairs, " pairs need ", pairs, " distinct keys, vocab ", vocab, " has ", keys);
    // the pairs (2P tokens) and P query slots of two tokens each must fit in T + 1 tokens
    MIMIC_CHECK(4 * pairs <= seq_len + 1, "mqar: seq_len ", seq_len, " is too short for ", pairs, " pairs (needs at least ", 4 * pairs - 1,
                ": its ", pairs, " pairs and ", pairs, " queries of 2 tokens each are ", 4 * pairs, " tokens, seq_len + 1 with the last target)");
  } else {
    MIMIC_CHECK(pairs >= 1, "ar: seq_len ", seq_len, " is too short for one pair and a query");
  }
}

void RecallTaskSpec::check_fits(int64_t model_vocab, const std::string& model) const {
  if (vocab <= model_vocab) return;
  const std::string larger = "the task " + to_string() + " has a vocabulary of " + std::to_string(vocab) + " tokens, more than " + model +
                             "'s " + std::to_string(model_vocab);
  // the way out named only where it is a task validate() takes: at least 4 tokens, and an MQAR's keys for its pairs
  MIMIC_CHECK(model_vocab >= 4, larger, ": a recall task needs a vocabulary of at least 4 (filler, keys, values), so none runs on this model");
  const int64_t keys = model_vocab / 2 - 1;
  fail(larger, ": give the task vocab=", model_vocab, " or less (its ids must be the model's)",
       kind == "mqar" && pairs > keys ? ", and pairs=" + std::to_string(keys) + " or fewer (the keys a vocabulary of " + std::to_string(model_vocab) + " holds)"
                                      : std::string());
}

std::string RecallTaskSpec::to_string() const {
  std::ostringstream os;
  os << kind << ":vocab=" << vocab << ",seq_len=" << seq_len;
  if (kind == "mqar") os << ",pairs=" << pairs << ",power_a=" << power_a;
  return os.str();
}

RecallExample make_recall_example(const RecallTaskSpec& s, uint64_t seed, Split split, int64_t index) {
  auto rng = example_rng(seed, split, index);
  const int64_t n = s.seq_len + 1, half = s.vocab / 2;
  const int64_t n_keys = half - 1, n_values = s.vocab - half;
  RecallExample ex;
  ex.tokens.assign(static_cast<size_t>(n), 0);
  auto value_of = [&](int64_t) { return half + static_cast<int64_t>(rng() % static_cast<uint64_t>(n_values)); };
  if (s.kind == "mqar") {
    // P distinct keys (a partial Fisher–Yates over the key range), each with a random value.
    std::vector<int64_t> keys(static_cast<size_t>(n_keys));
    std::iota(keys.begin(), keys.end(), 1);
    for (int64_t i = 0; i < s.pairs; ++i) std::swap(keys[i], keys[i + static_cast<int64_t>(rng() % static_cast<uint64_t>(n_keys - i))]);
    std::vector<int64_t> values(static_cast<size_t>(s.pairs));
    for (int64_t i = 0; i < s.pairs; ++i) {
      values[i] = value_of(keys[i]);
      ex.tokens[2 * i] = keys[i];
      ex.tokens[2 * i + 1] = values[i];
    }
    // Query slots: gaps 1..S after the pairs, drawn without replacement with p(i) ∝ i^(a−1) (Zoology's
    // power law: most queries come soon after the pairs, some far); the keys queried in random order.
    const int64_t slots = (n - 2 * s.pairs) / 2;
    std::vector<double> w(static_cast<size_t>(slots));
    for (int64_t i = 0; i < slots; ++i) w[i] = std::pow(static_cast<double>(i + 1), s.power_a - 1);
    std::vector<int64_t> order(static_cast<size_t>(s.pairs));
    std::iota(order.begin(), order.end(), 0);
    for (int64_t i = s.pairs - 1; i > 0; --i) std::swap(order[i], order[static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1))]);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int64_t q = 0; q < s.pairs; ++q) {
      double total = std::accumulate(w.begin(), w.end(), 0.0), r = u(rng) * total;
      int64_t slot = 0;
      while (slot < slots - 1 && (r -= w[slot]) > 0) ++slot;
      while (w[slot] == 0) slot = (slot + 1) % slots;  // rounding landed on a taken slot: the next free one
      w[slot] = 0;
      const int64_t at = 2 * s.pairs + 2 * slot;
      ex.tokens[at] = keys[order[q]];
      ex.tokens[at + 1] = values[order[q]];
      ex.queries.push_back(at);
    }
    std::sort(ex.queries.begin(), ex.queries.end());
  } else {
    // AR: one value per key for this sequence; m pairs with keys drawn with repetition, then a key that
    // occurred, then its value. Leading filler pads to T + 1 tokens.
    std::vector<int64_t> mapping(static_cast<size_t>(half));
    for (auto& v : mapping) v = value_of(0);
    const int64_t m = s.pairs, lead = n - 2 * m - 2;
    std::vector<int64_t> used;
    for (int64_t i = 0; i < m; ++i) {
      const int64_t k = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(n_keys));
      ex.tokens[lead + 2 * i] = k;
      ex.tokens[lead + 2 * i + 1] = mapping[k];
      used.push_back(k);
    }
    const int64_t q = used[static_cast<size_t>(rng() % used.size())];
    ex.tokens[n - 2] = q;
    ex.tokens[n - 1] = mapping[q];
    ex.queries.push_back(n - 2);
  }
  return ex;
}

LmBatch recall_batch(const RecallTaskSpec& s, uint64_t seed, Split split, int64_t first, int64_t count) {
  MIMIC_CHECK(count >= 1 && first >= 0, "a recall batch needs count >= 1 and first >= 0");
  const int64_t t = s.seq_len;
  auto ids = torch::empty({count, t}, torch::kLong), labels = torch::full({count, t}, -100, torch::kLong);
  auto* in = ids.data_ptr<int64_t>();
  auto* lb = labels.data_ptr<int64_t>();
  for (int64_t b = 0; b < count; ++b) {
    auto ex = make_recall_example(s, seed, split, first + b);
    std::copy(ex.tokens.begin(), ex.tokens.begin() + t, in + b * t);
    for (auto q : ex.queries) lb[b * t + q] = ex.tokens[q + 1];
  }
  return {ids, labels, torch::ones({count, t}, torch::kLong)};
}

}  // namespace mimic::data
