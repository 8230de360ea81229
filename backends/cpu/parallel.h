// The backend's oneTBB arena and a deterministic parallel loop over independent tasks.
// Every kernel splits its work into tasks at boundaries that depend only on the shapes
// (never on the thread count) and each task writes its own outputs, so results are
// bitwise identical for any number of threads.
#pragma once
#include <cstdint>
#include <functional>

namespace msa::cpu {

// Runs fn(i) for i in [0, n) on the backend's arena; returns when all are done.
// Exceptions thrown by fn propagate (the first one wins). `grain` is the number of
// consecutive tasks one worker takes at a time.
void parallel_for(int64_t n, const std::function<void(int64_t)>& fn, int64_t grain = 1);

}  // namespace msa::cpu
