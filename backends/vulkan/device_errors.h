// Device-side validation flags. Kernels that read index data (page ids, lengths, block
// indices, token ids) skip a bad entry and atomicOr one of these bits into the error
// word of their op (binding 0, word = OpId). Stream::synchronize() turns the words into
// msa::Error. Mirrored in shaders/common.glsl (ERR_*): keep both in sync.
#pragma once
#include <cstdint>
#include <string>

namespace msa::vulkan {

enum DeviceErrorBit : uint32_t {
  kErrCuQ = 1u << 0,           // cu_q: cu_q[0] != 0, decreasing, or cu_q[B] != T
  kErrKvLen = 1u << 1,         // kv_len: < q_len or > max_blocks * Bs
  kErrBlockTable = 1u << 2,    // block_table: page id outside [0, P)
  kErrNQ = 1u << 3,            // NQ: differs from the query blocks of cu_q / kv_len / Qb
  kErrK = 1u << 4,             // k: more forced blocks than k
  kErrIds = 1u << 5,           // ids: token id outside the table
  kErrItems = 1u << 6,         // items: a grid size < 1, or sizes not summing to N
  kErrPlaceholders = 1u << 7,  // vis: placeholder count differs from its rows
  kErrLoops = 1u << 8,         // the driver ended a shader's loops early (lavapipe's loop limit)
};

// "argument 'block_table': page id outside [0, P)"; one clause per set bit.
std::string describe_device_errors(uint32_t bits);

}  // namespace msa::vulkan
