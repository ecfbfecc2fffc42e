// ctnn/backends/cpu/int8_pool.hpp — 2D max and average pooling on int8 values (TFLite's int8
// MAX_POOL_2D and AVERAGE_POOL_2D).
//
// Channels-last x[batch, H, W, C] -> y[batch, OH, OW, C] over the windows of geometry G (f == c),
// int8 in and int8 out with one scale and zero point for both (the input's). Padding positions
// never take part.
//   max: the max of the window's int8 values (the dequantization is increasing, so it is the
//     int8 value of the float max).
//   average: as TFLite's reference_integer_ops::AveragePool, the int32 sum of the int8 values q
//     over the window's positions inside the input, divided by their count n with rounding half
//     away from zero, (sum + n/2) / n for a positive sum, (sum - n/2) / n otherwise (C++ division,
//     which truncates), then clamped to [-128, 127]. The zero point needs no term: the mean of
//     q - z is the mean of q, minus z. So with same padding a border window divides by its real
//     positions, as Keras' AveragePooling2D and TensorFlow's avg_pool do.
//   max_pool_s8_scalar(g, x, y, batch), average_pool_s8_scalar(g, x, y, batch): the loops above,
//     one value at a time (the references of the vector paths).
//   max_pool_s8<G, Arch>(x, y, batch), average_pool_s8<G, Arch>(x, y, batch): channels in vectors,
//     by the backend's Arch. AVX-512BW (Arch derived from avx512bw, in a TU built with it): 64
//     channels a step, the last C % 64 under masks; AVX2 (derived from avx2 or avx512f): max 32,
//     16 and 8 channels a vector, average 32 then 8 a step (int32 sums), the rest scalar;
//     otherwise the scalar loops. The average's division runs in float: (|sum| + n/2) / n
//     truncated, then the sign; exact for n <= 65536 (|sum| + n/2 < 2^24, and a quotient k + r/n
//     with 0 < r < n is at least 1/n from an integer, more than float's error 129 * 2^-24). Both run
//     over the thread pool by samples (batch_split.hpp: every output belongs to one sample, so the
//     bits do not depend on the thread count, as the float pooling's). Every path equals the
//     scalar loops bit for bit (tests/quantization/test_int8_pool.cpp: every architecture, 1, 2
//     and 3 threads).
// Used by quantization::int8_pass<max_pool2d<...>>, <average_pool2d<...>> and <global_average_pool>
// (layers/int8_pass.hpp; the global one at the end of this file).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <xsimd/xsimd.hpp>

#include "arch.hpp"
#include "batch_split.hpp"
#include "pooling.hpp"
#include "../../kernels/conv_reference.hpp"

namespace ctnn::kernels::cpu::int8 {

// The window of output (oh, ow) inside the input: the float pooling's (pooling.hpp).
using cpu::detail::window;

// The int8 max pooling, one value at a time (the reference of the vector paths): y[batch, OH, OW, C]
// from x[batch, H, W, C].
inline void max_pool_s8_scalar(const conv_geometry& g, const std::int8_t* x, std::int8_t* y, std::size_t batch) {
  for (std::size_t n = 0; n < batch; ++n) {
    const std::int8_t* xs = x + n * g.in_size();
    for (std::size_t oh = 0; oh < g.oh; ++oh)
      for (std::size_t ow = 0; ow < g.ow; ++ow) {
        std::size_t r0, r1, s0, s1;
        window(g, oh, ow, r0, r1, s0, s1);
        std::int8_t* out = y + ((n * g.oh + oh) * g.ow + ow) * g.c;
        for (std::size_t c = 0; c < g.c; ++c) {
          std::int8_t m = -128;
          for (std::size_t r = r0; r < r1; ++r)
            for (std::size_t s = s0; s < s1; ++s) m = std::max(m, xs[(r * g.w + s) * g.c + c]);
          out[c] = m;
        }
      }
  }
}

namespace detail {
// max_pool_s8's vector paths on `batch` samples (the calling thread).
template <conv_geometry G, class Arch>
void max_pool_s8_samples(const std::int8_t* x, std::int8_t* y, std::size_t batch) {
  [[maybe_unused]] constexpr std::size_t C = G.c;  // the vector paths
#if defined(__AVX512BW__)
  if constexpr (std::is_base_of_v<xsimd::avx512bw, Arch>) {
    for (std::size_t n = 0; n < batch; ++n) {
      const std::int8_t* xs = x + n * G.in_size();
      for (std::size_t oh = 0; oh < G.oh; ++oh)
        for (std::size_t ow = 0; ow < G.ow; ++ow) {
          std::size_t r0, r1, s0, s1;
          window(G, oh, ow, r0, r1, s0, s1);
          std::int8_t* out = y + ((n * G.oh + oh) * G.ow + ow) * C;
          for (std::size_t c0 = 0; c0 < C; c0 += 64) {
            const __mmask64 m = C - c0 >= 64 ? ~__mmask64(0) : (__mmask64(1) << (C - c0)) - 1;
            __m512i mx = _mm512_set1_epi8(-128);
            for (std::size_t r = r0; r < r1; ++r)
              for (std::size_t s = s0; s < s1; ++s)
                mx = _mm512_max_epi8(mx, _mm512_maskz_loadu_epi8(m, xs + (r * G.w + s) * C + c0));
            _mm512_mask_storeu_epi8(out + c0, m, mx);
          }
        }
    }
    return;
  }
#endif
#if defined(__AVX2__)
  if constexpr (std::is_base_of_v<xsimd::avx2, Arch> || std::is_base_of_v<xsimd::avx512f, Arch>) {
    for (std::size_t n = 0; n < batch; ++n) {
      const std::int8_t* xs = x + n * G.in_size();
      for (std::size_t oh = 0; oh < G.oh; ++oh)
        for (std::size_t ow = 0; ow < G.ow; ++ow) {
          std::size_t r0, r1, s0, s1;
          window(G, oh, ow, r0, r1, s0, s1);
          std::int8_t* out = y + ((n * G.oh + oh) * G.ow + ow) * C;
          const auto at = [&](std::size_t r, std::size_t s, std::size_t c) { return xs + (r * G.w + s) * C + c; };
          std::size_t c = 0;
          for (; c + 32 <= C; c += 32) {
            __m256i mx = _mm256_set1_epi8(-128);
            for (std::size_t r = r0; r < r1; ++r)
              for (std::size_t s = s0; s < s1; ++s)
                mx = _mm256_max_epi8(mx, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at(r, s, c))));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c), mx);
          }
          if (c + 16 <= C) {
            __m128i mx = _mm_set1_epi8(-128);
            for (std::size_t r = r0; r < r1; ++r)
              for (std::size_t s = s0; s < s1; ++s)
                mx = _mm_max_epi8(mx, _mm_loadu_si128(reinterpret_cast<const __m128i*>(at(r, s, c))));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + c), mx);
            c += 16;
          }
          if (c + 8 <= C) {
            __m128i mx = _mm_set1_epi8(-128);
            for (std::size_t r = r0; r < r1; ++r)
              for (std::size_t s = s0; s < s1; ++s)
                mx = _mm_max_epi8(mx, _mm_loadl_epi64(reinterpret_cast<const __m128i*>(at(r, s, c))));
            _mm_storel_epi64(reinterpret_cast<__m128i*>(out + c), mx);
            c += 8;
          }
          for (; c < C; ++c) {
            std::int8_t v = -128;
            for (std::size_t r = r0; r < r1; ++r)
              for (std::size_t s = s0; s < s1; ++s) v = std::max(v, *at(r, s, c));
            out[c] = v;
          }
        }
    }
    return;
  }
#endif
  max_pool_s8_scalar(G, x, y, batch);
}
}  // namespace detail

// TFLite's rounded mean of an int8 window: sum / count, half away from zero, clamped to int8.
constexpr std::int8_t rounded_mean(std::int32_t sum, std::int32_t count) {
  const std::int32_t q = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
  return std::int8_t(std::clamp<std::int32_t>(q, -128, 127));
}

// The int8 average pooling, one value at a time (the reference of the vector paths).
inline void average_pool_s8_scalar(const conv_geometry& g, const std::int8_t* x, std::int8_t* y, std::size_t batch) {
  for (std::size_t n = 0; n < batch; ++n) {
    const std::int8_t* xs = x + n * g.in_size();
    for (std::size_t oh = 0; oh < g.oh; ++oh)
      for (std::size_t ow = 0; ow < g.ow; ++ow) {
        std::size_t r0, r1, s0, s1;
        window(g, oh, ow, r0, r1, s0, s1);
        const auto count = std::int32_t((r1 - r0) * (s1 - s0));
        std::int8_t* out = y + ((n * g.oh + oh) * g.ow + ow) * g.c;
        for (std::size_t c = 0; c < g.c; ++c) {
          std::int32_t sum = 0;
          for (std::size_t r = r0; r < r1; ++r)
            for (std::size_t s = s0; s < s1; ++s) sum += xs[(r * g.w + s) * g.c + c];
          out[c] = rounded_mean(sum, count);
        }
      }
  }
}

namespace detail {
// average_pool_s8's vector paths on `batch` samples (the calling thread).
template <conv_geometry G, class Arch>
void average_pool_s8_samples(const std::int8_t* x, std::int8_t* y, std::size_t batch) {
  constexpr std::size_t C = G.c;
#if defined(__AVX512BW__)
  if constexpr (std::is_base_of_v<xsimd::avx512bw, Arch>) {
    const __m512i zero = _mm512_setzero_si512();
    for (std::size_t n = 0; n < batch; ++n) {
      const std::int8_t* xs = x + n * G.in_size();
      for (std::size_t oh = 0; oh < G.oh; ++oh)
        for (std::size_t ow = 0; ow < G.ow; ++ow) {
          std::size_t r0, r1, s0, s1;
          window(G, oh, ow, r0, r1, s0, s1);
          const auto count = std::int32_t((r1 - r0) * (s1 - s0));
          const __m512i half = _mm512_set1_epi32(count / 2);
          const __m512 fn = _mm512_set1_ps(float(count));
          std::int8_t* out = y + ((n * G.oh + oh) * G.ow + ow) * C;
          for (std::size_t c0 = 0; c0 < C; c0 += 64) {
            const __mmask64 m = C - c0 >= 64 ? ~__mmask64(0) : (__mmask64(1) << (C - c0)) - 1;
            __m512i acc[4] = {zero, zero, zero, zero};
            for (std::size_t r = r0; r < r1; ++r)
              for (std::size_t s = s0; s < s1; ++s) {
                const __m512i v = _mm512_maskz_loadu_epi8(m, xs + (r * G.w + s) * C + c0);
                acc[0] = _mm512_add_epi32(acc[0], _mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(v, 0)));
                acc[1] = _mm512_add_epi32(acc[1], _mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(v, 1)));
                acc[2] = _mm512_add_epi32(acc[2], _mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(v, 2)));
                acc[3] = _mm512_add_epi32(acc[3], _mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(v, 3)));
              }
            for (std::size_t k = 0; k < 4; ++k) {
              const auto mk = __mmask16(m >> (16 * k));
              if (!mk) break;
              const __m512i a = _mm512_add_epi32(_mm512_abs_epi32(acc[k]), half);
              __m512i q = _mm512_cvttps_epi32(_mm512_div_ps(_mm512_cvtepi32_ps(a), fn));
              q = _mm512_mask_sub_epi32(q, _mm512_cmplt_epi32_mask(acc[k], zero), zero, q);
              _mm512_mask_cvtsepi32_storeu_epi8(out + c0 + 16 * k, mk, q);  // saturates: the clamp
            }
          }
        }
    }
    return;
  }
#endif
#if defined(__AVX2__)
  if constexpr (std::is_base_of_v<xsimd::avx2, Arch> || std::is_base_of_v<xsimd::avx512f, Arch>) {
    const auto load8 = [](const std::int8_t* p) {
      return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    };
    for (std::size_t n = 0; n < batch; ++n) {
      const std::int8_t* xs = x + n * G.in_size();
      for (std::size_t oh = 0; oh < G.oh; ++oh)
        for (std::size_t ow = 0; ow < G.ow; ++ow) {
          std::size_t r0, r1, s0, s1;
          window(G, oh, ow, r0, r1, s0, s1);
          const auto count = std::int32_t((r1 - r0) * (s1 - s0));
          const __m256i half = _mm256_set1_epi32(count / 2);
          const __m256 fn = _mm256_set1_ps(float(count));
          std::int8_t* out = y + ((n * G.oh + oh) * G.ow + ow) * C;
          const auto at = [&](std::size_t r, std::size_t s, std::size_t c) { return xs + (r * G.w + s) * C + c; };
          // 8 int32 sums to 8 int8 means at o
          const auto store = [&](__m256i acc, std::int8_t* o) {
            const __m256i a = _mm256_add_epi32(_mm256_abs_epi32(acc), half);
            __m256i q = _mm256_cvttps_epi32(_mm256_div_ps(_mm256_cvtepi32_ps(a), fn));
            q = _mm256_sign_epi32(q, acc);  // -q where the sum is negative (q is 0 where it is 0)
            const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
            _mm_storel_epi64(reinterpret_cast<__m128i*>(o), _mm_packs_epi16(w, w));  // saturates: the clamp
          };
          std::size_t c = 0;
          for (; c + 32 <= C; c += 32) {
            __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                              _mm256_setzero_si256()};
            for (std::size_t r = r0; r < r1; ++r)
              for (std::size_t s = s0; s < s1; ++s)
                for (std::size_t k = 0; k < 4; ++k) acc[k] = _mm256_add_epi32(acc[k], load8(at(r, s, c + 8 * k)));
            for (std::size_t k = 0; k < 4; ++k) store(acc[k], out + c + 8 * k);
          }
          for (; c + 8 <= C; c += 8) {
            __m256i acc = _mm256_setzero_si256();
            for (std::size_t r = r0; r < r1; ++r)
              for (std::size_t s = s0; s < s1; ++s) acc = _mm256_add_epi32(acc, load8(at(r, s, c)));
            store(acc, out + c);
          }
          for (; c < C; ++c) {
            std::int32_t sum = 0;
            for (std::size_t r = r0; r < r1; ++r)
              for (std::size_t s = s0; s < s1; ++s) sum += *at(r, s, c);
            out[c] = rounded_mean(sum, count);
          }
        }
    }
    return;
  }
#endif
  average_pool_s8_scalar(G, x, y, batch);
}
}  // namespace detail

template <conv_geometry G, class Arch = default_arch>
void max_pool_s8(const std::int8_t* x, std::int8_t* y, std::size_t batch) {
  for_samples(batch, G.in_size(), [&](std::size_t n0, std::size_t n1) {
    detail::max_pool_s8_samples<G, Arch>(x + n0 * G.in_size(), y + n0 * G.out_size(), n1 - n0);
  });
}

template <conv_geometry G, class Arch = default_arch>
void average_pool_s8(const std::int8_t* x, std::int8_t* y, std::size_t batch) {
  static_assert(G.kh * G.kw <= 65536, "int8 average_pool2d: a window of more than 65536 positions");
  for_samples(batch, G.in_size(), [&](std::size_t n0, std::size_t n1) {
    detail::average_pool_s8_samples<G, Arch>(x + n0 * G.in_size(), y + n0 * G.out_size(), n1 - n0);
  });
}

// Global average pooling on int8 values (quantization::int8_pass<global_average_pool>):
// x[batch, P, C] (P positions: every axis but the last) -> y[batch, C], y[c] = rounded_mean(sum of
// the P values of channel c, P): TFLite's int8 AVERAGE_POOL_2D over the whole spatial extent (one
// window of every position, none padded), the input's scale and zero point kept.
//   global_average_pool_s8_scalar(P, C, x, y, batch): one value at a time (the reference).
//   global_average_pool_s8<P, C, Arch>(x, y, batch): average_pool_s8 over one P x 1 window (its
//     vector paths and threads; bit for bit the scalar loop, P <= 65536).
inline void global_average_pool_s8_scalar(std::size_t P, std::size_t C, const std::int8_t* x, std::int8_t* y,
                                          std::size_t batch) {
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t c = 0; c < C; ++c) {
      std::int32_t sum = 0;
      for (std::size_t p = 0; p < P; ++p) sum += x[(n * P + p) * C + c];
      y[n * C + c] = rounded_mean(sum, std::int32_t(P));
    }
}

template <std::size_t P, std::size_t C, class Arch = default_arch>
void global_average_pool_s8(const std::int8_t* x, std::int8_t* y, std::size_t batch) {
  static_assert(P <= 65536, "int8 global_average_pool: more than 65536 positions");
  // one P x 1 window over a P x 1 x C input, no padding: one output position
  constexpr conv_geometry G{P, 1, C, C, P, 1, 1, 1, 1, 0, 0};
  average_pool_s8<G, Arch>(x, y, batch);
}

}  // namespace ctnn::kernels::cpu::int8
