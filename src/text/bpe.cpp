#include "mimic/text/bpe.h"

#include <queue>

namespace mimic::text {

namespace {
constexpr size_t kMaxCachedPieces = 100000;  // the cache is emptied when it grows past this
constexpr size_t kMaxCachedBytes = 256;      // longer pieces (whole documents) are not worth remembering
constexpr size_t kScanUpTo = 64;             // words up to this many symbols merge by scan
}

void BpeMerges::apply(std::vector<int32_t>& word) const {
  if (word.size() <= kScanUpTo) apply_by_scan(word);
  else apply_by_heap(word);
}

void BpeMerges::apply_by_heap(std::vector<int32_t>& word) const {
  const size_t n = word.size();
  constexpr size_t kNone = static_cast<size_t>(-1);
  std::vector<size_t> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = i == 0 ? kNone : i - 1;
    next[i] = i + 1 == n ? kNone : i + 1;
  }
  struct Candidate {
    int32_t rank;
    size_t pos;  // the left symbol's slot
    int32_t left, right;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto offer = [&](size_t i) {
    if (i == kNone || next[i] == kNone) return;
    auto it = merges_.find(key(word[i], word[next[i]]));
    if (it != merges_.end()) heap.push({it->second.rank, i, word[i], word[next[i]]});
  };
  for (size_t i = 0; i + 1 < n; ++i) offer(i);
  constexpr int32_t kGone = -1;
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const size_t j = next[c.pos];
    // stale: the left symbol was merged away or changed, or its right neighbour is another symbol now
    if (word[c.pos] != c.left || j == kNone || word[j] != c.right) continue;
    word[c.pos] = merges_.at(key(c.left, c.right)).merged;
    word[j] = kGone;
    next[c.pos] = next[j];
    if (next[j] != kNone) prev[next[j]] = c.pos;
    offer(prev[c.pos]);
    offer(c.pos);
  }
  size_t out = 0;
  for (size_t i = 0; i < n; ++i)
    if (word[i] != kGone) word[out++] = word[i];
  word.resize(out);
}

void BpeMerges::add(int32_t left, int32_t right, int32_t merged) { merges_[key(left, right)] = Merge{next_rank_++, merged}; }

void BpeMerges::apply_by_scan(std::vector<int32_t>& word) const {
  while (word.size() > 1) {
    const Merge* best = nullptr;
    size_t at = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = merges_.find(key(word[i], word[i + 1]));
      if (it != merges_.end() && (!best || it->second.rank < best->rank)) {
        best = &it->second;
        at = i;
      }
    }
    if (!best) break;
    const int32_t left = word[at], right = word[at + 1];
    size_t out = 0;
    for (size_t i = 0; i < word.size(); ++out) {
      if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
        word[out] = best->merged;
        i += 2;
      } else {
        word[out] = word[i++];
      }
    }
    word.resize(out);
  }
}

bool PieceCache::get(const std::string& piece, std::vector<int64_t>& out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = map_.find(piece);
  if (it == map_.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void PieceCache::put(const std::string& piece, const std::vector<int32_t>& ids) const {
  if (piece.size() > kMaxCachedBytes) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (map_.size() >= kMaxCachedPieces) map_.clear();
  map_.emplace(piece, ids);
}

}  // namespace mimic::text
