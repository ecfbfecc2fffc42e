// ctnn/quantization/fold.hpp — batch-norm folding: a trained network's batch_normalization layers
// (inference: moving statistics) merged into the dense or conv2d layer after them, as the
// conversion to int8 needs (an int8 network has no batch_norm kernel).
//
// A batch_norm over C channels computes, at inference, y = s_c x + t_c with s_c = gamma_c /
// sqrt(moving_variance_c + epsilon) and t_c = beta_c - moving_mean_c s_c (Keras 3's formula). It
// folds into the next layer that is not flatten, reshape or dropout (identities on the values'
// memory order, so input feature k of that layer is the batch_norm's value k, channel k % C) when
// that layer is
//   dense<N, ...>:                       W'[k, n] = W[k, n] s_(k % C)
//   conv2d<...> (through dropout only)   b'_n = b_n + sum_k W[k, n] t_(k % C)
//     whose windows read no padding (valid padding, or a 1x1 same one): the kernel [KH, KW, C, F]
//     read as [K = KH KW C, F], k % C its channel, the same two formulas.
// With padding the fold is wrong at the borders (a padded position reads 0 where the batch_norm
// would give t_c), so that, a batch_norm last, or one before any other layer (a pooling, another
// batch_norm, an activation layer) is a compile error naming the layer ("layer 3 (batch_norm):
// cannot be folded ..."). TFLite's converter folds a batch normalization into the convolution
// *before* it (W scaled per output channel, exact with any padding); here the CNNs normalize
// after the pooling, so the layer after is the one to fold into. Docs: docs/quantization.md.
//   quantization::fold_t<Net>        Net without its batch_norm layers (Net itself when it has none)
//   quantization::has_batch_norm_v<Net>
//   fold_batch_norm(m)               the folded float model (weights copied, the folds applied in
//                                    double, then rounded to float): its outputs equal m's at
//                                    inference within float rounding
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/diagnostics.hpp"
#include "../layers/batch_norm.hpp"
#include "../layers/conv2d.hpp"
#include "../layers/dense.hpp"
#include "../layers/dropout.hpp"
#include "../layers/int8_pass.hpp"
#include "../layers/reshape.hpp"
#include "../train/model.hpp"

namespace ctnn {

namespace quantization::detail {
template <class S>
inline constexpr bool is_batch_norm_spec_v = false;
template <auto M, auto E, bool Sy>
inline constexpr bool is_batch_norm_spec_v<batch_normalization<M, E, Sy>> = true;
template <class S>
inline constexpr bool is_dense_fold_target_v = false;
template <long long N, class Act, class O1, class O2>
inline constexpr bool is_dense_fold_target_v<dense<N, Act, O1, O2>> = true;
template <class S>
inline constexpr bool is_conv_fold_target_v = false;
template <std::size_t F, std::size_t KH, std::size_t KW, std::size_t S, padding Pad, class Act, class R, class I>
inline constexpr bool is_conv_fold_target_v<conv2d<F, KH, KW, S, Pad, Act, R, I>> = true;

// Whether a bound conv2d's windows stay inside its input (no padded position is read).
template <class Bound>
constexpr bool reads_no_padding() {
  constexpr auto g = Bound::geometry;
  return g.pt == 0 && g.pl == 0 && (g.oh - 1) * g.stride + g.kh <= g.h && (g.ow - 1) * g.stride + g.kw <= g.w;
}

template <std::size_t Pos>
constexpr diag::message batch_norm_fold_text() {
  diag::message m;
  m << "layer " << Pos << " (batch_norm): cannot be folded for int8: the next layer that is not flatten, "
    << "reshape or dropout must be a dense, or a conv2d right after it (dropout between) whose windows read no "
    << "padding (valid padding)";
  return m;
}

template <class Net>
struct folding;
template <class In, class... Ls>
struct folding<sequential<In, Ls...>> {
  using bound = typename sequential<In, Ls...>::template bound<float>;
  static constexpr std::size_t n = sizeof...(Ls);
  static constexpr std::array<bool, n + 1> bn{is_batch_norm_spec_v<Ls>..., false};
  static constexpr std::array<bool, n + 1> dropout_at{is_dropout_spec_v<Ls>..., false};
  static constexpr std::array<bool, n + 1> reshape_at{is_reshape_spec_v<Ls>..., false};
  static constexpr std::array<bool, n + 1> dense_at{is_dense_fold_target_v<Ls>..., false};
  static constexpr std::array<bool, n + 1> conv_at = [] {
    std::array<bool, n + 1> a{};
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((a[I] = [] {
         if constexpr (is_conv_fold_target_v<Ls>)
           return reads_no_padding<std::tuple_element_t<I, bound>>();
         else
           return false;
       }()),
       ...);
    }(std::index_sequence_for<Ls...>{});
    return a;
  }();
  // the layer batch_norm i folds into, n where it cannot
  static constexpr std::size_t target(std::size_t i) {
    bool reshaped = false;
    for (std::size_t j = i + 1; j < n; ++j) {
      if (dropout_at[j]) continue;
      if (reshape_at[j]) {
        reshaped = true;
        continue;
      }
      if (dense_at[j] || (conv_at[j] && !reshaped)) return j;
      return n;
    }
    return n;
  }
  // the position of layer i once the batch_norm layers before it are gone
  static constexpr std::size_t folded_index(std::size_t i) {
    std::size_t k = i;
    for (std::size_t j = 0; j < i; ++j) k -= bn[j];
    return k;
  }
  static constexpr std::size_t count = [] {
    std::size_t c = 0;
    for (std::size_t i = 0; i < n; ++i) c += bn[i];
    return c;
  }();
  static constexpr bool checked = [] {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return (diag::require<!bn[I] || target(I) < n, &batch_norm_fold_text<I + 1>>() && ... && true);
    }(std::index_sequence_for<Ls...>{});
  }();
  template <class L>
  using kept = std::conditional_t<is_batch_norm_spec_v<L>, std::tuple<>, std::tuple<L>>;
  template <class... Ks>
  static auto make(std::tuple<Ks...>*) -> sequential<In, Ks...>;
  using type = std::conditional_t<checked, decltype(make(static_cast<decltype(std::tuple_cat(
                                                              std::declval<kept<Ls>>()...))*>(nullptr))),
                                  void>;
};
}  // namespace quantization::detail

namespace quantization {
// Net without its batch_norm layers, each folded into the dense or conv2d layer after it (a compile
// error naming a batch_norm that cannot be folded).
template <class Net>
using fold_t = typename detail::folding<Net>::type;
template <class Net>
inline constexpr bool has_batch_norm_v = detail::folding<Net>::count > 0;
}  // namespace quantization

// The float model of m's network with every batch_norm folded into the layer after it: the other
// variables copied, then each target's kernel and bias replaced by the folded ones (computed in
// double from m's values, rounded to float once).
template <class Net, class P, class B>
auto fold_batch_norm(const model<Net, P, B>& m) {
  using fo = quantization::detail::folding<Net>;
  using F = quantization::fold_t<Net>;
  using src_layers = typename model<Net, P, B>::layers;
  static_assert(std::is_same_v<typename model<Net, P, B>::variable_type, float>,
                "fold_batch_norm: the float model must hold float32 variables");
  model<F, P, B> out(m.seed());
  std::vector<variable_ref> src, dst;
  m.for_each_variable([&](const variable_ref& v) { src.push_back(v); });
  out.for_each_variable([&](const variable_ref& v) { dst.push_back(v); });
  const auto find = [](const std::vector<variable_ref>& vs, std::size_t layer, std::string_view name) {
    for (const auto& v : vs)
      if (v.layer == layer && v.name == name) return v;
    throw std::logic_error("fold_batch_norm: layer " + std::to_string(layer + 1) + " has no " + std::string(name));
  };
  // every variable of a kept layer, as it is
  for (const auto& d : dst) {
    std::size_t s = 0;
    while (fo::bn[s] || fo::folded_index(s) != d.layer) ++s;
    const variable_ref v = find(src, s, d.name);
    if (v.extent != d.extent || v.element_bytes != d.element_bytes)
      throw std::logic_error("fold_batch_norm: layer " + std::to_string(s + 1) + "'s " + std::string(d.name) +
                             " differs in size from the folded model's");
    std::memcpy(d.data, v.data, d.extent * d.element_bytes);
  }
  // each batch_norm into its target
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          if constexpr (fo::bn[I]) {
            using L = std::tuple_element_t<I, src_layers>;
            constexpr std::size_t C = L::C, t = fo::target(I);
            const auto at = [&](std::string_view name) { return reinterpret_cast<const float*>(find(src, I, name).data); };
            const float *gamma = at("gamma"), *beta = at("beta"), *mean = at("moving_mean"),
                        *var = at("moving_variance");
            std::array<double, C> scale, shift;
            for (std::size_t c = 0; c < C; ++c) {
              scale[c] = double(gamma[c]) / std::sqrt(double(var[c]) + L::Epsilon);
              shift[c] = double(beta[c]) - double(mean[c]) * scale[c];
            }
            const std::size_t dt = fo::folded_index(t);
            const variable_ref kv = find(dst, dt, "kernel"), bv = find(dst, dt, "bias");
            auto* w = reinterpret_cast<float*>(kv.data);
            auto* b = reinterpret_cast<float*>(bv.data);
            const std::size_t N = bv.extent, K = kv.extent / N;
            if (K % C != 0)
              throw std::logic_error("fold_batch_norm: layer " + std::to_string(t + 1) + "'s " + std::to_string(K) +
                                     " inputs are not a multiple of the batch_norm's " + std::to_string(C) +
                                     " channels");
            for (std::size_t j = 0; j < N; ++j) {
              double sum = b[j];
              for (std::size_t k = 0; k < K; ++k) sum += double(w[k * N + j]) * shift[k % C];
              b[j] = float(sum);
            }
            for (std::size_t k = 0; k < K; ++k)
              for (std::size_t j = 0; j < N; ++j) w[k * N + j] = float(double(w[k * N + j]) * scale[k % C]);
          }
        }(),
        ...);
  }(std::make_index_sequence<std::tuple_size_v<src_layers>>{});
  return out;
}

}  // namespace ctnn
