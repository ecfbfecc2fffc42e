// ctnn/backends/cpu/map.hpp — runs an element-wise rule (kernels/functors.hpp)
// over n elements of k arrays on the CPU.
//
// map<Arch>(f, n, p...) calls f once per element i with one value per array
// p: xsimd::batch<T, Arch> for the body (float and double on an Arch the
// compiler targets), the same f on scalars for the last n % L elements
// (float or double; a 16-bit storage type computes in float). Every array
// holds T; an argument f takes by reference is stored back to its array, a
// const pointer is only read. When f returns a value, map returns whether
// every value it returned was finite (folded into the loop as a running sum
// of r - r: 0 for finite values, NaN otherwise); else it returns true.
// Above one chunk (2^15 elements) the elements run on the global thread pool
// in parts of equal length (map_partition: the chunks' count rounded up to a
// multiple of the threads, so that each thread gets as many), every part
// but the last a whole number of 64 values. The rule is element-wise and the
// parts start on multiples of every vector length, so each element takes the
// same vector or scalar path, and gets the same bits, whatever the thread
// count. for_chunks (parts of 2^15, the same for every thread count) and the
// pool are this backend's own: they are not part of the op set (core/backend_ops.hpp).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../../config.hpp"
#include <xsimd/xsimd.hpp>

#include "arch.hpp"
#include "thread_pool.hpp"

namespace ctnn::kernels::cpu {

// Runs f(lo, hi) over [0, n) in chunks of 2^15 elements on the global thread
// pool. The chunk length is a multiple of every vector length; f(0, n) on one
// thread when there is one chunk or one thread.
inline constexpr std::size_t map_chunk = std::size_t(1) << 15;
// How many tasks for_chunks and map split n elements into (1: f(0, n) on the calling thread).
inline std::size_t chunk_tasks(std::size_t n, const thread_pool& pool) {
  const std::size_t chunks = (n + map_chunk - 1) / map_chunk;
  return chunks <= 1 || pool.size() <= 1 ? 1 : chunks;
}
// Task c's range [lo, hi) of n elements split into `tasks` chunks.
inline std::size_t chunk_end(std::size_t n, std::size_t tasks, std::size_t c) {
  return tasks == 1 ? n : std::min(n, (c + 1) * map_chunk);
}
template <class F>
void for_chunks(std::size_t n, F&& f) {
  thread_pool& pool = thread_pool::global();
  const std::size_t tasks = chunk_tasks(n, pool);
  pool.run(tasks, [&](std::size_t c) { f(c * map_chunk, chunk_end(n, tasks, c)); }, tasks > 1);
}

namespace map_detail {

template <class T>
using scalar_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class V, class T>
CTNN_FORCEINLINE V load(const T* p, std::size_t i) {
  if constexpr (std::is_arithmetic_v<V>) return V(p[i]);
  else return V::load_unaligned(p + i);
}
template <class V, class T>
CTNN_FORCEINLINE void store(const V& v, T* p, std::size_t i) {
  if constexpr (std::is_arithmetic_v<V>) p[i] = T(v);
  else v.store_unaligned(p + i);
}
template <class V, class T>
CTNN_FORCEINLINE void store(const V&, const T*, std::size_t) {}

template <class V, class F, class... P>
inline constexpr bool returns_v = !std::is_void_v<decltype(std::declval<const F&>()((void(std::declval<P>()), std::declval<V&>())...))>;

// One element (or one batch of L) at i; nf collects r - r when f returns r.
template <class V, class F, std::size_t... I, class... P>
CTNN_FORCEINLINE void step(const F& f, std::size_t i, V& nf, std::index_sequence<I...>, P*... p) {
  V v[] = {load<V>(p, i)...};
  if constexpr (returns_v<V, F, P*...>) {
    const V r = f(v[I]...);
    nf += r - r;
  } else {
    f(v[I]...);
  }
  (store(v[I], p, i), ...);
}

}  // namespace map_detail

// f over [lo, hi) of each array, on one thread; true when every returned value is finite.
template <class Arch, class F, class P0, class... P>
bool map_range(const F& rule, std::size_t lo, std::size_t hi, P0* p0, P*... p) {
  // A local copy of a trivially copyable rule: the compiler then knows that
  // the stores to the arrays leave its parameters unchanged and keeps them
  // in registers (through the reference it reloads and broadcasts each one
  // in every iteration: 4 more instructions per vector of an Adam update).
  using rule_t = std::conditional_t<std::is_trivially_copyable_v<F>, const F, const F&>;
  rule_t f = rule;
  using T = std::remove_const_t<P0>;
  static_assert((std::is_same_v<T, std::remove_const_t<P>> && ...), "map: every array holds the same type");
  using idx = std::make_index_sequence<1 + sizeof...(P)>;
  std::size_t i = lo;
  bool ok = true;
#if !defined(__CUDA_ARCH__)  // nvcc's device pass reads host code too: no xsimd type may reach a host-device rule there
  if constexpr (simd_v<T, Arch>) {
    using B = xsimd::batch<T, Arch>;
    constexpr std::size_t L = B::size;
    B nf(T(0));
    for (; i + L <= hi; i += L) map_detail::step<B>(f, i, nf, idx{}, p0, p...);
    if constexpr (map_detail::returns_v<B, F, P0*, P*...>) ok = xsimd::hadd(nf) == T(0);
  }
#endif
  using S = map_detail::scalar_t<T>;
  S tail(0);
  for (; i < hi; ++i) map_detail::step<S>(f, i, tail, idx{}, p0, p...);
  return ok && tail == S(0);
}

// map's parts of n elements on `threads` threads: {count, length}. One part of n on one thread or up
// to one chunk; else the count of 2^15 chunks rounded up to a multiple of the threads, each part n / count
// rounded up to 64 values (the last the rest). (Parts of 2^15 gave two threads 4 and 3 of the 7
// chunks of the MLP's first kernel, and 32,768 and 128 of its second layer's 32,896 values.)
inline constexpr std::size_t map_part_align = 64;
struct map_parts {
  std::size_t count, length;
};
inline map_parts map_partition(std::size_t n, std::size_t threads) {
  const std::size_t chunks = (n + map_chunk - 1) / map_chunk;
  if (chunks <= 1 || threads <= 1) return {1, n};
  const std::size_t want = (chunks + threads - 1) / threads * threads;
  const std::size_t len = ((n + want - 1) / want + map_part_align - 1) / map_part_align * map_part_align;
  return {(n + len - 1) / len, len};
}

// f over [0, n) of each array, in parts on the thread pool above 2^15 elements (map_partition).
// (Its own tasks, without for_chunks' wrapper: one task type per rule and arrays, fewer
// instantiations per rule; docs/performance.md, "Compile time and memory".)
template <class Arch, class F, class... P>
bool map(const F& f, std::size_t n, P*... p) {
  std::atomic<bool> finite{true};
  thread_pool& pool = thread_pool::global();
  const map_parts parts = map_partition(n, pool.size());
  pool.run(
      parts.count,
      [&](std::size_t c) {
        const std::size_t lo = c * parts.length, hi = std::min(n, lo + parts.length);
        if (!map_range<Arch>(f, lo, hi, p...)) finite.store(false, std::memory_order_relaxed);
      },
      parts.count > 1);
  return finite.load(std::memory_order_relaxed);
}

}  // namespace ctnn::kernels::cpu
