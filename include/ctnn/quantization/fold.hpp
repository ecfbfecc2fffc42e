// ctnn/quantization/fold.hpp — batch-norm folding: a trained network's batch_normalization layers
// (inference: moving statistics) merged into a dense or convolution next to them, as the
// conversion to int8 needs (an int8 network has no batch_norm kernel).
//
// A batch_norm over C channels computes, at inference, y = s_c x + t_c with s_c = gamma_c /
// sqrt(moving_variance_c + epsilon) and t_c = beta_c - moving_mean_c s_c (Keras 3's formula).
// Into the layer BEFORE it (TFMOT's rule, default_8bit_transforms.py: a BatchNormalization right
// after a Conv2D, DepthwiseConv2D or Dense whose activation is linear), when that layer is a
// dense<N, identity, ...>, conv2d<..., identity, ...> (any padding) or depthwise_conv2d<...,
// identity, ...>: per output channel c (the batch_norm's channel),
//     W'[k, c] = W[k, c] s_c,   b'_c = (b_c - moving_mean_c) s_c + beta_c = b_c s_c + t_c,
// exact at every position, padded or not. An element-wise activation layer right after such a
// batch_norm (relu, leaky_relu, sigmoid, tanh, identity) becomes the folded layer's own activation
// (TFMOT matches a ReLU there and puts no fake quantization between the three).
// Otherwise into the next layer that is not flatten, reshape or dropout (identities on the values'
// memory order, so input feature k of that layer is the batch_norm's value k, channel k % C) when
// that layer is
//   dense<N, ...>:                       W'[k, n] = W[k, n] s_(k % C)
//   conv2d<...> (through dropout only)   b'_n = b_n + sum_k W[k, n] t_(k % C)
//     whose windows read no padding (valid padding, or a 1x1 same one): the kernel [KH, KW, C, F]
//     read as [K = KH KW C, F], k % C its channel, the same two formulas.
// Where both apply, the layer before is taken: it is TFMOT's direction, and it scales the weights
// per output channel, which the per-output-channel int8 weight scales absorb (the fold into the
// layer after scales per input channel and so widens each channel's weight range). A batch_norm
// that can fold neither way (after a pooling, an activation, a layer with its own nonlinear
// activation, or first; and before a pooling, another batch_norm, a same-padded conv2d, or nothing)
// is a compile error naming the layer ("layer 3 (batch_norm): cannot be folded for int8 ...").
// Docs: docs/quantization.md.
//   quantization::fold_t<Net>        Net without its batch_norm layers (and the activation layers
//                                    taken into a folded layer); Net itself when it has none
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
#include "../layers/activation.hpp"
#include "../layers/conv2d.hpp"
#include "../layers/dense.hpp"
#include "../layers/depthwise_conv2d.hpp"
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

// The layers a batch_norm folds into backwards (TFMOT's Conv2D, DepthwiseConv2D, Dense with a linear
// activation), and that layer with activation A instead of identity.
template <class S>
inline constexpr bool is_back_fold_target_v = false;
template <long long N, class O1, class O2>
  requires(!dense<N, identity, O1, O2>::is_up_to)
inline constexpr bool is_back_fold_target_v<dense<N, identity, O1, O2>> = true;
template <std::size_t F, std::size_t KH, std::size_t KW, std::size_t S, padding Pad, class R, class I>
inline constexpr bool is_back_fold_target_v<conv2d<F, KH, KW, S, Pad, identity, R, I>> = true;
template <std::size_t KH, std::size_t KW, std::size_t S, padding Pad, std::size_t M, class R, class I>
inline constexpr bool is_back_fold_target_v<depthwise_conv2d<KH, KW, S, Pad, M, identity, R, I>> = true;
template <class S, class A>
struct with_activation;
template <long long N, class O1, class O2, class A>
struct with_activation<dense<N, identity, O1, O2>, A> {
  using type = dense<N, A, O1, O2>;
};
template <std::size_t F, std::size_t KH, std::size_t KW, std::size_t S, padding Pad, class R, class I, class A>
struct with_activation<conv2d<F, KH, KW, S, Pad, identity, R, I>, A> {
  using type = conv2d<F, KH, KW, S, Pad, A, R, I>;
};
template <std::size_t KH, std::size_t KW, std::size_t S, padding Pad, std::size_t M, class R, class I, class A>
struct with_activation<depthwise_conv2d<KH, KW, S, Pad, M, identity, R, I>, A> {
  using type = depthwise_conv2d<KH, KW, S, Pad, M, A, R, I>;
};
// An element-wise activation layer (one with a rule a dense or convolution applies as its own).
template <class S>
inline constexpr bool is_elementwise_activation_v = Activation<S> && requires { S::template rule<float>(); };

// Whether a bound conv2d's windows stay inside its input (no padded position is read).
template <class Bound>
constexpr bool reads_no_padding() {
  constexpr auto g = Bound::geometry;
  return g.pt == 0 && g.pl == 0 && (g.oh - 1) * g.stride + g.kh <= g.h && (g.ow - 1) * g.stride + g.kw <= g.w;
}

template <std::size_t Pos>
constexpr diag::message batch_norm_fold_text() {
  diag::message m;
  m << "layer " << Pos << " (batch_norm): cannot be folded for int8: neither into the layer before (a dense, "
    << "conv2d or depthwise_conv2d with identity activation right before it) nor into the next layer that is not "
    << "flatten, reshape or dropout (a dense, or a conv2d right after it, dropout between, whose windows read no "
    << "padding: valid padding)";
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
  static constexpr std::array<bool, n + 1> back_at{is_back_fold_target_v<Ls>..., false};
  static constexpr std::array<bool, n + 1> act_at{is_elementwise_activation_v<Ls>..., false};
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
  // whether batch_norm i folds into layer i - 1 (preferred where both directions apply)
  static constexpr bool backward(std::size_t i) { return i < n && bn[i] && i > 0 && back_at[i - 1]; }
  // whether layer i is an activation layer taken into the layer a batch_norm before it folded into
  static constexpr bool absorbed(std::size_t i) { return i < n && i > 0 && act_at[i] && backward(i - 1); }
  static constexpr bool removed(std::size_t i) { return bn[i] || absorbed(i); }
  // the layer batch_norm i folds into, n where it cannot
  static constexpr std::size_t target(std::size_t i) {
    if (backward(i)) return i - 1;
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
  // the position of layer i once the batch_norm (and absorbed activation) layers before it are gone
  static constexpr std::size_t folded_index(std::size_t i) {
    std::size_t k = i;
    for (std::size_t j = 0; j < i; ++j) k -= removed(j);
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
  // layer I of the folded network's list: nothing where removed, the layer with the absorbed activation
  // (or identity) where a batch_norm folds into it backwards, else the layer itself
  template <std::size_t I>
  static auto kept() {
    using L = std::tuple_element_t<I, std::tuple<Ls...>>;
    if constexpr (removed(I))
      return std::type_identity<std::tuple<>>{};
    else if constexpr (backward(I + 1) && absorbed(I + 2))
      return std::type_identity<
          std::tuple<typename with_activation<L, std::tuple_element_t<I + 2, std::tuple<Ls...>>>::type>>{};
    else
      return std::type_identity<std::tuple<L>>{};
  }
  template <std::size_t I>
  using kept_t = typename decltype(kept<I>())::type;
  template <class... Ks>
  static auto make(std::tuple<Ks...>*) -> sequential<In, Ks...>;
  template <std::size_t... I>
  static auto folded_list(std::index_sequence<I...>)
      -> decltype(make(static_cast<decltype(std::tuple_cat(std::declval<kept_t<I>>()...))*>(nullptr)));
  using type = std::conditional_t<checked, decltype(folded_list(std::index_sequence_for<Ls...>{})), void>;
};
}  // namespace quantization::detail

namespace quantization {
// Net without its batch_norm layers, each folded into the dense or convolution before it (with the
// activation layer after it, if any, as that layer's activation) or else into the dense or conv2d
// after it (a compile error naming a batch_norm that cannot be folded).
template <class Net>
using fold_t = typename detail::folding<Net>::type;
template <class Net>
inline constexpr bool has_batch_norm_v = detail::folding<Net>::count > 0;
}  // namespace quantization

// The float model of m's network with every batch_norm folded into the layer before or after it: the
// other variables copied, then each target's kernel and bias replaced by the folded ones (computed in
// double from m's values, rounded to float).
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
    while (fo::removed(s) || fo::folded_index(s) != d.layer) ++s;
    const variable_ref v = find(src, s, d.name);
    if (v.extent != d.extent || v.element_bytes != d.element_bytes)
      throw std::logic_error("fold_batch_norm: layer " + std::to_string(s + 1) + "'s " + std::string(d.name) +
                             " differs in size from the folded model's");
    std::memcpy(d.data, v.data, d.extent * d.element_bytes);
  }
  // each batch_norm's scale s_c and shift t_c, in double
  const auto statistics = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
    using L = std::tuple_element_t<I, src_layers>;
    constexpr std::size_t C = L::C;
    const auto at = [&](std::string_view name) { return reinterpret_cast<const float*>(find(src, I, name).data); };
    const float *gamma = at("gamma"), *beta = at("beta"), *mean = at("moving_mean"), *var = at("moving_variance");
    std::pair<std::array<double, C>, std::array<double, C>> st;
    for (std::size_t c = 0; c < C; ++c) {
      st.first[c] = double(gamma[c]) / std::sqrt(double(var[c]) + L::Epsilon);
      st.second[c] = double(beta[c]) - double(mean[c]) * st.first[c];
    }
    return st;
  };
  // the folded layer's kernel (read as [K, N]) and bias [N]
  const auto target_of = [&](std::size_t t) {
    const std::size_t dt = fo::folded_index(t);
    const variable_ref kv = find(dst, dt, "kernel"), bv = find(dst, dt, "bias");
    const std::size_t N = bv.extent, K = kv.extent / N;
    return std::tuple{reinterpret_cast<float*>(kv.data), reinterpret_cast<float*>(bv.data), K, N};
  };
  // first the batch_norm layers into the layer after them (on that layer's inputs), then those into the
  // layer before them (on its outputs): a layer with both computes BN2(W (BN1 x) + b)
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          if constexpr (fo::bn[I] && !fo::backward(I)) {
            constexpr std::size_t t = fo::target(I);
            constexpr std::size_t C = std::tuple_element_t<I, src_layers>::C;
            const auto [scale, shift] = statistics(std::integral_constant<std::size_t, I>{});
            const auto [w, b, K, N] = target_of(t);
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
    (
        [&] {
          if constexpr (fo::backward(I)) {
            constexpr std::size_t t = I - 1;
            constexpr std::size_t C = std::tuple_element_t<I, src_layers>::C;
            const auto [scale, shift] = statistics(std::integral_constant<std::size_t, I>{});
            const auto [w, b, K, N] = target_of(t);
            if (N != C)
              throw std::logic_error("fold_batch_norm: layer " + std::to_string(t + 1) + "'s " + std::to_string(N) +
                                     " outputs differ from the batch_norm's " + std::to_string(C) + " channels");
            for (std::size_t k = 0; k < K; ++k)
              for (std::size_t j = 0; j < N; ++j) w[k * N + j] = float(double(w[k * N + j]) * scale[j]);
            for (std::size_t j = 0; j < N; ++j) b[j] = float(double(b[j]) * scale[j] + shift[j]);
          }
        }(),
        ...);
  }(std::make_index_sequence<std::tuple_size_v<src_layers>>{});
  return out;
}

}  // namespace ctnn
