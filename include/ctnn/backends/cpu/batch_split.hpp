// ctnn/backends/cpu/batch_split.hpp — run a per-sample kernel over the thread pool.
//
// for_samples(batch, per_sample, f) calls f(n0, n1) over contiguous ranges of
// samples that cover [0, batch): one range per thread of thread_pool::global()
// when batch * per_sample (the values the kernel touches) reaches
// sample_split_min and there are two samples and two threads, else f(0, batch)
// on the calling thread. A kernel whose every output belongs to one sample
// (im2col, col2im, pooling, a direct convolution's forward) gives the same
// bits whatever the thread count. Used by conv.hpp and pooling.hpp.
//
// for_row_blocks(rows, min_rows, f) calls f(r0, m) over contiguous blocks [r0, r0 + m) that
// cover [0, rows): one block per thread (at most rows / min_rows blocks, each of at least min_rows
// rows, the starts on multiples of 8 rows, a GEMM micro-tile's) when there are two threads and
// rows >= 2 min_rows, else f(0, rows) on the calling thread. Each f runs on one thread from start
// to end, so the ops it calls run serially there (a run() inside a task is serial): a recurrent
// layer's time loop over its rows of the batch, all steps within one task and no barrier per step.
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

template <class F>
void for_row_blocks(std::size_t rows, std::size_t min_rows, F&& f) {
  thread_pool& pool = thread_pool::global();
  const std::size_t blocks = min_rows == 0 ? 1 : std::min(pool.size(), rows / min_rows);
  if (blocks <= 1) {
    f(std::size_t(0), rows);
    return;
  }
  // block c starts at row 8 floor(c floor(rows / 8) / blocks): every block but the last a multiple
  // of 8 rows and at least floor(floor(rows / 8) / blocks) 8 >= min_rows when min_rows is (rows >=
  // blocks min_rows); the last the rest
  const std::size_t eights = rows / 8;
  auto start = [&](std::size_t c) { return c == blocks ? rows : c * eights / blocks * 8; };
  if (min_rows % 8 != 0 || eights < blocks) {  // plain split: rows * c / blocks
    pool.run(blocks, [&](std::size_t c) { f(rows * c / blocks, rows * (c + 1) / blocks - rows * c / blocks); });
    return;
  }
  pool.run(blocks, [&](std::size_t c) { f(start(c), start(c + 1) - start(c)); });
}

}  // namespace ctnn::kernels::cpu
