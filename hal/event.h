// hal::Event: a point in a stream's work, recorded by Stream::record; used to time work.
#pragma once

#include "hal/export.h"

namespace msa::hal {

class MSA_API Event {
 public:
  virtual ~Event() = default;
  // Milliseconds between `start` (recorded earlier on the same stream) and this event.
  // Both must have completed (synchronize first). Throws msa::Error otherwise.
  virtual double elapsed_ms(const Event& start) const = 0;
};

}  // namespace msa::hal
