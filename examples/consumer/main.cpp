// Opens the reference device through msa, runs block_topk on a tiny hand-made problem and
// checks the selection and the library's version.
#include <msa/msa.h>

#include <cstdio>
#include <cstring>

int main() {
  std::printf("msa_consumer: msa %s\n", msa::version());
  if (std::strcmp(msa::version(), MSA_CONSUMER_EXPECTED_VERSION) != 0) {
    std::printf("msa_consumer: CMake found msa %s\n", MSA_CONSUMER_EXPECTED_VERSION);
    return 1;
  }
  auto dev = msa::hal::create_device("cpu-ref");
  // One sequence, 4 blocks of 64 tokens, one decode query at position 255, k = 2.
  msa::hal::HostTensor score(msa::hal::DType::f32, {1, 1, 4});
  const float s[4] = {0.5f, 3.0f, 1.0f, -2.0f};
  for (int i = 0; i < 4; ++i) score.set(i, s[i]);
  msa::hal::HostTensor kv_len(msa::hal::DType::i32, {1}), cu_q(msa::hal::DType::i32, {2});
  kv_len.data<int32_t>()[0] = 256;
  cu_q.data<int32_t>()[1] = 1;
  auto d_score = msa::hal::to_device(*dev, score), d_len = msa::hal::to_device(*dev, kv_len),
       d_cu = msa::hal::to_device(*dev, cu_q);
  auto idx = dev->alloc_tensor(msa::hal::DType::i32, {1, 1, 2});
  auto cnt = dev->alloc_tensor(msa::hal::DType::i32, {1, 1});
  msa::ops::BlockTopkArgs a;
  a.block_score = d_score.tensor, a.kv_len = d_len.tensor, a.cu_q = d_cu.tensor;
  a.Qb = 1, a.NQ = 1, a.Bs = 64, a.k = 2, a.n_sink = 0, a.n_local = 1;
  a.block_idx = idx.tensor, a.block_cnt = cnt.tensor;
  msa::ops::block_topk(*dev, a);
  auto out = msa::hal::to_host(*dev, idx.tensor);
  // Forced local block 3, then the best-scoring block 1: ascending {1, 3}.
  const int32_t* r = out.data<int32_t>();
  std::printf("msa_consumer: selected blocks %d %d\n", r[0], r[1]);
  return r[0] == 1 && r[1] == 3 ? 0 : 1;
}
