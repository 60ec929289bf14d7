#include "tokenizer/bpe_model.h"

#include <algorithm>

#include "core/check.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace nanovllm {

namespace {
// Up to this many symbols, rescanning the pair ranks beats a priority queue.
constexpr std::size_t kSmallWord = 48;
}  // namespace

BpeModel::BpeModel(std::vector<std::pair<std::string, int>> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   BpeOptions options)
    : options_(std::move(options)) {
  int max_id = -1;
  for (const auto& [token, id] : vocab) {
    if (id < 0) throw Error(fmt::format("vocab: token '{}' has negative id {}", token, id));
    max_id = std::max(max_id, id);
  }
  tokens_.resize(static_cast<std::size_t>(max_id + 1));
  vocab_.reserve(vocab.size());
  for (auto& [token, id] : vocab) {
    if (tokens_[id]) {
      throw Error(
          fmt::format("vocab: id {} is used by both '{}' and '{}'", id, *tokens_[id], token));
    }
    tokens_[id] = token;
    vocab_.emplace(std::move(token), id);
  }

  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    // Named references, not a structured binding: clang before 16 cannot capture one.
    const std::string& left = merges[rank].first;
    const std::string& right = merges[rank].second;
    const auto id_of = [&](const std::string& token) {
      const auto it = vocab_.find(token);
      if (it == vocab_.end()) {
        throw Error(fmt::format("merges[{}] ('{}' '{}'): token '{}' is not in the vocabulary", rank,
                                left, right, token));
      }
      return it->second;
    };
    const int a = id_of(left), b = id_of(right);
    const int merged = id_of(left + right);
    merges_.insert(a, b, Merge{static_cast<int32_t>(rank), merged});
  }

  if (options_.unk_token) {
    const auto it = vocab_.find(*options_.unk_token);
    if (it == vocab_.end()) {
      throw Error(fmt::format("unk_token '{}' is not in the vocabulary", *options_.unk_token));
    }
    unk_id_ = it->second;
  }

  if (options_.byte_level) {
    const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
    for (int b = 0; b < 256; ++b) {
      const auto it = vocab_.find(alphabet.encode_byte(static_cast<unsigned char>(b)));
      byte_symbol_[b] = it == vocab_.end() ? -1 : it->second;
    }
    if (options_.ignore_merges) {
      for (const auto& [token, id] : vocab_) {
        if (auto bytes = alphabet.decode(token)) whole_words_.emplace(std::move(*bytes), id);
      }
    }
  }
}

std::optional<int> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int id) const {
  if (id < 0 || id >= id_limit() || !tokens_[id]) return nullptr;
  return &*tokens_[id];
}

WordCache& BpeModel::thread_cache() const {
  const std::lock_guard lock(caches_mutex_);
  std::unique_ptr<WordCache>& cache = caches_[std::this_thread::get_id()];
  if (!cache) cache = std::make_unique<WordCache>();
  return *cache;
}

void BpeModel::encode_word(std::string_view word, WordCache& cache, std::vector<int>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    const TokenMap& whole = options_.byte_level ? whole_words_ : vocab_;
    const auto it = whole.find(word);
    if (it != whole.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const uint64_t hash = WordCache::hash(word);
  if (cache.lookup(word, hash, out)) return;

  thread_local std::vector<int> symbols;
  initial_symbols(word, symbols);
  merge(symbols);
  cache.insert(word, hash, symbols.data(), symbols.size());
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int>& symbols) const {
  symbols.clear();
  // A symbol missing from the vocabulary becomes unk (fused with a preceding unk if asked),
  // or is dropped when there is no unk token, as Hugging Face does.
  bool pending_unk = false;
  const auto add = [&](int id) {
    if (id >= 0) {
      if (pending_unk) symbols.push_back(*unk_id_);
      pending_unk = false;
      symbols.push_back(id);
    } else if (unk_id_) {
      if (pending_unk && !options_.fuse_unk) symbols.push_back(*unk_id_);
      pending_unk = true;
    }
  };
  if (options_.byte_level) {
    for (const char c : word) add(byte_symbol_[static_cast<unsigned char>(c)]);
  } else {
    std::size_t i = 0;
    while (i < word.size()) {
      const int len = utf8::sequence_length(static_cast<unsigned char>(word[i]));
      const auto it = vocab_.find(word.substr(i, len));
      add(it == vocab_.end() ? -1 : it->second);
      i += len;
    }
  }
  if (pending_unk) symbols.push_back(*unk_id_);
}

void BpeModel::merge(std::vector<int>& symbols) const {
  if (symbols.size() < 2) return;
  if (symbols.size() <= kSmallWord) {
    merge_small(symbols);
  } else {
    merge_large(symbols);
  }
}

void BpeModel::merge_small(std::vector<int>& symbols) const {
  constexpr int32_t kNone = INT32_MAX;
  // ranks[i]: rank of the pair (symbols[i], symbols[i + 1]), kNone if it does not merge.
  std::array<int32_t, kSmallWord> ranks;
  std::array<int32_t, kSmallWord> merged;
  std::size_t n = symbols.size();
  const auto rank_at = [&](std::size_t i) {
    const Merge* m = merges_.find(symbols[i], symbols[i + 1]);
    ranks[i] = m ? m->rank : kNone;
    merged[i] = m ? m->merged : -1;
  };
  for (std::size_t i = 0; i + 1 < n; ++i) merges_.prefetch(symbols[i], symbols[i + 1]);
  for (std::size_t i = 0; i + 1 < n; ++i) rank_at(i);
  while (n > 1) {
    std::size_t best = 0;
    for (std::size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNone) break;
    symbols[best] = merged[best];
    // Drop symbol best + 1 and the pair that started at it.
    for (std::size_t i = best + 1; i + 1 < n; ++i) symbols[i] = symbols[i + 1];
    for (std::size_t i = best + 1; i + 2 < n; ++i) {
      ranks[i] = ranks[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best + 1 < n) rank_at(best);
    if (best > 0) rank_at(best - 1);
  }
  symbols.resize(n);
}

void BpeModel::merge_large(std::vector<int>& symbols) const {
  // A linked list over the symbols and a min-heap of candidate pairs ordered by (rank,
  // position); entries whose pair has changed since they were queued are skipped. The
  // buffers are per thread so that long words do not allocate.
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t merged;
    int32_t left, right;  // the pair when queued
    // std::push_heap builds a max-heap; invert the order to pop the lowest (rank, pos).
    bool operator<(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  thread_local std::vector<int32_t> prev, next;
  thread_local std::vector<Candidate> heap;
  const auto n = static_cast<int32_t>(symbols.size());
  prev.resize(n);
  next.resize(n);
  heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  constexpr int kDead = -1;  // symbols[i] of a symbol merged into its left neighbour
  const auto push = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    if (const Merge* m = merges_.find(symbols[pos], symbols[next[pos]])) {
      heap.push_back({m->rank, pos, m->merged, symbols[pos], symbols[next[pos]]});
      std::push_heap(heap.begin(), heap.end());
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) merges_.prefetch(symbols[i], symbols[i + 1]);
  for (int32_t i = 0; i + 1 < n; ++i) {
    if (const Merge* m = merges_.find(symbols[i], symbols[i + 1])) {
      heap.push_back({m->rank, i, m->merged, symbols[i], symbols[i + 1]});
    }
  }
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Candidate top = heap.back();
    heap.pop_back();
    // A stale entry: its pair changed since it was queued. (Hugging Face compares the merged
    // id instead; the two agree because a changed pair always spans more text.)
    const int32_t right = next[top.pos];
    if (right < 0 || symbols[top.pos] != top.left || symbols[right] != top.right) continue;
    symbols[top.pos] = top.merged;
    symbols[right] = kDead;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    push(prev[top.pos]);
    push(top.pos);
  }
  symbols.erase(std::remove(symbols.begin(), symbols.end(), kDead), symbols.end());
}

}  // namespace nanovllm
