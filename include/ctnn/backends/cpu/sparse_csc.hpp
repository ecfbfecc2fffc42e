// ctnn/kernels/cpu/sparse_csc.hpp — products of a sparse kernel stored by columns (CSC).
//
// Layout of a sparse K x N kernel W (layers/sparse_dense_csc.hpp): column j's
// weights are values[col[j] .. col[j + 1]), their input rows in rows[...]
// (16-bit: K <= 65536), rows ascending. The work is proportional to the
// number of weights, unlike the bitmap layout of kernels/cpu/sparse.hpp:
//   forward_reference: y = x W + b (relu optional), the scalar loop that
//                      defines the product;
//   forward<Arch>:     on AVX-512, batches below 16: per sample and column,
//                      16 weights at a time with a gather of x; batches of
//                      16 and more: whole blocks of 16 samples are
//                      transposed into `scratch` ((K + N) x batch values),
//                      so each weight multiplies 16 samples with one FMA,
//                      and transposed back; the rest go one by one. Every
//                      architecture (float, SIMD), where
//                      sparse_expand::use_per_weight says (8-15 samples on
//                      AVX-512; on AVX2 64 and more with over a quarter of
//                      the weights kept): the columns scattered into the dense
//                      GEMM's panels and the dense micro-kernel
//                      (sparse_expand.hpp).
//                      Other
//                      architectures and types run the reference (the
//                      layer's dispatch, sparse_kernels<csc_index> in
//                      sparse_rows.hpp, runs the rows kernels there);
//   backward_reference: dvalues, dbias and dx (scalar).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "../../kernels/sparse_index.hpp"
#include "arch.hpp"
#include "sparse_expand.hpp"
#include "sparse_kernels.hpp"

namespace ctnn::kernels::cpu::csc {

template <class T>
void forward_reference(const T* x, const T* values, const std::uint32_t* col, const std::uint16_t* rows, const T* bias,
                       T* y, std::size_t batch, std::size_t K, std::size_t N, bool relu) {
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t j = 0; j < N; ++j) {
      T s = bias[j];
      for (std::uint32_t p = col[j]; p < col[j + 1]; ++p) s += x[b * K + rows[p]] * values[p];
      y[b * N + j] = relu ? std::max(s, T(0)) : s;
    }
}

template <class T>
void backward_reference(const T* x, const T* dz, const T* values, const std::uint32_t* col, const std::uint16_t* rows,
                        T* dvalues, T* dbias, T* dx, std::size_t batch, std::size_t K, std::size_t N) {
  if (dx) std::fill(dx, dx + batch * K, T(0));
  for (std::size_t j = 0; j < N; ++j) {
    T sb = 0;
    for (std::size_t b = 0; b < batch; ++b) sb += dz[b * N + j];
    dbias[j] = sb;
    for (std::uint32_t p = col[j]; p < col[j + 1]; ++p) {
      T s = 0;
      for (std::size_t b = 0; b < batch; ++b) {
        s += x[b * K + rows[p]] * dz[b * N + j];
        if (dx) dx[b * K + rows[p]] += values[p] * dz[b * N + j];
      }
      dvalues[p] = s;
    }
  }
}

// Scratch values forward<Arch> needs per sample (x and y transposed).
constexpr std::size_t scratch_per_sample(std::size_t K, std::size_t N) { return K + N; }

template <std::size_t K, std::size_t N, class Arch = default_arch, class T>
void forward(const T* x, const T* values, const std::uint32_t* col, const std::uint16_t* rows, const T* bias, T* y,
             std::size_t batch, bool relu, T* scratch) {
  if constexpr (sparse_expand::available_v<Arch, T>)
    if (sparse_expand::use_per_weight<Arch, T>(batch, col[N], K * N))
      return sparse_expand::forward<K, N, Arch>(x, bias, y, batch, relu, [&](std::size_t j0) {
        return sparse_expand::column_panel<Arch, std::uint16_t>(N, values, col, rows, j0);
      });
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && std::is_base_of_v<xsimd::avx512f, Arch>) {
    // samples [b0, b1) one at a time: 16 weights per step, x gathered
    auto gathered = [&](std::size_t b0, std::size_t b1) {
      for (std::size_t b = b0; b < b1; ++b) {
        const float* xb = x + b * K;
        for (std::size_t j = 0; j < N; ++j) {
          __m512 acc = _mm512_setzero_ps();
          std::uint32_t p = col[j];
          const std::uint32_t e = col[j + 1];
          for (; p + 16 <= e; p += 16) {
            const __m512i idx = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + p)));
            acc = _mm512_fmadd_ps(_mm512_i32gather_ps(idx, xb, 4), _mm512_loadu_ps(values + p), acc);
          }
          if (p < e) {
            const __mmask16 m = __mmask16((1u << (e - p)) - 1u);
            const __m512i idx = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, rows + p));
            acc = _mm512_fmadd_ps(_mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, xb, 4),
                                  _mm512_maskz_loadu_ps(m, values + p), acc);
          }
          const float s = bias[j] + _mm512_reduce_add_ps(acc);
          y[b * N + j] = relu ? std::max(s, 0.0f) : s;
        }
      }
    };
    // whole blocks of 16 samples: xT[k][b], yT[j][b] in scratch, each weight feeds 16 samples per FMA
    const std::size_t blocks = batch / 16, bp = blocks * 16;
    if (blocks) {
      float* xt = scratch;
      float* yt = scratch + K * bp;
      for (std::size_t k = 0; k < K; ++k)  // contiguous writes; the bp rows read stay in L1
        for (std::size_t b = 0; b < bp; ++b) xt[k * bp + b] = x[b * K + k];
      for (std::size_t j = 0; j < N; ++j) {
        for (std::size_t q0 = 0; q0 < blocks; q0 += 4) {
          const std::size_t nq = std::min<std::size_t>(4, blocks - q0);
          // two sets of accumulators over alternate weights: two FMA chains per block
          __m512 acc[4], acc2[4];
          for (std::size_t q = 0; q < 4; ++q) {
            acc[q] = _mm512_set1_ps(bias[j]);
            acc2[q] = _mm512_setzero_ps();
          }
          std::uint32_t p = col[j];
          const std::uint32_t e = col[j + 1];
          if (nq == 4) {
            for (; p + 2 <= e; p += 2) {
              const __m512 w = _mm512_set1_ps(values[p]), w2 = _mm512_set1_ps(values[p + 1]);
              const float* xr = xt + std::size_t(rows[p]) * bp + q0 * 16;
              const float* xr2 = xt + std::size_t(rows[p + 1]) * bp + q0 * 16;
              acc[0] = _mm512_fmadd_ps(_mm512_loadu_ps(xr), w, acc[0]);
              acc[1] = _mm512_fmadd_ps(_mm512_loadu_ps(xr + 16), w, acc[1]);
              acc[2] = _mm512_fmadd_ps(_mm512_loadu_ps(xr + 32), w, acc[2]);
              acc[3] = _mm512_fmadd_ps(_mm512_loadu_ps(xr + 48), w, acc[3]);
              acc2[0] = _mm512_fmadd_ps(_mm512_loadu_ps(xr2), w2, acc2[0]);
              acc2[1] = _mm512_fmadd_ps(_mm512_loadu_ps(xr2 + 16), w2, acc2[1]);
              acc2[2] = _mm512_fmadd_ps(_mm512_loadu_ps(xr2 + 32), w2, acc2[2]);
              acc2[3] = _mm512_fmadd_ps(_mm512_loadu_ps(xr2 + 48), w2, acc2[3]);
            }
          }
          for (; p < e; ++p) {
            const __m512 w = _mm512_set1_ps(values[p]);
            const float* xr = xt + std::size_t(rows[p]) * bp + q0 * 16;
            for (std::size_t q = 0; q < nq; ++q) acc[q] = _mm512_fmadd_ps(_mm512_loadu_ps(xr + q * 16), w, acc[q]);
          }
          for (std::size_t q = 0; q < nq; ++q) acc[q] = _mm512_add_ps(acc[q], acc2[q]);
          for (std::size_t q = 0; q < nq; ++q) {
            if (relu) acc[q] = _mm512_max_ps(acc[q], _mm512_setzero_ps());
            _mm512_storeu_ps(yt + j * bp + (q0 + q) * 16, acc[q]);
          }
        }
      }
      for (std::size_t b = 0; b < bp; ++b)
        for (std::size_t j = 0; j < N; ++j) y[b * N + j] = yt[j * bp + b];
    }
    gathered(bp, batch);
    return;
  }
#endif
  (void)scratch;
  forward_reference(x, values, col, rows, bias, y, batch, K, N, relu);
}

// Packs kernel w[K x N] (row-major) where keep[i] != 0, column by column; values
// beyond the count kept (up to capacity) are zero. Returns the count kept.
template <class T, class M>
std::size_t pack(const T* w, const M* keep, std::size_t K, std::size_t N, T* values, std::size_t capacity,
                 std::uint32_t* col, std::uint16_t* rows) {
  std::size_t p = 0;
  for (std::size_t j = 0; j < N; ++j) {
    col[j] = std::uint32_t(std::min(p, capacity));
    for (std::size_t k = 0; k < K; ++k)
      if (keep[k * N + j]) {
        if (p < capacity) {
          values[p] = w[k * N + j];
          rows[p] = std::uint16_t(k);
        }
        ++p;
      }
  }
  col[N] = std::uint32_t(std::min(p, capacity));
  for (std::size_t q = p; q < capacity; ++q) {
    values[q] = T(0);
    rows[q] = 0;
  }
  return p;
}

// Whether forward and backward can run on an index (one read from a file;
// the rows layout, sparse_rows.hpp, stores the same): col[0] = 0, col never
// decreases, col[N] <= capacity (the values stored), and each column's rows
// are < K and strictly ascending. Returns "" when so, else the first fault with
// its column, value and row.
inline std::string validate(const std::uint32_t* col, const std::uint16_t* rows, std::size_t K, std::size_t N,
                            std::size_t capacity) {
  if (col[0] != 0) return "column 0 starts at value " + std::to_string(col[0]) + ", not 0";
  for (std::size_t j = 0; j < N; ++j) {
    const std::string column = "column " + std::to_string(j);
    if (col[j + 1] < col[j])
      return column + " ends at value " + std::to_string(col[j + 1]) + ", before its start " + std::to_string(col[j]);
    if (col[j + 1] > capacity)
      return column + " ends at value " + std::to_string(col[j + 1]) + ", past the " + std::to_string(capacity) +
             " values stored";
    for (std::size_t p = col[j]; p < col[j + 1]; ++p) {
      if (rows[p] >= K)
        return "value " + std::to_string(p) + " (" + column + ") has input row " + std::to_string(rows[p]) +
               ", but the layer has " + std::to_string(K) + " inputs";
      if (p > col[j] && rows[p] <= rows[p - 1])
        return "value " + std::to_string(p) + " (" + column + ") has input row " + std::to_string(rows[p]) +
               ", not above the row before it (" + std::to_string(rows[p - 1]) + "): rows ascend within a column";
    }
  }
  return {};
}

}  // namespace ctnn::kernels::cpu::csc

// sparse_kernels<csc_index> (the layer's dispatch) is in sparse_rows.hpp: off AVX-512 it runs the
// rows kernels, which read the same storage.
