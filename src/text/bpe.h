// The byte-pair-encoding core the BPE tokenizers share (GPT-2's vocab.json + merges.txt, and HF
// tokenizer.json's BPE model): a merge table applied by rank, and a bounded cache of pieces already
// encoded. What the initial symbols of a piece are (bytes, characters, byte-fallback tokens) is the
// tokenizer's business; this only merges them.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace mimic::text {

class BpeMerges {
 public:
  // Adds the merge (left, right) → merged with the next rank. A pair added twice keeps its last rank, as
  // both encoder.py's dict and HF's map do.
  void add(int32_t left, int32_t right, int32_t merged);
  size_t size() const { return static_cast<size_t>(next_rank_); }
  // Merges the symbols of `word` in place: apply_by_scan for short words, apply_by_heap for long ones (a
  // SentencePiece-style tokenizer without a pre-tokenizer hands a whole document over as one word).
  void apply(std::vector<int32_t>& word) const;
  // encoder.py's loop, the reference: find the adjacent pair of lowest rank, merge all its occurrences
  // left to right, repeat until no adjacent pair has a rank. O(n²) in the word's length.
  void apply_by_scan(std::vector<int32_t>& word) const;
  // HF tokenizers' form: a heap of candidate pairs by (rank, position); each pop merges one occurrence
  // and offers the pairs it forms with its neighbours. O(n log n). The same result as the scan whenever a
  // merge never forms a pair of lower rank than its own — true of every merge list BPE training writes
  // (a token is merged only after the merges that made its parts); the tests compare both on real lists.
  void apply_by_heap(std::vector<int32_t>& word) const;

 private:
  struct Merge {
    int32_t rank;    // order of addition: lower merges first
    int32_t merged;  // id of the concatenated token
  };
  static uint64_t key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t next_rank_ = 0;
};

// Pieces repeat a lot in text: their ids are remembered (bounded: emptied when it grows past a limit;
// guarded for concurrent encode calls).
class PieceCache {
 public:
  // Appends the cached ids of `piece` to out and returns true, or returns false.
  bool get(const std::string& piece, std::vector<int64_t>& out) const;
  void put(const std::string& piece, const std::vector<int32_t>& ids) const;

 private:
  mutable std::unordered_map<std::string, std::vector<int32_t>> map_;
  mutable std::mutex mutex_;
};

}  // namespace mimic::text
