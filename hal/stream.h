// hal::Stream: an in-order queue of work on one device. Ops run in call order. Host data
// enters and leaves only through upload / download. Nothing here is thread-safe: one
// thread drives one stream.
#pragma once
#include <cstddef>
#include <cstdint>

#include "hal/event.h"
#include "hal/export.h"
#include "hal/tensor.h"

namespace msa::hal {

class MSA_API Stream {
 public:
  virtual ~Stream() = default;
  // Copies dst.nbytes() bytes from host memory `src` into dst. Synchronous with respect
  // to `src`: the host buffer may be reused when this returns.
  virtual void upload(const Tensor& dst, const void* src) = 0;
  // Copies src.nbytes() bytes into host memory `dst`; waits for prior work and for the copy.
  virtual void download(void* dst, const Tensor& src) = 0;
  // Device-to-device copy of src into dst. Equal byte sizes, and no shared bytes unless dst
  // is src (then nothing happens); throws otherwise (see check_copy in hal/tensor.h).
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;
  // Fills every byte of dst with `byte` (0xFF gives NaN for floats, -1 for i32).
  virtual void fill_bytes(const Tensor& dst, uint8_t byte) = 0;
  // Records `event` at the current point of the queue.
  virtual void record(Event& event) = 0;
  // Blocks until all queued work is done; raises any device-side validation error
  // (invalid page id, block index, length) flagged since the last call as msa::Error.
  virtual void synchronize() = 0;
};

}  // namespace msa::hal
