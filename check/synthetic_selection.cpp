#include "check/synthetic_selection.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "check/rng.h"
#include "hal/error.h"

namespace msa::cases {
namespace {

// The correlated selections' anchors of one sequence, advanced in order of position:
// holds a[i] and a[i+1] for the current i.
class AnchorWalk {
 public:
  AnchorWalk(int Hs, int64_t nblk, Rng& rng) : n_(static_cast<size_t>(Hs * nblk)), lo_(n_), hi_(n_), rng_(rng) {
    for (auto& x : lo_) x = rng_.normal();
    step(lo_, hi_);
  }
  // Moves to anchor index i (never backwards).
  void advance_to(int64_t i) {
    for (; at_ < i; ++at_) {
      std::swap(lo_, hi_);
      step(lo_, hi_);
    }
  }
  double score(size_t j, double w) const { return (1.0 - w) * lo_[j] + w * hi_[j]; }

 private:
  void step(const std::vector<double>& from, std::vector<double>& to) {
    const double b = std::sqrt(1.0 - kSelectionDriftRho * kSelectionDriftRho);
    for (size_t j = 0; j < n_; ++j) to[j] = kSelectionDriftRho * from[j] + b * rng_.normal();
  }
  size_t n_;
  std::vector<double> lo_, hi_;
  Rng& rng_;
  int64_t at_ = 0;
};

}  // namespace

SyntheticSelection parse_synthetic_selection(std::string_view name, std::string_view arg) {
  if (name == "random") return SyntheticSelection::random;
  if (name == "correlated") return SyntheticSelection::correlated;
  throw Error("argument '" + std::string(arg) + "': '" + std::string(name) + "' is not random or correlated");
}

const char* synthetic_selection_name(SyntheticSelection kind) {
  return kind == SyntheticSelection::random ? "random" : "correlated";
}

hal::HostTensor synthetic_block_idx(const Batch& batch, int Bs, int Hs, int k, int n_sink, int n_local,
                                    SyntheticSelection kind, uint64_t seed) {
  const int64_t NQ = batch.NQ();
  hal::HostTensor t(hal::DType::i32, {NQ, Hs, k});
  int32_t* out = t.data<int32_t>();
  Rng rng(seed);
  std::unique_ptr<AnchorWalk> walk;
  int prev_seq = -1;
  std::vector<char> forced;
  std::vector<int32_t> rest, row;
  std::vector<double> score;
  for (int64_t n = 0; n < NQ; ++n) {
    const QueryBlock& qb = batch.qblocks[static_cast<size_t>(n)];
    const int64_t nblk = batch.blocks_of(qb.b, Bs);
    const int32_t nvalid = static_cast<int32_t>(qb.p1 / Bs + 1);
    if (kind == SyntheticSelection::correlated && qb.b != prev_seq) walk = std::make_unique<AnchorWalk>(Hs, nblk, rng);
    prev_seq = qb.b;
    if (walk) walk->advance_to(qb.p1 / kSelectionDrift);
    const double w = static_cast<double>(qb.p1 % kSelectionDrift) / static_cast<double>(kSelectionDrift);
    forced.assign(static_cast<size_t>(nvalid), 0);
    int n_forced = 0;
    auto force = [&](int64_t c) {
      if (c >= 0 && c < nvalid && !forced[static_cast<size_t>(c)]) forced[static_cast<size_t>(c)] = 1, ++n_forced;
    };
    if (nvalid > k) {
      for (int64_t c = 0; c < n_sink; ++c) force(c);
      if (n_local > 0)
        for (int64_t c = qb.p0 / Bs - n_local + 1; c <= qb.p1 / Bs; ++c) force(c);
      if (n_forced > k)
        throw Error("synthetic selection: argument 'k': " + std::to_string(k) + " is fewer than the " +
                    std::to_string(n_forced) + " forced blocks (n_sink " + std::to_string(n_sink) + ", n_local " +
                    std::to_string(n_local) + ")");
    }
    score.resize(static_cast<size_t>(nvalid));
    for (int h = 0; h < Hs; ++h) {
      int32_t* dst = out + (n * Hs + h) * k;
      row.clear();
      if (nvalid <= k) {
        for (int32_t c = 0; c < nvalid; ++c) row.push_back(c);
      } else {
        rest.clear();
        for (int32_t c = 0; c < nvalid; ++c) {
          if (forced[static_cast<size_t>(c)]) {
            row.push_back(c);
            continue;
          }
          score[static_cast<size_t>(c)] = walk ? walk->score(static_cast<size_t>(h * nblk + c), w) : rng.uniform();
          rest.push_back(c);
        }
        const size_t want = static_cast<size_t>(k - n_forced);
        auto higher = [&](int32_t a, int32_t b) {
          const double sa = score[static_cast<size_t>(a)], sb = score[static_cast<size_t>(b)];
          return sa > sb || (sa == sb && a < b);
        };
        if (want < rest.size())
          std::nth_element(rest.begin(), rest.begin() + static_cast<int64_t>(want), rest.end(), higher);
        row.insert(row.end(), rest.begin(), rest.begin() + static_cast<int64_t>(std::min(want, rest.size())));
        std::sort(row.begin(), row.end());
      }
      int j = 0;
      for (int32_t c : row) dst[j++] = c;
      for (; j < k; ++j) dst[j] = -1;
    }
  }
  return t;
}

double adjacent_overlap(const Batch& batch, const hal::HostTensor& block_idx, int64_t sample) {
  const int64_t NQ = block_idx.shape[0], Hs = block_idx.shape[1], k = block_idx.shape[2];
  const int32_t* bi = block_idx.data<int32_t>();
  double shared = 0, total = 0;
  int64_t pairs = 0;
  for (int64_t n = NQ - 2; n >= 0 && pairs < sample; --n) {
    if (batch.qblocks[static_cast<size_t>(n)].b != batch.qblocks[static_cast<size_t>(n + 1)].b) continue;
    ++pairs;
    for (int64_t h = 0; h < Hs; ++h) {
      const int32_t* a = bi + (n * Hs + h) * k;
      const int32_t* b = bi + ((n + 1) * Hs + h) * k;
      for (int64_t i = 0; i < k; ++i) {
        if (a[i] < 0) continue;
        total += 1;
        shared += std::find(b, b + k, a[i]) != b + k ? 1 : 0;
      }
    }
  }
  return total > 0 ? shared / total : 0.0;
}

}  // namespace msa::cases
