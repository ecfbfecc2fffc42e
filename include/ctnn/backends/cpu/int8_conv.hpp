// ctnn/backends/cpu/int8_conv.hpp — the int8 convolution's operands: im2col of int8 values, and the
// implicit im2col that the packed int8 GEMM's vector paths read in place (quantized_conv2d).
//
// For a conv_geometry G (channels-last x[batch, H, W, C], y[batch, OH, OW, F], the kernel in
// conv2d's (kh, kw, c) order, packed by int8::pack as W [F, K = KH KW C]):
//   im2col_s8(g, x, pad_value, cols, ld)  one sample's [OH OW, ld] matrix (the scalar path's
//     operand, and the reference of the implicit one).
//   windows<G>  the implicit operand: row i of the product (sample n, output oh, ow) reads each
//     kernel row of its window straight from an image [batch, ih, iw, C] (the input itself when
//     G has no padding; else a copy bordered by the pad value: window_image), one kernel row
//     row_bytes = padded_k(KW C) bytes (groups of 4); K = KH row_bytes. Where KW C is not a
//     multiple of 4 (the first layer: C = 1) the kernel is re-packed with zero weights in each
//     row's last group (pack_windows), which then reads up to 3 bytes past a window's row (the
//     next column, or past the image: over_reads, the image needs `slack` readable bytes after it).
//   conv_s8<G, Arch>(img, batch, packed, wsum, c, ldc), conv_s8_requantize<G, Y, Arch>(img, batch,
//     packed, wsum, e): gemm_s8 / gemm_s8_requantize on that operand (packed: pack_windows' kernel,
//     or the layer's own where KW C % 4 == 0; wsum: its column sums), equal bit for bit to
//     im2col_s8 then gemm_s8 (integer sums are exact); false / nothing done on the scalar path
//     (int8_path_of<Arch>() == scalar: the caller runs im2col_s8 and gemm_s8).
// Tests: tests/quantization/test_int8.cpp (the kernels), test_quantized_conv2d.cpp (the layer).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../../kernels/conv_reference.hpp"
#include "int8.hpp"

namespace ctnn::kernels::cpu::int8 {

using kernels::conv_geometry;

// The int8 im2col matrix of one sample: rows OH OW of ld >= patch() bytes, (kh, kw, c) order as
// conv2d's kernel; a padded position holds pad_value, bytes patch()..ld-1 are 0.
inline void im2col_s8(const conv_geometry& g, const std::int8_t* x, std::int8_t pad_value, std::int8_t* cols,
                      std::size_t ld) {
  const std::size_t C = g.c, K = g.patch();
  for (std::size_t oh = 0; oh < g.oh; ++oh)
    for (std::size_t ow = 0; ow < g.ow; ++ow) {
      std::int8_t* row = cols + (oh * g.ow + ow) * ld;
      for (std::size_t i = 0; i < g.kh; ++i)
        for (std::size_t j = 0; j < g.kw; ++j) {
          std::int8_t* dst = row + (i * g.kw + j) * C;
          std::size_t r, s;
          if (kernels::reference::conv_source(g, oh, ow, i, j, r, s))
            std::memcpy(dst, x + (r * g.w + s) * C, C);
          else
            std::memset(dst, pad_value, C);
        }
      if (ld > K) std::memset(row + K, 0, ld - K);
    }
}

// The implicit im2col operand of detail::product_vector (int8.hpp's a_rows interface).
template <conv_geometry G>
struct windows {
  // the rows and columns the windows span; the image is the input where that fits without padding
  static constexpr std::size_t span_h = (G.oh - 1) * G.stride + G.kh, span_w = (G.ow - 1) * G.stride + G.kw;
  static constexpr bool in_place = G.pt == 0 && G.pl == 0 && span_h <= G.h && span_w <= G.w;
  static constexpr std::size_t ih = in_place ? G.h : span_h, iw = in_place ? G.w : span_w;
  static constexpr std::size_t image_size = ih * iw * G.c;
  static constexpr std::size_t row_bytes = padded_k(G.kw * G.c), k = G.kh * row_bytes;
  static constexpr bool over_reads = row_bytes != G.kw * G.c;
  static constexpr std::size_t slack = 4;  // readable bytes an image needs after its last sample (over_reads)
  static constexpr std::size_t positions = G.oh * G.ow;

  const std::int8_t* img;  // [batch, ih, iw, C]
  const std::int8_t* row(std::size_t i) const {
    const std::size_t n = i / positions, p = i % positions, oh = p / G.ow, ow = p % G.ow;
    return img + n * image_size + (oh * iw + ow) * G.stride * G.c;
  }
  static constexpr std::size_t segments() { return G.kh; }
  static constexpr std::size_t segment_stride() { return iw * G.c; }
  static constexpr std::size_t groups() { return row_bytes / 4; }
};

// The image windows<G> reads: batch samples of x [H, W, C] placed at (pt, pl) in [ih, iw, C],
// pad_value around them (the input's zero point, as im2col_s8's padding), then `slack` zero bytes.
template <conv_geometry G>
void window_image(const std::int8_t* x, std::size_t batch, std::int8_t pad_value, std::int8_t* img) {
  using Win = windows<G>;
  constexpr std::size_t C = G.c;
  for (std::size_t n = 0; n < batch; ++n) {
    const std::int8_t* xs = x + n * G.in_size();
    std::int8_t* out = img + n * Win::image_size;
    for (std::size_t r = 0; r < Win::ih; ++r) {
      std::int8_t* dst = out + r * Win::iw * C;
      const std::size_t xr = r - G.pt;  // (wraps above the input: out of range)
      if (r < G.pt || xr >= G.h) {
        std::memset(dst, pad_value, Win::iw * C);
        continue;
      }
      const std::size_t left = std::min(G.pl, Win::iw), inside = std::min(G.w, Win::iw - left);
      std::memset(dst, pad_value, left * C);
      std::memcpy(dst + left * C, xs + xr * G.w * C, inside * C);
      std::memset(dst + (left + inside) * C, pad_value, (Win::iw - left - inside) * C);
    }
  }
  std::memset(img + batch * Win::image_size, 0, Win::slack);
}

// The kernel windows<G> multiplies: packed (int8::pack of W [F, KH KW C]) re-packed as W' [F, k]
// with W'[f, i row_bytes + t] = W[f, i KW C + t] (t < KW C) and 0 in each row's padding; its
// column sums are W's. Where KW C % 4 == 0, W' == W.
template <conv_geometry G>
void pack_windows(const std::int8_t* packed, std::int8_t* out) {
  using Win = windows<G>;
  constexpr std::size_t K = G.patch(), kwc = G.kw * G.c;
  std::memset(out, 0, packed_bytes(Win::k, G.f));
  for (std::size_t j = 0; j < G.f; ++j)
    for (std::size_t i = 0; i < G.kh; ++i)
      for (std::size_t t = 0; t < kwc; ++t)
        out[packed_index(Win::k, G.f, j, i * Win::row_bytes + t)] = packed[packed_index(K, G.f, j, i * kwc + t)];
}

// The sums c[(n OH + oh) OW + ow, f] (row stride ldc) on the image img (window_image's, or the
// input where windows<G>::in_place, with `slack` bytes after it where over_reads) and packed
// (pack_windows'; wsum its column sums). False, nothing written, on the scalar path.
template <conv_geometry G, class Arch = default_arch>
bool conv_s8(const std::int8_t* img, std::size_t batch, const std::int8_t* packed, const std::int32_t* wsum,
             std::int32_t* c, std::size_t ldc) {
  using Win = windows<G>;
  store_i32 e{c, ldc};
  return batch == 0 ||
         detail::product_vector<Arch>(batch * Win::positions, G.f, Win::k, Win{img}, packed, wsum, e);
}

// conv_s8 with gemm_s8_requantize's epilogue e (rows of F outputs) fused into its stores; returns how
// many outputs saturated. Requires a vector path (int8_path_of<Arch>() != scalar).
template <conv_geometry G, class Y, class Arch = default_arch>
std::size_t conv_s8_requantize(const std::int8_t* img, std::size_t batch, const std::int8_t* packed,
                               const std::int32_t* wsum, requant<Y> e) {
  using Win = windows<G>;
  e.saturated = 0;
  if (batch) detail::product_vector<Arch>(batch * Win::positions, G.f, Win::k, Win{img}, packed, wsum, e);
  return e.saturated;
}

}  // namespace ctnn::kernels::cpu::int8
