// ctnn/backends/cpu/int8_block.hpp — int8 x int8 -> int32 products on a block-sparse kernel (kept R x C blocks).
//
// The int8 form of backends/cpu/sparse_block.hpp's layout (layers/quantized_dense_block.hpp). A
// K x N kernel W cut into R x C blocks (R inputs by C units) keeps some blocks; per block column jb
// (units jb C .. jb C + C - 1) the kept blocks' rows, ascending, are taken 4 at a time: one
// *group* of 4 inputs k0..k3 holds C units x 4 bytes, W[k0..k3, unit] consecutive per unit (as
// int8.hpp's packed panels hold 4 consecutive k), so one group of 16 units is one 64-byte vector
// for vpdpbusd. A block column's last group is padded with zero weights. The index:
//   starts [N / C + 1]   block column jb's groups are [starts[jb], starts[jb + 1])
//   inputs               R % 4 == 0: one input per group (k0, a multiple of 4: k0..k0+3 are the
//                        group's inputs, one 4-byte load); otherwise 4 per group (k0..k3, each
//                        read alone; a padding row repeats the row before it, with weight 0).
// Capacity: groups_for(K, N, NB, R, C) groups hold any NB kept blocks (R % 4 == 0: NB R / 4;
// otherwise each block column wastes at most 3 padding rows).
//   gemm<R, C, Arch>(M, N, K, a, lda, values, inputs, starts, wsum, c, ldc):
//        c[i, j] = sum over the kept rows k of unit j of a[i, k] W[k, j]   (int32, overwritten)
//   a: M rows of int8 activations (lda >= K); wsum[j] = the sum of unit j's stored weights.
// Paths, by the backend's Arch and this CPU (int8::int8_path_of<Arch>(), as int8.hpp's):
//   vnni    vpdpbusd on (a ^ 0x80) as u8, c = dot - 128 wsum: C % 16 == 0 in zmm, C % 8 in ymm,
//           C % 4 in xmm (AVX512VL);
//   avx2    vpmaddubsw(|a|, sign(W, a)) + vpmaddwd with ones: C % 8 == 0 in ymm, C % 4 in xmm;
//   scalar  otherwise, and for C not a multiple of 4.
// One broadcast 4-byte activation group per group and row, no gather of weights; rows in tiles
// sharing each loaded weight vector, a single row on 4 accumulator chains. Integer sums are
// exact: every path equals reference::gemm_s8 on the unpacked kernel bit for bit.
//   pack / unpack / validate / column_sums: the storage from int8 weights and a block mask, back,
//   the check of a file's index, the row sums.
// Docs: docs/quantization.md ("Block-sparse int8").
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "int8.hpp"

namespace ctnn::kernels::cpu::int8::block {

// Inputs stored per group: 1 when R % 4 == 0 (the 4 rows are consecutive), else 4.
constexpr std::size_t inputs_per_group(std::size_t R) { return R % 4 == 0 ? 1 : 4; }
// Groups that hold any NB kept R x C blocks of a K x N kernel.
constexpr std::size_t groups_for(std::size_t K, std::size_t N, std::size_t NB, std::size_t R, std::size_t C) {
  if (R % 4 == 0) return NB * R / 4;
  const std::size_t cols = std::min(N / C, NB);  // block columns holding a block
  (void)K;
  return std::min(NB * R, (NB * R + 3 * cols) / 4);
}

namespace detail {
template <std::size_t R>
inline std::int32_t group_bytes(const std::int8_t* row, const std::uint16_t* inputs, std::size_t g) {
  if constexpr (R % 4 == 0) {
    return int8::detail::load4(row + inputs[g]);
  } else {
    const std::uint16_t* k = inputs + 4 * g;
    return std::int32_t(std::uint32_t(std::uint8_t(row[k[0]])) | std::uint32_t(std::uint8_t(row[k[1]])) << 8 |
                        std::uint32_t(std::uint8_t(row[k[2]])) << 16 | std::uint32_t(std::uint8_t(row[k[3]])) << 24);
  }
}
template <std::size_t R>
inline std::size_t group_input(const std::uint16_t* inputs, std::size_t g, std::size_t t) {
  if constexpr (R % 4 == 0)
    return std::size_t(inputs[g]) + t;
  else
    return inputs[4 * g + t];
}

template <std::size_t R, std::size_t C>
void gemm_scalar(std::size_t M, std::size_t N, const std::int8_t* a, std::size_t lda, const std::int8_t* values,
                 const std::uint16_t* inputs, const std::uint32_t* starts, std::int32_t* c, std::size_t ldc) {
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t jb = 0; jb < N / C; ++jb) {
      std::int32_t acc[C] = {};
      for (std::size_t g = starts[jb]; g < starts[jb + 1]; ++g)
        for (std::size_t t = 0; t < 4; ++t) {
          const std::int32_t x = a[i * lda + group_input<R>(inputs, g, t)];
          for (std::size_t u = 0; u < C; ++u) acc[u] += x * std::int32_t(values[(g * C + u) * 4 + t]);
        }
      std::copy(acc, acc + C, c + i * ldc + jb * C);
    }
}

#if defined(__AVX2__)
// The integer vector of L int32 lanes (a specialization, not std::conditional_t: GCC warns that a
// template argument drops the vector types' attributes).
template <std::size_t L>
struct ivec;
template <>
struct ivec<4> {
  using type = __m128i;
};
template <>
struct ivec<8> {
  using type = __m256i;
};
#if defined(__AVX512F__)
template <>
struct ivec<16> {
  using type = __m512i;
};
#endif
// One vector of L int32 lanes (L units x 4 bytes) of the AVX2 path: products through the sign trick.
// vpsignb here, not int8.hpp's (w ^ m) - m: that form measured slower in this kernel (bench_pruning
// int8_block*, x86-64-v3, Zen 4: 3-12 % at batch 1 and 64, docs/quantization.md).
template <std::size_t L>
struct avx2_v {
  static_assert(L == 4 || L == 8);
  using reg = typename ivec<L>::type;
  struct act {
    reg abs, sgn;  // |a| as u8 (-128 -> 128), and a (the sign applied to W)
  };
  static reg zero() {
    if constexpr (L == 8) return _mm256_setzero_si256();
    else return _mm_setzero_si128();
  }
  static act prep(std::int32_t a4) {
    if constexpr (L == 8) {
      const reg v = _mm256_set1_epi32(a4);
      return {_mm256_sign_epi8(v, v), v};
    } else {
      const reg v = _mm_set1_epi32(a4);
      return {_mm_sign_epi8(v, v), v};
    }
  }
  static reg load(const std::int8_t* p) {
    if constexpr (L == 8) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    else return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  }
  static reg dot(reg acc, const act& a, reg w) {
    if constexpr (L == 8)
      return _mm256_add_epi32(
          acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a.abs, _mm256_sign_epi8(w, a.sgn)), _mm256_set1_epi16(1)));
    else
      return _mm_add_epi32(acc,
                           _mm_madd_epi16(_mm_maddubs_epi16(a.abs, _mm_sign_epi8(w, a.sgn)), _mm_set1_epi16(1)));
  }
  static reg add(reg x, reg y) {
    if constexpr (L == 8) return _mm256_add_epi32(x, y);
    else return _mm_add_epi32(x, y);
  }
  static reg finish(reg v, const std::int32_t*) { return v; }
};
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// One vector of L int32 lanes of the VNNI path: vpdpbusd on (a ^ 0x80), 128 wsum subtracted at the store.
template <std::size_t L>
struct vnni_v {
  static_assert(L == 4 || L == 8 || L == 16);
  using reg = typename ivec<L>::type;
  using act = reg;
  static reg zero() {
    if constexpr (L == 16) return _mm512_setzero_si512();
    else if constexpr (L == 8) return _mm256_setzero_si256();
    else return _mm_setzero_si128();
  }
  // the 4 bytes broadcast, then flipped in the vector (a load4 from memory becomes one broadcast
  // load: no move through a general register per group and row)
  static act prep(std::int32_t a4) {
    constexpr auto flip = std::int32_t(0x80808080u);
    if constexpr (L == 16) return _mm512_xor_si512(_mm512_set1_epi32(a4), _mm512_set1_epi32(flip));
    else if constexpr (L == 8) return _mm256_xor_si256(_mm256_set1_epi32(a4), _mm256_set1_epi32(flip));
    else return _mm_xor_si128(_mm_set1_epi32(a4), _mm_set1_epi32(flip));
  }
  static reg load(const std::int8_t* p) {
    if constexpr (L == 16) return _mm512_loadu_si512(p);
    else if constexpr (L == 8) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    else return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  }
  static reg dot(reg acc, act a, reg w) {
    if constexpr (L == 16) return int8::detail::dpbusd(acc, a, w);
    else if constexpr (L == 8) return _mm256_dpbusd_epi32(acc, a, w);
    else return _mm_dpbusd_epi32(acc, a, w);
  }
  static reg add(reg x, reg y) {
    if constexpr (L == 16) return _mm512_add_epi32(x, y);
    else if constexpr (L == 8) return _mm256_add_epi32(x, y);
    else return _mm_add_epi32(x, y);
  }
  static reg finish(reg v, const std::int32_t* wsum) {  // the sums: dot - 128 wsum
    if constexpr (L == 16)
      return _mm512_sub_epi32(v, _mm512_slli_epi32(_mm512_loadu_si512(wsum), 7));
    else if constexpr (L == 8)
      return _mm256_sub_epi32(v, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wsum)), 7));
    else
      return _mm_sub_epi32(v, _mm_slli_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wsum)), 7));
  }
};
#endif

#if defined(__AVX2__)  // the vector paths (vnni_v, avx2_v) and their stores (int8::detail::put)
// S rows (from row i) of one block column (units j..j + C - 1): groups [g0, g1), C / L vectors per
// row, stored by the epilogue e (int8::store_i32 or the fused int8::requant<Y>); one row on 4 chains.
template <class V, std::size_t L, std::size_t R, std::size_t C, std::size_t S, class E>
inline void column(const std::int8_t* a, std::size_t lda, const std::int8_t* values, const std::uint16_t* inputs,
                   std::uint32_t g0, std::uint32_t g1, const std::int32_t* wsum, E& e, std::size_t i, std::size_t j) {
  constexpr std::size_t Q = C / L, U = S == 1 ? 4 : 1;
  using reg = typename V::reg;
  reg acc[U][S][Q];
  for (std::size_t u = 0; u < U; ++u)
    for (std::size_t s = 0; s < S; ++s)
      for (std::size_t q = 0; q < Q; ++q) acc[u][s][q] = V::zero();
  const auto one = [&](std::size_t u, std::size_t g) {
    const std::int8_t* w = values + g * 4 * C;
    typename V::act x[S];
    for (std::size_t s = 0; s < S; ++s) x[s] = V::prep(group_bytes<R>(a + s * lda, inputs, g));
    for (std::size_t q = 0; q < Q; ++q) {
      const reg wv = V::load(w + q * 4 * L);
      for (std::size_t s = 0; s < S; ++s) acc[u][s][q] = V::dot(acc[u][s][q], x[s], wv);
    }
  };
  std::size_t g = g0;
  if constexpr (U == 4)
    for (; g + 4 <= g1; g += 4) {
      one(0, g);
      one(1, g + 1);
      one(2, g + 2);
      one(3, g + 3);
    }
  for (; g < g1; ++g) one(0, g);
  for (std::size_t s = 0; s < S; ++s)
    for (std::size_t q = 0; q < Q; ++q) {
      reg t = acc[0][s][q];
      if constexpr (U == 4) t = V::add(V::add(t, acc[1][s][q]), V::add(acc[2][s][q], acc[3][s][q]));
      int8::detail::put(e, V::finish(t, wsum + q * L), i + s, j + q * L);
    }
}
template <class V, std::size_t L, std::size_t R, std::size_t C, std::size_t S, class E>
inline void gemm_vec(std::size_t M, std::size_t N, const std::int8_t* a, std::size_t lda, const std::int8_t* values,
                     const std::uint16_t* inputs, const std::uint32_t* starts, const std::int32_t* wsum, E& e) {
  std::size_t i = 0;
  for (; i + S <= M; i += S)
    for (std::size_t jb = 0; jb < N / C; ++jb)
      column<V, L, R, C, S>(a + i * lda, lda, values, inputs, starts[jb], starts[jb + 1], wsum + jb * C, e, i, jb * C);
  for (; i < M; ++i)
    for (std::size_t jb = 0; jb < N / C; ++jb)
      column<V, L, R, C, 1>(a + i * lda, lda, values, inputs, starts[jb], starts[jb + 1], wsum + jb * C, e, i, jb * C);
}
#endif
}  // namespace detail

// The path gemm<R, C, Arch> takes on this CPU: int8_path_of<Arch>(), scalar when C % 4 != 0 (or
// for VNNI without AVX512VL in the build, and for the dense GEMM's 256-bit VNNI path, which has no
// block form: then the AVX2 path).
template <std::size_t C, class Arch>
int8_path path_of() noexcept {
  if constexpr (C % 4 != 0) {
    return int8_path::scalar;
  } else {
    const int8_path p = int8_path_of<Arch>();
    if (p == int8_path::vnni256) return int8_path::avx2;
#if !defined(__AVX512VL__)
    if (p == int8_path::vnni) return int8_path::avx2;
#endif
    return p;
  }
}

namespace detail {
// gemm's vector paths, stored by the epilogue e; false (nothing done) where this CPU and Arch take
// the scalar path, or where e is the fused requantization and the path's vectors are 4 lanes
// (C % 8 != 0: that epilogue runs on 8 or 16).
template <std::size_t R, std::size_t C, class Arch, class E>
bool gemm_vector(std::size_t M, std::size_t N, const std::int8_t* a, std::size_t lda, const std::int8_t* values,
                 const std::uint16_t* inputs, const std::uint32_t* starts, const std::int32_t* wsum, E& e) {
  [[maybe_unused]] const int8_path p = path_of<C, Arch>();
  [[maybe_unused]] constexpr bool four = !std::is_same_v<E, store_i32>;  // whether 4-lane vectors are out
  if constexpr (C % 4 == 0) {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
    if (p == int8_path::vnni) {
      if constexpr (C % 16 == 0)
        return gemm_vec<vnni_v<16>, 16, R, C, 4>(M, N, a, lda, values, inputs, starts, wsum, e), true;
      else if constexpr (C % 8 == 0)
        return gemm_vec<vnni_v<8>, 8, R, C, 4>(M, N, a, lda, values, inputs, starts, wsum, e), true;
      else if constexpr (!four)
        return gemm_vec<vnni_v<4>, 4, R, C, 4>(M, N, a, lda, values, inputs, starts, wsum, e), true;
    }
#endif
#if defined(__AVX2__)
    if (p == int8_path::avx2) {
      if constexpr (C % 8 == 0)
        return gemm_vec<avx2_v<8>, 8, R, C, 2>(M, N, a, lda, values, inputs, starts, wsum, e), true;
      else if constexpr (!four)
        return gemm_vec<avx2_v<4>, 4, R, C, 2>(M, N, a, lda, values, inputs, starts, wsum, e), true;
    }
#endif
  }
  (void)M, (void)N, (void)a, (void)lda, (void)values, (void)inputs, (void)starts, (void)wsum, (void)e;
  return false;
}
}  // namespace detail

template <std::size_t R, std::size_t C, class Arch = default_arch>
void gemm(std::size_t M, std::size_t N, const std::int8_t* a, std::size_t lda, const std::int8_t* values,
          const std::uint16_t* inputs, const std::uint32_t* starts, const std::int32_t* wsum, std::int32_t* c,
          std::size_t ldc) {
  static_assert(R > 0 && C > 0, "int8::block::gemm: R and C must be > 0");
  if (M == 0 || N == 0) return;
  store_i32 e{c, ldc};
  if (!detail::gemm_vector<R, C, Arch>(M, N, a, lda, values, inputs, starts, wsum, e))
    detail::gemm_scalar<R, C>(M, N, a, lda, values, inputs, starts, c, ldc);
}

// gemm with the requantization fused into its stores (int8::requant_for's epilogue e: y[i, j] at
// e.y + i e.ldy + j): equal to gemm then int8::requantize_rows bit for bit; the int32 sums never
// reach memory on the vector paths with 8 or 16 lanes (C % 8 == 0), the others run gemm into a
// buffer, then requantize_rows. Returns how many outputs saturated.
template <std::size_t R, std::size_t C, class Y, class Arch = default_arch>
std::size_t gemm_requantize(std::size_t M, std::size_t N, const std::int8_t* a, std::size_t lda,
                            const std::int8_t* values, const std::uint16_t* inputs, const std::uint32_t* starts,
                            const std::int32_t* wsum, requant<Y> e) {
  static_assert(R > 0 && C > 0, "int8::block::gemm_requantize: R and C must be > 0");
  if (M == 0 || N == 0) return 0;
  e.saturated = 0;
  if (detail::gemm_vector<R, C, Arch>(M, N, a, lda, values, inputs, starts, wsum, e)) return e.saturated;
  thread_local std::vector<std::int32_t> acc;
  acc.resize(M * N);
  gemm<R, C, Arch>(M, N, a, lda, values, inputs, starts, wsum, acc.data(), N);
  std::size_t saturated = 0;
  for (std::size_t i = 0; i < M; ++i) {
    requant<Y> r = e;
    r.y = e.y + i * e.ldy;
    saturated += requantize_rows<Y, Arch>(1, N, acc.data() + i * N, r);
  }
  return saturated;
}

// Packs the int8 kernel w[N, K] (row-major, TFLite's order; weights in [-127, 127]) keeping the
// R x C blocks whose keep[kb (N / C) + jb] is set, into `capacity` groups: values [capacity 4 C],
// inputs [capacity inputs_per_group(R)], starts [N / C + 1]. Returns the groups used, or, when
// they exceed capacity, that larger count (nothing written then). Everything past the used
// groups is 0.
inline std::size_t pack(const std::int8_t* w, const std::uint8_t* keep, std::size_t K, std::size_t N, std::size_t R,
                        std::size_t C, std::size_t capacity, std::int8_t* values, std::uint16_t* inputs,
                        std::uint32_t* starts) {
  const std::size_t KB = K / R, NC = N / C, ipg = inputs_per_group(R);
  std::size_t need = 0;
  for (std::size_t jb = 0; jb < NC; ++jb) {
    std::size_t rows = 0;
    for (std::size_t kb = 0; kb < KB; ++kb) rows += keep[kb * NC + jb] ? R : 0;
    need += (rows + 3) / 4;
  }
  if (need > capacity) return need;
  std::fill(values, values + capacity * 4 * C, std::int8_t(0));
  std::fill(inputs, inputs + capacity * ipg, std::uint16_t(0));
  std::size_t g = 0;
  for (std::size_t jb = 0; jb < NC; ++jb) {
    starts[jb] = std::uint32_t(g);
    std::vector<std::size_t> ks;
    for (std::size_t kb = 0; kb < KB; ++kb)
      if (keep[kb * NC + jb])
        for (std::size_t r = 0; r < R; ++r) ks.push_back(kb * R + r);
    for (std::size_t t = 0; t < ks.size(); ++t) {
      const std::size_t gg = g + t / 4, slot = t % 4;
      if (ipg == 1) {
        if (slot == 0) inputs[gg] = std::uint16_t(ks[t]);
      } else {
        inputs[gg * 4 + slot] = std::uint16_t(ks[t]);
      }
      for (std::size_t u = 0; u < C; ++u) values[(gg * C + u) * 4 + slot] = w[(jb * C + u) * K + ks[t]];
    }
    if (ipg == 4 && ks.size() % 4)  // padding rows: the last row again, weight 0
      for (std::size_t t = ks.size(); t % 4; ++t) inputs[(g + t / 4) * 4 + t % 4] = std::uint16_t(ks.back());
    g += (ks.size() + 3) / 4;
  }
  starts[NC] = std::uint32_t(g);
  return g;
}

// The dense int8 kernel w[N, K] of the storage (0 outside the kept blocks).
inline void unpack(std::size_t K, std::size_t N, std::size_t R, std::size_t C, const std::int8_t* values,
                   const std::uint16_t* inputs, const std::uint32_t* starts, std::int8_t* w) {
  std::fill(w, w + N * K, std::int8_t(0));
  const std::size_t ipg = inputs_per_group(R);
  for (std::size_t jb = 0; jb < N / C; ++jb)
    for (std::size_t g = starts[jb]; g < starts[jb + 1]; ++g)
      for (std::size_t t = 0; t < 4; ++t) {
        const std::size_t k = ipg == 1 ? inputs[g] + t : inputs[4 * g + t];
        for (std::size_t u = 0; u < C; ++u) {
          const std::int8_t v = values[(g * C + u) * 4 + t];
          if (v != 0) w[(jb * C + u) * K + k] = v;
        }
      }
}

// wsum[j] = the sum of unit j's stored weights.
inline void column_sums(std::size_t N, std::size_t C, const std::int8_t* values, const std::uint32_t* starts,
                        std::int32_t* wsum) {
  for (std::size_t jb = 0; jb < N / C; ++jb)
    for (std::size_t u = 0; u < C; ++u) {
      std::int32_t s = 0;
      for (std::size_t g = starts[jb]; g < starts[jb + 1]; ++g)
        for (std::size_t t = 0; t < 4; ++t) s += values[(g * C + u) * 4 + t];
      wsum[jb * C + u] = s;
    }
}

// Whether gemm can run on an index (one read from a file): starts[0] = 0, never decreasing, ending
// at most at `capacity` groups; every input < K (R % 4 == 0: a multiple of 4), ascending within a
// block column (strictly between groups when R % 4 == 0). "" when so.
inline std::string validate(const std::uint32_t* starts, const std::uint16_t* inputs, std::size_t K, std::size_t N,
                            std::size_t R, std::size_t C, std::size_t capacity) {
  if (starts[0] != 0) return "block column 0 starts at group " + std::to_string(starts[0]) + ", not 0";
  const std::size_t ipg = inputs_per_group(R);
  for (std::size_t jb = 0; jb < N / C; ++jb) {
    const std::string col = "block column " + std::to_string(jb);
    if (starts[jb + 1] < starts[jb])
      return col + " ends at group " + std::to_string(starts[jb + 1]) + ", before it starts (" +
             std::to_string(starts[jb]) + ")";
    if (starts[jb + 1] > capacity)
      return col + " ends at group " + std::to_string(starts[jb + 1]) + ", past the " + std::to_string(capacity) +
             " groups stored";
    for (std::size_t e = std::size_t(starts[jb]) * ipg; e < std::size_t(starts[jb + 1]) * ipg; ++e) {
      const std::size_t k = inputs[e];
      const std::string at = "input " + std::to_string(e) + " (group " + std::to_string(e / ipg) + ", " + col + ")";
      if (ipg == 1 ? (k % 4 != 0 || k + 4 > K) : k >= K)
        return at + " is " + std::to_string(k) + ", but the layer has " + std::to_string(K) + " inputs" +
               (ipg == 1 ? " (and a group starts at a multiple of 4)" : "");
      if (e > std::size_t(starts[jb]) * ipg && (ipg == 1 ? k <= inputs[e - 1] : k < inputs[e - 1]))
        return at + " is " + std::to_string(k) + ", " + (ipg == 1 ? "not above" : "below") + " the one before (" +
               std::to_string(inputs[e - 1]) + ")";
    }
  }
  return {};
}

}  // namespace ctnn::kernels::cpu::int8::block
