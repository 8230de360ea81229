// A small, fast, seeded random generator for the case library (xoshiro256**, seeded by
// splitmix64). Identical streams on every platform, unlike the std:: distributions.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace msa::cases {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& s : s_) s = splitmix(seed);
  }
  // 64 random bits.
  uint64_t next() {
    const uint64_t r = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n) (n > 0).
  int64_t below(int64_t n) { return static_cast<int64_t>(uniform() * static_cast<double>(n)); }
  // True with probability p.
  bool chance(double p) { return uniform() < p; }
  // Standard normal (Box-Muller; one value per call, the pair's second half cached).
  double normal() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    double u = 0;
    while (u <= 0) u = uniform();
    const double v = uniform();
    const double r = std::sqrt(-2.0 * std::log(u));
    spare_ = r * std::sin(6.283185307179586 * v);
    have_spare_ = true;
    return r * std::cos(6.283185307179586 * v);
  }
  // Fisher-Yates shuffle.
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[static_cast<size_t>(below(static_cast<int64_t>(i)))]);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
  bool have_spare_ = false;
  double spare_ = 0;
};

// Mixes several values into one seed (stable across runs and platforms).
inline uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9e3779b97f4a7c15ULL + b + 0x632be59bd9b4e019ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace msa::cases
