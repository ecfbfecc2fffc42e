// ctnn/quantization/convert.hpp — post-training quantization of a trained float model.
//
// quantized_t<Net, Scheme> replaces every dense<N, Act, ...> of Net by quantized_dense<K, N, Act,
// Scheme> and every conv2d<F, KH, KW, Stride, Padding, Act, ...> by quantized_conv2d<F, KH, KW,
// Stride, Padding, Act, Scheme>; flatten, reshape, dropout, max_pool2d, average_pool2d and
// global_average_pool stay (a pooling keeps its input's quantization, as TFLite's pools; between two
// full-integer layers the pools, flatten, reshape and dropout become quantization::int8_pass<S>,
// below); a batch_norm is folded
// into the linear dense or convolution before it (an activation layer after it becoming that layer's
// activation) or else the dense or conv2d after it first (quantization/fold.hpp: quantized_t<Net> is that
// of fold_t<Net>, and quantize_dynamic / quantize_full_integer convert fold_batch_norm(m)); any
// other layer is a compile error ("has no int8 kernel"). Regularizers and initializers are
// dropped. A stripped sparse_dense_block<K, N, NNZ, R, C, Act> becomes quantized_dense_block<K, N,
// NNZ, R, C, Act, Scheme>, also wrapped in undecoded<...> (layout::undecoded<layout::block<R, C>>: the
// same variables); the other stripped layouts (bitmap, csc, rows, nm; decoded or not) have no int8
// kernel: a compile error whose first line names the layer ("layer 2 (undecoded<sparse_dense>, 784 x
// 256): quantize: this stripped layout has no int8 kernel; ...").
//   quantize_dynamic(m)                      int8 weights per output channel, float activations
//                                            (each input row quantized on the fly): no data needed
//   quantize_full_integer(m, x, n, opts)     also int8 activations, per tensor, their ranges
//                                            calibrated on n representative samples x (float rows
//                                            of the input's size): min/max, or opts.percentile < 100
//                                            (the [100 - p, p] percentiles of each tensor's values);
//                                            a layer's input range is the previous quantized
//                                            layer's output range (the same values, or a
//                                            max pooling of them), the first layer's its own
// Between two full-integer layers the tensor stays int8 (quantization::int8_io: the first
// requantizes straight to int8 with its output parameters, which the calibration makes the second's
// input ones, as a TFLite tensor carries one scale and zero point for its producer and its
// consumer; the second skips its quantize step), also across max_pool2d, average_pool2d, flatten,
// reshape and dropout layers between them, which become quantization::int8_pass<S>
// (layers/int8_pass.hpp: the max or TFLite's rounded mean of the int8 values, the producer's scale
// and zero point kept; dropout is the identity at inference; TFMOT leaves it unquantized); only a
// layer after a float one
// quantizes, only one before a float layer or the output dequantizes.
// quantization::float_between_t<QNet> is the same network with float between all its layers (the
// same weights files and outputs).
// Scheme quantization::reduce_range<S> (quantize_dynamic<quantization::reduce_range>, the same for
// quantize_full_integer): S with 7-bit weights (ONNX Runtime's reduce_range: scale / 64, [-64, 64]).
// Weights (a conv2d kernel [KH, KW, C, F] read as [K = KH KW C, F]): scale_j = max_k |W[k, j]| / 127, q = round(W / scale_j) in [-127, 127]; full-integer
// bias: round(b_j / (input_scale scale_j)) in int32. Throws std::invalid_argument for an empty
// calibration set, or a tensor whose calibrated range is empty or not finite (naming the layer).
// Docs: docs/quantization.md.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../kernels/conv_reference.hpp"
#include "../layers/conv2d.hpp"
#include "../layers/dense.hpp"
#include "../layers/dropout.hpp"
#include "../backends/cpu/pooling.hpp"
#include "../layers/average_pool2d.hpp"
#include "../layers/int8_pass.hpp"
#include "../layers/max_pool2d.hpp"
#include "../layers/quantized_conv2d.hpp"
#include "../layers/quantized_dense.hpp"
#include "../layers/quantized_dense_block.hpp"
#include "../layers/sparse_dense_block.hpp"
#include "../layers/reshape.hpp"
#include "../train/model.hpp"
#include "arithmetic.hpp"
#include "fold.hpp"

namespace ctnn {

namespace quantization::detail {
template <class>
inline constexpr bool always_false_v = false;

// A bound layer's kind, void for layers without one (the sparse layouts).
template <class L>
struct kind_of {
  using type = void;
};
template <class L>
  requires requires { typename L::kind; }
struct kind_of<L> {
  using type = typename L::kind;
};
template <class L>
using kind_t = typename kind_of<L>::type;

template <class Bound>
constexpr bool is_max_pool() {
  if constexpr (std::is_same_v<kind_t<Bound>, layer_kind::pool2d>)
    return std::is_same_v<typename Bound::spec::kind, ctnn::detail::max_pool_kind>;
  else
    return false;
}
template <class Bound>
constexpr bool is_average_pool() {
  if constexpr (std::is_same_v<kind_t<Bound>, layer_kind::pool2d>)
    return std::is_same_v<typename Bound::spec::kind, ctnn::detail::average_pool_kind>;
  else
    return false;
}
template <class Scheme, class Spec, class Bound>
struct quant_spec {
  static constexpr bool passes = std::is_same_v<kind_t<Bound>, layer_kind::reshape> ||
                                 std::is_same_v<kind_t<Bound>, layer_kind::dropout> || is_max_pool<Bound>() ||
                                 is_average_pool<Bound>() ||
                                 std::is_same_v<kind_t<Bound>, layer_kind::global_average_pool>;
  static_assert(passes, "quantize: a layer of this network has no int8 kernel (quantized: dense, conv2d, "
                        "sparse_dense_block; kept: flatten, reshape, dropout, max_pool2d, average_pool2d, "
                        "global_average_pool; "
                        "batch_norm: folded into the layer before or after, quantization/fold.hpp)");
  using type = Spec;
};
template <class Scheme, long long N, class Act, class O1, class O2, class Bound>
struct quant_spec<Scheme, dense<N, Act, O1, O2>, Bound> {
  using type = quantized_dense<Bound::K, std::size_t(N), Act, Scheme>;
};
template <class Scheme, std::size_t K, std::size_t N, std::size_t NNZ, std::size_t R, std::size_t C, class Act,
          class Bound>
struct quant_spec<Scheme, sparse_dense_block<K, N, NNZ, R, C, Act>, Bound> {
  using type = quantized_dense_block<K, N, NNZ, R, C, Act, Scheme>;
};
template <class Scheme, std::size_t F, std::size_t KH, std::size_t KW, std::size_t S, padding Pad, class Act, class R,
          class I, class Bound>
struct quant_spec<Scheme, conv2d<F, KH, KW, S, Pad, Act, R, I>, Bound> {
  using type = quantized_conv2d<F, KH, KW, S, Pad, Act, Scheme>;
};
// A stripped layer that never decodes (undecoded<Spec>, layers/sparse_dense.hpp: layout::undecoded<L>)
// converts as Spec: the same variables and files, and the int8 layer keeps no decoded weights either way.
template <class Scheme, class Spec, class Bound>
struct quant_spec<Scheme, undecoded<Spec>, Bound> : quant_spec<Scheme, Spec, Bound> {};

// A stripped layer (a spec of K inputs, N units and NNZ stored weights) other than block<R, C>: no
// int8 kernel; quantized<> refuses it first, naming it (no_int8_text).
template <class Spec>
struct stripped_spec {
  static constexpr bool value = false;
};
template <class Spec>
  requires requires { Spec::inputs; Spec::units; Spec::nnz; }
struct stripped_spec<Spec> {
  static constexpr bool value = true;
  static constexpr bool undecoded = ctnn::detail::opts_out_of_decoding<Spec>;
  static constexpr const char* name() {
    if constexpr (requires { Spec::spec_name; })
      return Spec::spec_name;
    else if constexpr (requires { Spec::group; })
      return "sparse_dense_nm";
    else
      return "a stripped layer";
  }
};
template <class Spec>
inline constexpr bool is_block_spec_v = false;
template <std::size_t K, std::size_t N, std::size_t NNZ, std::size_t R, std::size_t C, class Act>
inline constexpr bool is_block_spec_v<sparse_dense_block<K, N, NNZ, R, C, Act>> = true;
template <class Spec>
inline constexpr bool is_block_spec_v<undecoded<Spec>> = is_block_spec_v<Spec>;
template <std::size_t Pos, class Spec>
constexpr diag::message no_int8_text() {
  using S = stripped_spec<Spec>;
  diag::message m;
  if constexpr (S::value)  // (instantiated for every layer: diag::require names it)
    m << "layer " << Pos << " (" << (S::undecoded ? "undecoded<" : "") << S::name() << (S::undecoded ? ">" : "")
      << ", " << Spec::inputs << " x " << Spec::units << "): quantize: this stripped layout has no int8 kernel; "
      << "quantize the model before stripping it, or strip it to layout::block<R, C> (or "
      << "layout::undecoded<layout::block<R, C>>), which becomes quantized_dense_block";
  return m;
}

// The int8 chain: whether a converted spec is a full-integer layer, and that spec with its
// int8_io<In8, Out8> (any other spec unchanged).
template <class S>
inline constexpr bool full_integer_spec_v = false;
template <std::size_t K, std::size_t N, class Act, class Sch, class IO>
inline constexpr bool full_integer_spec_v<quantized_dense<K, N, Act, Sch, IO>> = is_full_integer_v<Sch>;
template <std::size_t K, std::size_t N, std::size_t NNZ, std::size_t R, std::size_t C, class Act, class Sch, class IO>
inline constexpr bool full_integer_spec_v<quantized_dense_block<K, N, NNZ, R, C, Act, Sch, IO>> = is_full_integer_v<Sch>;
template <std::size_t F, std::size_t KH, std::size_t KW, std::size_t S, padding Pad, class Act, class Sch, class IO,
          class Pool>
inline constexpr bool full_integer_spec_v<quantized_conv2d<F, KH, KW, S, Pad, Act, Sch, IO, Pool>> = is_full_integer_v<Sch>;
template <class S, bool In8, bool Out8>
struct with_io {
  using type = S;
};
template <std::size_t K, std::size_t N, class Act, class Sch, class IO, bool In8, bool Out8>
  requires is_full_integer_v<Sch>
struct with_io<quantized_dense<K, N, Act, Sch, IO>, In8, Out8> {
  using type = quantized_dense<K, N, Act, Sch, int8_io<In8, Out8>>;
};
template <std::size_t K, std::size_t N, std::size_t NNZ, std::size_t R, std::size_t C, class Act, class Sch, class IO,
          bool In8, bool Out8>
  requires is_full_integer_v<Sch>
struct with_io<quantized_dense_block<K, N, NNZ, R, C, Act, Sch, IO>, In8, Out8> {
  using type = quantized_dense_block<K, N, NNZ, R, C, Act, Sch, int8_io<In8, Out8>>;
};
// (a fused pool dropped: chained unwraps the fused_pool after it too)
template <std::size_t F, std::size_t KH, std::size_t KW, std::size_t S, padding Pad, class Act, class Sch, class IO,
          class Pool, bool In8, bool Out8>
  requires is_full_integer_v<Sch>
struct with_io<quantized_conv2d<F, KH, KW, S, Pad, Act, Sch, IO, Pool>, In8, Out8> {
  using type = quantized_conv2d<F, KH, KW, S, Pad, Act, Sch, int8_io<In8, Out8>>;
};

// A spec with its int8_pass removed (the float layer), any other spec unchanged.
template <class S>
struct unpassed {
  using type = S;
};
template <class S>
struct unpassed<int8_pass<S>> {
  using type = S;
};
template <class S, bool Out8>
struct unpassed<fused_pool<S, Out8>> {
  using type = S;
};
template <class S>
using unpassed_t = typename unpassed<S>::type;
template <class S, bool In8, bool Out8, bool Pass8>
using chained_spec_t =
    std::conditional_t<Pass8, int8_pass<unpassed_t<S>>, typename with_io<unpassed_t<S>, In8, Out8>::type>;

// Net with int8 tensors between full-integer layers (Chain), or float everywhere: two full-integer
// layers with only int8_pass layers (max_pool2d, flatten, reshape, dropout) between them hand int8 values on,
// and those layers run on them (int8_pass<S>).
template <class Net, bool Chain>
struct chained;
template <class In, class... Qs, bool Chain>
struct chained<sequential<In, Qs...>, Chain> {
  static constexpr std::size_t n = sizeof...(Qs);
  static constexpr std::array<bool, n> full{full_integer_spec_v<Qs>...};
  static constexpr std::array<bool, n> pass{int8_passes_v<unpassed_t<Qs>>...};
  // whether the nearest layer before (after) i that is not an int8_pass candidate is full-integer
  static constexpr bool full_before(std::size_t i) {
    for (std::size_t j = i; j-- > 0;)
      if (!pass[j]) return full[j];
    return false;
  }
  static constexpr bool full_after(std::size_t i) {
    for (std::size_t j = i + 1; j < n; ++j)
      if (!pass[j]) return full[j];
    return false;
  }
  static constexpr bool in8(std::size_t i) { return Chain && full[i] && full_before(i); }
  static constexpr bool out8(std::size_t i) { return Chain && full[i] && full_after(i); }
  static constexpr bool pass8(std::size_t i) { return Chain && pass[i] && full_before(i) && full_after(i); }
  template <std::size_t... I>
  static auto make(std::index_sequence<I...>) -> sequential<In, chained_spec_t<Qs, in8(I), out8(I), pass8(I)>...>;
  using type = decltype(make(std::index_sequence_for<Qs...>{}));
};

// A full-integer quantized_conv2d followed by a max_pool2d (int8_pass'd or float) that its store can
// take (kernels::cpu::int8::pool_fusable): the conv gets the pool (quantized_conv2d<..., Pool>) and
// the pool becomes fused_pool<max_pool2d<...>, the conv's int8 output> (layers/quantized_conv2d.hpp).
// Bound: the float network's bound layers (the same geometries). Any other spec unchanged.
template <class C>
struct conv_io {
  static constexpr bool fuses = false;
};
template <std::size_t F, std::size_t KH, std::size_t KW, std::size_t S, padding Pad, class Act, class Sch, class IO>
  requires is_full_integer_v<Sch>
struct conv_io<quantized_conv2d<F, KH, KW, S, Pad, Act, Sch, IO, void>> {
  static constexpr bool fuses = true, out8 = IO::output;
  template <class Pool>
  using with_pool = quantized_conv2d<F, KH, KW, S, Pad, Act, Sch, IO, Pool>;
};
template <class Net, class Bound>
struct pools_fused;
template <class In, class... Qs, class Bound>
struct pools_fused<sequential<In, Qs...>, Bound> {
  static constexpr std::size_t n = sizeof...(Qs);
  template <std::size_t I>
  using spec = std::tuple_element_t<I, std::tuple<Qs...>>;
  // whether layer I (a conv) takes the pool I + 1
  template <std::size_t I>
  static constexpr bool fuses() {
    if constexpr (I < n && I + 1 < n) {  // (I - 1 from 0 wraps: no layer)
      if constexpr (conv_io<spec<I>>::fuses && ctnn::quantization::detail::is_max_pool2d_v<unpassed_t<spec<I + 1>>>)
        return kernels::cpu::int8::pool_fusable(std::tuple_element_t<I, Bound>::geometry,
                                                std::tuple_element_t<I + 1, Bound>::geometry);
    }
    return false;
  }
  template <std::size_t I>
  static auto one() {
    if constexpr (fuses<I>())
      return std::type_identity<typename conv_io<spec<I>>::template with_pool<unpassed_t<spec<I + 1>>>>{};
    else if constexpr (I > 0 && fuses<I - 1>())
      return std::type_identity<fused_pool<unpassed_t<spec<I>>, conv_io<spec<I - 1>>::out8>>{};
    else
      return std::type_identity<spec<I>>{};
  }
  template <std::size_t... I>
  static auto make(std::index_sequence<I...>) -> sequential<In, typename decltype(one<I>())::type...>;
  using type = decltype(make(std::index_sequence_for<Qs...>{}));
};

template <class Net, class Scheme>
struct quantized;
template <class Scheme, class In, class... Ls>
struct quantized<sequential<In, Ls...>, Scheme> {
  using bound = typename sequential<In, Ls...>::template bound<float>;
  template <std::size_t... I>
  static auto make(std::index_sequence<I...>)
      -> sequential<In, typename quant_spec<Scheme, Ls, std::tuple_element_t<I, bound>>::type...>;
  // a stripped layer without int8 kernel: refused first, naming it
  static constexpr bool checked = [] {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return (diag::require<!(stripped_spec<Ls>::value && !is_block_spec_v<Ls>), &no_int8_text<I + 1, Ls>>() && ... &&
              true);
    }(std::index_sequence_for<Ls...>{});
  }();
  using type = std::conditional_t<
      checked,
      typename pools_fused<typename chained<decltype(make(std::index_sequence_for<Ls...>{})), true>::type, bound>::type,
      void>;
};

// Layer kinds the converter quantizes: dense, conv2d, and qat_dense, qat_conv2d (quantization/qat.hpp);
// and the bound sparse_dense_block layers (no kind: the type itself).
template <class Kind>
inline constexpr bool converts_v = std::is_same_v<Kind, layer_kind::dense> || std::is_same_v<Kind, layer_kind::conv2d>;
template <class L>
inline constexpr bool is_block_v = false;
template <class Spec, class In, class P, class B>
inline constexpr bool is_block_v<sparse_dense_block_layer<Spec, In, P, B>> = true;
template <class L>
constexpr bool converts_layer() {
  return is_block_v<L> || converts_v<kind_t<L>>;
}

// The output units of a bound layer the converter quantizes (dense: N, conv2d: F filters).
template <class L>
constexpr std::size_t units_of() {
  if constexpr (requires { L::N; })
    return L::N;
  else
    return L::F;
}

inline const variable_ref& find_var(const std::vector<variable_ref>& vs, std::size_t layer, std::string_view name) {
  for (const auto& v : vs)
    if (v.layer == layer && v.name == name) return v;
  throw std::logic_error("quantize: layer " + std::to_string(layer + 1) + " has no " + std::string(name));
}
template <class V>
V* data_of(const std::vector<variable_ref>& vs, std::size_t layer, std::string_view name) {
  return reinterpret_cast<V*>(find_var(vs, layer, name).data);
}

// The float kernel W[K, N] of a bound dense (or qat) layer, or of a sparse_dense_block layer (its kept
// blocks expanded, 0 elsewhere), and that layer's block mask (kb (N / C) + jb: kept; empty for dense).
template <class S>
std::vector<float> float_kernel(const std::vector<variable_ref>& vs, std::size_t layer,
                                std::vector<std::uint8_t>* blocks = nullptr) {
  constexpr std::size_t K = S::K, N = units_of<S>();
  std::vector<float> w(K * N, 0.0f);
  if constexpr (is_block_v<S>) {
    constexpr std::size_t R = S::R, C = S::C;
    const float* values = data_of<float>(vs, layer, "values");
    const std::byte* meta = find_var(vs, layer, "index").data;
    const auto ix = S::view(meta);
    if (blocks) blocks->assign(K / R * (N / C), 0);
    for (std::size_t jb = 0; jb < N / C; ++jb)
      for (std::size_t p = ix.starts[jb]; p < ix.starts[jb + 1]; ++p) {
        if (blocks) (*blocks)[ix.rows[p] * (N / C) + jb] = 1;
        for (std::size_t r = 0; r < R; ++r)
          for (std::size_t c = 0; c < C; ++c)
            w[(ix.rows[p] * R + r) * N + jb * C + c] = values[(p * R + r) * C + c];
      }
  } else {
    const float* k = data_of<float>(vs, layer, "kernel");
    std::copy(k, k + K * N, w.begin());
  }
  return w;
}

// [lo, hi] of values: min/max, or the [100 - p, p] percentiles.
inline std::pair<double, double> range_of(std::vector<float> v, double percentile) {
  if (v.empty()) return {0.0, 0.0};
  for (float f : v)
    if (!std::isfinite(f)) return {std::nan(""), std::nan("")};
  if (percentile >= 100.0) {
    const auto [a, b] = std::minmax_element(v.begin(), v.end());
    return {*a, *b};
  }
  const auto at = [&](double p) {
    const std::size_t k = std::min(v.size() - 1, std::size_t(std::llround(p / 100.0 * double(v.size() - 1))));
    std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(k), v.end());
    return double(v[k]);
  };
  return {at(100.0 - percentile), at(percentile)};
}

// The int8 kernel of a float kernel W[K, N] per output channel, in [-weight_max, weight_max] (127, or
// reduce_range's 64): kernel packed (backends/cpu/int8.hpp's panels, from [N, K]), scales, row sums.
// q: the int8 kernel [N, K] (null: packed here).
inline void quantize_kernel(const float* w, std::size_t K, std::size_t N, std::int8_t* packed, float* scale,
                            std::int32_t* sum, std::size_t layer, std::vector<std::int8_t>* unpacked = nullptr,
                            std::int32_t weight_max = wmax) {
  std::vector<std::int8_t> q(N * K);
  for (std::size_t j = 0; j < N; ++j) {
    double amax = 0;
    for (std::size_t k = 0; k < K; ++k) amax = std::max(amax, double(std::abs(w[k * N + j])));
    scale[j] = symmetric_scale(amax, "quantize: layer " + std::to_string(layer + 1) + "'s kernel", weight_max);
    std::int32_t s = 0;
    for (std::size_t k = 0; k < K; ++k) {
      q[j * K + k] = std::int8_t(quantize(w[k * N + j], params{scale[j], 0}, -weight_max, weight_max));
      s += q[j * K + k];
    }
    sum[j] = s;
  }
  if (unpacked)
    *unpacked = std::move(q);
  else
    kernels::cpu::int8::pack(K, N, q.data(), K, packed);
}
}  // namespace quantization::detail

template <class Net, class Scheme = quantization::full_integer>
using quantized_t = typename quantization::detail::quantized<quantization::fold_t<Net>, Scheme>::type;

namespace quantization {
// A quantized network with float tensors between all its layers (every int8_io float_io): the
// same layers, names and weights files as QNet (quantized_t's, int8 between adjacent full-integer
// layers), each full-integer layer quantizing its input and dequantizing its output.
template <class QNet>
using float_between_t = typename detail::chained<QNet, false>::type;
}  // namespace quantization

struct calibration_options {
  double percentile = 100.0;  // 100: min/max; e.g. 99.99 clips the outer 0.01 % of each tensor's values
};

namespace quantization::detail {
// Quantizes model m into Scheme's network; ranges (full integer): per dense or conv2d layer, its input and
// output ranges (in layer order), else empty.
template <class Scheme, class Net, class P, class B>
model<quantized_t<Net, Scheme>, precision::float32, B> convert(const model<Net, P, B>& m,
                                                              const std::vector<std::pair<double, double>>& ranges) {
  using src_layers = typename model<Net, P, B>::layers;
  using dst_model = model<quantized_t<Net, Scheme>, precision::float32, B>;
  static_assert(std::is_same_v<typename model<Net, P, B>::variable_type, float>,
                "quantize: the float model must hold float32 variables");
  dst_model out(m.seed());
  std::vector<variable_ref> src, dst;
  m.for_each_variable([&](const variable_ref& v) { src.push_back(v); });
  out.for_each_variable([&](const variable_ref& v) { dst.push_back(v); });
  std::size_t dense_index = 0;
  params previous_out;  // the last full-integer layer's output parameters (an int8 input's)
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          using S = std::tuple_element_t<I, src_layers>;
          if constexpr (converts_layer<S>()) {
            constexpr std::size_t K = S::K, N = units_of<S>();
            const float* b = data_of<float>(src, I, "bias");
            auto* q = data_of<std::int8_t>(dst, I, "kernel");
            auto* scale = data_of<float>(dst, I, "kernel_scale");
            auto* sum = data_of<std::int32_t>(dst, I, "kernel_sum");
            if constexpr (is_block_v<S>) {
              // the same blocks, int8, in int8::block's groups of 4 rows
              using D = std::tuple_element_t<I, typename dst_model::layers>;
              std::vector<std::uint8_t> blocks;
              const std::vector<float> w = float_kernel<S>(src, I, &blocks);
              std::vector<std::int8_t> qw;
              quantize_kernel(w.data(), K, N, nullptr, scale, sum, I, &qw, Scheme::weight_max);
              std::byte* ix = find_var(dst, I, "index").data;
              const std::size_t used = kernels::cpu::int8::block::pack(
                  qw.data(), blocks.data(), K, N, S::R, S::C, D::G, q, D::index::template at<1>(ix),
                  D::index::template at<0>(ix));
              if (used > D::G)
                throw std::logic_error("quantize: layer " + std::to_string(I + 1) + "'s blocks need " +
                                       std::to_string(used) + " groups, more than the " + std::to_string(D::G) +
                                       " stored");
            } else {
              quantize_kernel(data_of<float>(src, I, "kernel"), K, N, q, scale, sum, I, nullptr, Scheme::weight_max);
            }
            if constexpr (is_full_integer_v<Scheme>) {
              const std::string here = "quantize: layer " + std::to_string(I + 1);
              const auto [ilo, ihi] = ranges.at(2 * dense_index);
              const auto [olo, ohi] = ranges.at(2 * dense_index + 1);
              const params in = choose_params(ilo, ihi, here + "'s input (calibration)");
              const params outp = choose_params(olo, ohi, here + "'s output (calibration)");
              // an int8 input is the previous layer's int8 output: its parameters must be that layer's
              // output ones (the calibrations give the same range, so this holds by construction)
              if constexpr (std::tuple_element_t<I, typename dst_model::layers>::spec::io::input)
                if (in.scale != previous_out.scale || in.zero_point != previous_out.zero_point)
                  throw std::logic_error(here + ": its int8 input's parameters (scale " + std::to_string(in.scale) +
                                         ", zero point " + std::to_string(in.zero_point) +
                                         ") differ from the previous layer's output ones (scale " +
                                         std::to_string(previous_out.scale) + ", zero point " +
                                         std::to_string(previous_out.zero_point) + ")");
              previous_out = outp;
              *data_of<float>(dst, I, "input_scale") = in.scale;
              *data_of<std::int32_t>(dst, I, "input_zero_point") = in.zero_point;
              *data_of<float>(dst, I, "output_scale") = outp.scale;
              *data_of<std::int32_t>(dst, I, "output_zero_point") = outp.zero_point;
              auto* mq = data_of<std::int32_t>(dst, I, "output_multiplier");
              auto* ms = data_of<std::int32_t>(dst, I, "output_shift");
              for (std::size_t j = 0; j < N; ++j) {
                const auto mult =
                    quantize_multiplier(double(in.scale) * double(scale[j]) / double(outp.scale));
                mq[j] = mult.q;
                ms[j] = mult.shift;
              }
              auto* bq = data_of<std::int32_t>(dst, I, "bias");
              for (std::size_t j = 0; j < N; ++j) {
                const double r = std::round(double(b[j]) / (double(in.scale) * double(scale[j])));
                bq[j] = std::int32_t(std::clamp(r, double(std::numeric_limits<std::int32_t>::min()),
                                                double(std::numeric_limits<std::int32_t>::max())));
              }
            } else {
              std::copy(b, b + N, data_of<float>(dst, I, "bias"));
            }
            ++dense_index;
          }
        }(),
        ...);
  }(std::make_index_sequence<std::tuple_size_v<src_layers>>{});
  return out;
}
}  // namespace quantization::detail

// Dynamic-range post-training quantization: no calibration data. Range: quantization::full_range
// (TFLite's [-127, 127] weights) or quantization::reduce_range (ONNX Runtime's reduce_range: 7-bit
// weights, [-64, 64]; quantize_dynamic<quantization::reduce_range>(m)).
template <template <class> class Range = quantization::full_range, class Net, class P, class B>
auto quantize_dynamic(const model<Net, P, B>& m) {
  if constexpr (quantization::has_batch_norm_v<Net>) return quantize_dynamic<Range>(fold_batch_norm(m));
  else return quantization::detail::convert<Range<quantization::dynamic_range>>(m, {});
}

// Full-integer post-training quantization, calibrated on n samples x (rows of Net's input size);
// Range as quantize_dynamic's (quantize_full_integer<quantization::reduce_range>(m, x, n)).
template <template <class> class Range = quantization::full_range, class Net, class P, class B>
auto quantize_full_integer(const model<Net, P, B>& m, const float* x, std::size_t n, calibration_options opts = {}) {
  if constexpr (quantization::has_batch_norm_v<Net>) {
    return quantize_full_integer<Range>(fold_batch_norm(m), x, n, opts);
  } else {
    using layers = typename model<Net, P, B>::layers;
    if (n == 0 || !x) throw std::invalid_argument("quantize_full_integer: the calibration set is empty");
    if (!(opts.percentile > 50.0 && opts.percentile <= 100.0))
      throw std::invalid_argument("quantize_full_integer: the percentile must be in (50, 100]");
    std::vector<variable_ref> src;
    m.for_each_variable([&](const variable_ref& v) { src.push_back(v); });
    // a float forward pass over the calibration set, layer by layer, keeping each dense and conv2d
    // layer's input and output ranges
    std::vector<float> cur(x, x + n * Net::input_type::size);
    std::vector<std::pair<double, double>> ranges;
    // a layer's input range: the previous quantized layer's output range (the tensor it quantized
    // its output with, passed on unchanged or max-pooled), else the calibration input's
    const auto input_range = [&] {
      return ranges.empty() ? quantization::detail::range_of(cur, opts.percentile) : ranges.back();
    };
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            using S = std::tuple_element_t<I, layers>;
            using kind = quantization::detail::kind_t<S>;
            if constexpr (quantization::detail::is_block_v<S> || std::is_same_v<kind, layer_kind::dense>) {
              constexpr std::size_t K = S::K, N = S::N;
              const std::vector<float> kernel = quantization::detail::float_kernel<S>(src, I);
              const float* w = kernel.data();
              const float* b = quantization::detail::data_of<float>(src, I, "bias");
              ranges.push_back(input_range());
              std::vector<float> y(n * N);
              for (std::size_t i = 0; i < n; ++i)
                for (std::size_t j = 0; j < N; ++j) {
                  double s = b[j];
                  for (std::size_t k = 0; k < K; ++k) s += double(cur[i * K + k]) * double(w[k * N + j]);
                  y[i * N + j] = float(s);
                }
              S::Act::template forward<B>(y.data(), n, N);
              ranges.push_back(quantization::detail::range_of(y, opts.percentile));
              cur = std::move(y);
            } else if constexpr (std::is_same_v<kind, layer_kind::conv2d>) {
              constexpr auto g = S::geometry;
              const float* w = quantization::detail::data_of<float>(src, I, "kernel");
              const float* b = quantization::detail::data_of<float>(src, I, "bias");
              ranges.push_back(input_range());
              std::vector<float> y(n * g.out_size());
              kernels::reference::conv_forward(g, cur.data(), w, b, y.data(), n);
              S::Act::template forward<B>(y.data(), n * g.oh * g.ow, g.f);
              ranges.push_back(quantization::detail::range_of(y, opts.percentile));
              cur = std::move(y);
            } else if constexpr (quantization::detail::is_max_pool<S>()) {
              constexpr auto g = S::geometry;  // padding never wins
              std::vector<float> y(n * g.out_size(), -std::numeric_limits<float>::infinity());
              for (std::size_t s = 0; s < n; ++s)
                for (std::size_t oh = 0; oh < g.oh; ++oh)
                  for (std::size_t ow = 0; ow < g.ow; ++ow)
                    for (std::size_t i = 0; i < g.kh; ++i)
                      for (std::size_t j = 0; j < g.kw; ++j) {
                        std::size_t r, c;
                        if (!kernels::reference::conv_source(g, oh, ow, i, j, r, c)) continue;
                        for (std::size_t ch = 0; ch < g.c; ++ch) {
                          float& o = y[((s * g.oh + oh) * g.ow + ow) * g.c + ch];
                          o = std::max(o, cur[((s * g.h + r) * g.w + c) * g.c + ch]);
                        }
                      }
              cur = std::move(y);
            } else if constexpr (quantization::detail::is_average_pool<S>()) {
              // the means lie in their inputs' range: the next layer's input range stays ranges.back()
              std::vector<float> y(n * S::geometry.out_size());
              kernels::cpu::average_pool_forward<S::geometry>(cur.data(), y.data(), n);
              cur = std::move(y);
            } else if constexpr (std::is_same_v<kind, layer_kind::global_average_pool>) {
              // each channel's mean over every position (in its inputs' range, as above)
              constexpr std::size_t C = S::C, positions = S::P;
              std::vector<float> y(n * C);
              for (std::size_t i = 0; i < n; ++i)
                for (std::size_t c = 0; c < C; ++c) {
                  double sum = 0;
                  for (std::size_t p = 0; p < positions; ++p) sum += double(cur[(i * positions + p) * C + c]);
                  y[i * C + c] = float(sum / double(positions));
                }
              cur = std::move(y);
            }
          }(),
          ...);
    }(std::make_index_sequence<std::tuple_size_v<layers>>{});
    return quantization::detail::convert<Range<quantization::full_integer>>(m, ranges);
  }
}

namespace quantization {
// One full-integer layer's saturation counts (its `saturated` buffer): over every forward pass
// since the model was made, loaded or reset_saturation, the input values its quantization
// clamped to [-128, 127] (beyond the calibrated input range) and the outputs its requantization
// clamped (beyond the output range; a relu's lower bound is not saturation). A quantized_conv2d with
// a max_pool2d fused into its store (pooled) counts the pooled values it clamped instead: the pool
// windows whose largest output was above 127, or (no relu) whose outputs were all below -128, i.e.
// the clipped values the next layer reads (docs/quantization.md, "Saturation").
struct saturation_count {
  std::size_t layer = 0;  // 1-based position, as messages print it
  std::string name;       // the layer's spec, "quantized_dense<784, 256, relu, full_integer>"
  std::uint64_t inputs = 0, outputs = 0;
  bool pooled = false;    // outputs: the fused max pooling's values (layer `layer + 1` is that pool)
};

// The saturation counts of m's full-integer layers (quantized_dense, quantized_conv2d), in order.
template <class M>
std::vector<saturation_count> saturation(const M& m) {
  std::vector<std::string> names;
  std::vector<bool> pooled;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (names.push_back(std::tuple_element_t<I, typename M::layers>::name()), ...);
    (pooled.push_back([] {
       if constexpr (requires { std::tuple_element_t<I, typename M::layers>::pooled; })
         return bool(std::tuple_element_t<I, typename M::layers>::pooled);
       else
         return false;
     }()),
     ...);
  }(std::make_index_sequence<std::tuple_size_v<typename M::layers>>{});
  std::vector<saturation_count> out;
  m.for_each_variable([&](const variable_ref& v) {
    if (v.name != "saturated" || v.type != elem::u32 || v.extent != 4) return;
    std::uint32_t c[4];
    std::memcpy(c, v.data, sizeof c);
    out.push_back({v.layer + 1, names[v.layer], std::uint64_t(c[1]) << 32 | c[0], std::uint64_t(c[3]) << 32 | c[2],
                   pooled[v.layer]});
  });
  return out;
}

// Zeroes the saturation counts of m's full-integer layers.
template <class M>
void reset_saturation(M& m) {
  m.for_each_variable([&](const variable_ref& v) {
    if (v.name == "saturated" && v.type == elem::u32) std::memset(v.data, 0, v.extent * v.element_bytes);
  });
}
}  // namespace quantization

}  // namespace ctnn
