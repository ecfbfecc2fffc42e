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
//
// for_fixed_chunks(rows, chunk, per_row, f) calls f(k, r0, r1) for the chunks k = [k chunk, (k + 1)
// chunk) of [0, rows) (the last one shorter), over the pool when rows * per_row reaches sample_split_min
// and there are two chunks, else in order on the calling thread: the chunks do not depend on the thread
// count, so a sum kept per chunk and the chunks then added in order (sum_chunks) has the same bits on any
// number of threads. sum_chunks(parts, count, stride, out, n): out[i] = parts[i] + parts[stride + i] + ...
// (the count parts in order), i in [0, n), blocks of i over the pool: each value's additions in part
// order whatever the thread count (a serial loop's bits). Used by normalization.hpp, conv.hpp, winograd.hpp.
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

template <class F>
void for_fixed_chunks(std::size_t rows, std::size_t chunk, std::size_t per_row, F&& f) {
  const std::size_t chunks = chunk == 0 ? 0 : (rows + chunk - 1) / chunk;
  thread_pool::global().run(
      chunks, [&](std::size_t k) { f(k, k * chunk, std::min(rows, (k + 1) * chunk)); },
      chunks > 1 && rows * per_row >= sample_split_min);
}

inline constexpr std::size_t sum_chunks_block = 2048;  // values of out a task (8 KiB of float: L1)
template <class T>
void sum_chunks(const T* parts, std::size_t count, std::size_t stride, T* out, std::size_t n) {
  if (count == 0) return;
  const std::size_t blocks = (n + sum_chunks_block - 1) / sum_chunks_block;
  thread_pool::global().run(
      blocks,
      [&](std::size_t b) {
        const std::size_t i0 = b * sum_chunks_block, i1 = std::min(n, i0 + sum_chunks_block);
        T* const o = out + i0;
        std::copy(parts + i0, parts + i1, o);
        for (std::size_t k = 1; k < count; ++k) {
          const T* const p = parts + k * stride + i0;
          for (std::size_t i = 0; i < i1 - i0; ++i) o[i] += p[i];
        }
      },
      blocks > 1 && n * count >= sample_split_min);
}

}  // namespace ctnn::kernels::cpu
