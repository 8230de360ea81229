// What the case-set builders share (check/case_sets.cpp, nonfinite_sets.cpp,
// training_sets.cpp): the dtypes, batch shapes and parameter helpers of the sets, and the
// functional variations the forward and backward sets both take.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "check/attention_cases.h"
#include "check/case.h"
#include "check/support_cases.h"
#include "check/training_cases.h"

namespace msa::cases::sets {

using hal::DType;
using ops::KlStage;
using ops::Pool;
using ops::SelectionMode;

constexpr DType kF32 = DType::f32, kBF16 = DType::bf16, kF16 = DType::f16, kFP8 = DType::fp8_e4m3,
                kFP4 = DType::fp4_e2m1x2;  // NVFP4 indexer keys (with their e4m3 group scales)
constexpr DType kActs[] = {kF32, kBF16, kF16};

struct Lens {
  std::vector<int32_t> q, kv;
};

inline AttnParams attn(Lens l, int Hq, int Hkv, int D, int Bs, int Qb, int k, DType t,
                       SelectionMode mode = SelectionMode::per_kv_head) {
  AttnParams p;
  p.q_len = std::move(l.q);
  p.kv_len = std::move(l.kv);
  p.Hq = Hq;
  p.Hkv = Hkv;
  p.D = D;
  p.Bs = Bs;
  p.Qb = Qb;
  p.k = k;
  p.dtype = t;
  p.mode = mode;
  return p;
}

inline RowParams rows(int64_t M, int64_t N, DType t, bool flag = false) {
  RowParams p;
  p.M = M;
  p.N = N;
  p.dtype = t;
  p.flag = flag;
  return p;
}

// Batches of the functional sets (Bs = 64 unless noted).
inline const Lens kDecode{{1}, {300}};
inline const Lens kDecodeVarlen{{1, 1, 1}, {64, 17, 200}};  // a full block, shorter than a block, ragged
inline const Lens kPrefix{{40}, {170}};                     // prefill on a cached prefix
inline const Lens kMixed{{5, 0, 30}, {5, 90, 100}};         // from empty, q_len = 0, prefix
inline const Lens kEmpty{{}, {}};                           // B = 0
inline const Lens kShort{{3}, {10}};                        // one partial block
inline const Lens kEmptySeq{{2, 0, 1}, {2, 0, 70}};         // a sequence with nothing cached

// ViT items of 1 to 9 temporal patches.
inline const std::vector<std::array<int32_t, 3>> kVitItems = {{1, 2, 2}, {2, 1, 3}, {3, 2, 2}, {4, 2, 1}, {5, 2, 2},
                                                              {6, 1, 2}, {7, 2, 2}, {8, 1, 1}, {9, 2, 2}};

using AttnMaker = std::unique_ptr<Case> (*)(const AttnParams&);

// The functional variations of sparse / dense / patch attention, made by `make` (the
// forward or its backward).
void add_sparse_variations(CaseList& c, AttnMaker make);
void add_dense_variations(CaseList& c, AttnMaker make);
void add_patch_variations(CaseList& c, std::unique_ptr<Case> (*make)(const VitParams&));

// NaN / Inf in attended data (docs/spec.md, "Non-finite inputs"): the quick set's cases
// and the full set's on the GPU kernels' tuned shapes (nonfinite_sets.cpp).
void add_nonfinite(CaseList& c);
void add_nonfinite_tuned(CaseList& c);

// The training ops' cases (training_sets.cpp).
void add_quick_training(CaseList& c);
void add_full_training(CaseList& c);
void add_perf_training(CaseList& c, double scale, const VitParams& vit);

}  // namespace msa::cases::sets
