// ctnn/backends/cpu/batch_split.hpp — run a per-sample kernel over the thread pool.
//
// for_samples(batch, per_sample, f) calls f(n0, n1) over contiguous ranges of
// samples that cover [0, batch): one range per thread of thread_pool::global()
// when batch * per_sample (the values the kernel touches) reaches
// sample_split_min and there are two samples and two threads, else f(0, batch)
// on the calling thread. A kernel whose every output belongs to one sample
// (im2col, col2im, pooling, a direct convolution's forward) gives the same
// bits whatever the thread count. Used by conv.hpp and pooling.hpp.
#pragma once
#include <algorithm>
#include <cstddef>

#include "thread_pool.hpp"

namespace ctnn::kernels::cpu {

inline constexpr std::size_t sample_split_min = std::size_t(1) << 14;

template <class F>
void for_samples(std::size_t batch, std::size_t per_sample, F&& f) {
  thread_pool& pool = thread_pool::global();
  const std::size_t tasks = batch * per_sample < sample_split_min ? 1 : std::min(batch, pool.size());
  if (tasks <= 1) {
    f(std::size_t(0), batch);
    return;
  }
  pool.run(tasks, [&](std::size_t t) { f(batch * t / tasks, batch * (t + 1) / tasks); });
}

}  // namespace ctnn::kernels::cpu
