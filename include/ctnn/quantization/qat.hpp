// ctnn/quantization/qat.hpp — quantization-aware training of dense and convolutional networks (TFMOT's default 8-bit scheme).
//
// qat_t<Net> replaces every dense<N, Act> of Net by qat_dense<N, Act, Last> and every conv2d<F, KH,
// KW, Stride, Padding, Act> by qat_conv2d<F, KH, KW, Stride, Padding, Act, Last> (Last: the
// network's last dense or conv2d layer); quantize_model(m) copies a float model's kernels and biases into it; fit
// trains it with any optimizer; convert_qat(q) gives the quantized_t<Net> full-integer model
// (quantization/convert.hpp) with the learned ranges. qat_dense's forward:
//   x^ = fake_quant(x, input range)    per tensor, asymmetric [-128, 127]; the range [input_min,
//                                      input_max] a moving average of each training batch's
//                                      [min(x, 0), max(x, 0)] (decay 0.999, initial [-6, 6]:
//                                      TFMOT's MovingAverageQuantizer), frozen in inference
//   W^ = fake_quant(W)                 per output channel, symmetric [-127, 127], scale
//                                      max|W[:, j]| / 127 from the current weights (LastValue)
//   y = act(x^ W^ + b), then (Last only) fake_quant(y, output range), a moving average as above.
// fake_quant(v, p) = dequantize(quantize(v, p), p) with quantization::choose_params: the rules of
// the int8 layer, so the converted model differs from the QAT one only by the fixed-point
// requantization and the int32 bias (within one output step). Gradients: straight-through,
// zero outside the representable range [scale (-128 - zp), scale (127 - zp)] (as TF's
// fake_quant_with_min_max_vars_gradient). The ranges are state (saved in weights files,
// never trained). Differences from TFMOT: weights per channel (TFMOT's Dense: per tensor), the
// zero point by TFLite's rule, round half away from zero. Docs: docs/quantization.md.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../layers/activation.hpp"
#include "../layers/conv2d.hpp"
#include "../layers/dense.hpp"
#include "arithmetic.hpp"
#include "convert.hpp"

namespace ctnn {

namespace quantization {
inline constexpr float qat_ema_decay = 0.999f;
inline constexpr float qat_initial_min = -6.0f, qat_initial_max = 6.0f;

// The activation parameters of a moving-average range (widened to hold 0).
inline params range_params(float min, float max, const std::string& what) {
  return choose_params(std::min(double(min), 0.0), std::max(double(max), 0.0), what);
}
inline float fake_quant(float x, params p, std::int32_t lo = qmin, std::int32_t hi = qmax) {
  return dequantize(quantize(x, p, lo, hi), p);
}
// W^ ([K, N] row-major) fake-quantized per output column (symmetric, per channel, [-weight_max,
// weight_max]: 127, or reduce_range's 64), from w.
inline void fake_quant_columns(const float* w, float* wq, std::size_t K, std::size_t N, const std::string& layer,
                               std::int32_t weight_max = wmax) {
  for (std::size_t j = 0; j < N; ++j) {
    float amax = 0;
    for (std::size_t k = 0; k < K; ++k) amax = std::max(amax, std::abs(w[k * N + j]));
    const params p{symmetric_scale(amax, layer + "'s kernel", weight_max), 0};
    for (std::size_t k = 0; k < K; ++k) wq[k * N + j] = fake_quant(w[k * N + j], p, -weight_max, weight_max);
  }
}
// The straight-through gradient's pass band.
inline bool fake_quant_passes(float x, params p, std::int32_t lo = qmin, std::int32_t hi = qmax) {
  return x >= p.scale * float(lo - p.zero_point) && x <= p.scale * float(hi - p.zero_point);
}
}  // namespace quantization

template <class Spec, Shape In, class P, class Backend>
struct qat_dense_layer;

// Scheme: the full-integer scheme it trains for and converts to, quantization::full_integer or
// quantization::reduce_range<full_integer> (the kernel fake-quantized to [-64, 64]).
template <long long N, Activation Act = identity, bool QuantizeOutput = false, class Scheme = quantization::full_integer>
struct qat_dense {
  static_assert(N > 0, "qat_dense: the number of units must be > 0");
  static_assert(quantization::is_full_integer_v<Scheme>,
                "qat_dense: the scheme is quantization::full_integer or quantization::reduce_range<full_integer>");
  using is_layer_spec = void;
  using activation = Act;
  using scheme = Scheme;
  static constexpr std::size_t units = std::size_t(N);
  static constexpr bool quantize_output = QuantizeOutput;
  static std::string name() {
    std::string s = "qat_dense<" + std::to_string(N);
    if (!std::is_same_v<Act, identity>) s += ", " + Act::name();
    if (QuantizeOutput) s += ", output";
    if (!std::is_same_v<Scheme, quantization::full_integer>) s += ", " + Scheme::name();
    return s + ">";
  }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    static_assert(In::rank == 1, "qat_dense: the input must be flat");
    return true;
  }
  template <Shape In, class P, class Backend>
  using bind = qat_dense_layer<qat_dense, In, precision::float32, Backend>;
};

namespace layer_kind {
struct qat_dense {};
}  // namespace layer_kind

template <class Spec, Shape In, class P, class Backend>
struct qat_dense_layer {
  using kind = layer_kind::qat_dense;
  using spec = Spec;
  using T = float;
  using variable_type = float;
  using compute_type = float;
  using Act = typename Spec::activation;
  static constexpr std::size_t K = In::size, N = Spec::units;
  using in_shape = In;
  using out_shape = shape<N>;
  static std::string name() { return Spec::name(); }
  static constexpr std::array<buffer, 7> buffers{
      buffer::parameter("kernel", {K, N}), buffer::parameter("bias", {N}),     buffer::state("input_min", {1}),
      buffer::state("input_max", {1}),     buffer::state("output_min", {1}),   buffer::state("output_max", {1}),
      buffer::cache("fake_quant", K + N)};  // per sample: x^, then act(x^ W^ + b) before the output's fake quant
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = count_of(buffers, role::state);
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);

  static void init(layer_slot<T> s, rng& g) {
    glorot_uniform::fill(s.params, K * N, K, N, g);
    std::fill(s.params + K * N, s.params + K * N + N, 0.0f);
    s.state[0] = s.state[2] = quantization::qat_initial_min;
    s.state[1] = s.state[3] = quantization::qat_initial_max;
  }

  static void ema(float* mn, float* mx, const float* v, std::size_t n) {
    float lo = 0, hi = 0;  // the batch range widened to hold 0
    for (std::size_t i = 0; i < n; ++i) {
      lo = std::min(lo, v[i]);
      hi = std::max(hi, v[i]);
    }
    *mn -= (*mn - lo) * (1.0f - quantization::qat_ema_decay);
    *mx -= (*mx - hi) * (1.0f - quantization::qat_ema_decay);
  }
  static quantization::params in_params(const float* st) {
    return quantization::range_params(st[0], st[1], Spec::name() + "'s input range");
  }
  static quantization::params out_params(const float* st) {
    return quantization::range_params(st[2], st[3], Spec::name() + "'s output range");
  }
  // W^ (K x N) per output channel, from the current kernel.
  static void fake_quant_kernel(const float* w, float* wq) {
    quantization::fake_quant_columns(w, wq, K, N, Spec::name(), Spec::scheme::weight_max);
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    const std::size_t m = r.batch;
    if (r.training) ema(s.state, s.state + 1, x, m * K);
    const auto ip = in_params(s.state);
    thread_local std::vector<float> xq, wq;
    xq.resize(m * K);
    wq.resize(K * N);
    for (std::size_t i = 0; i < m * K; ++i) xq[i] = quantization::fake_quant(x[i], ip);
    fake_quant_kernel(s.params, wq.data());
    ops<Backend>::template dense_forward<K, N>(xq.data(), wq.data(), s.params + K * N, y, m);
    Act::template forward<Backend>(y, m, N);
    if (s.cache)
      for (std::size_t i = 0; i < m; ++i) {
        std::copy(xq.data() + i * K, xq.data() + (i + 1) * K, s.cache + i * (K + N));
        std::copy(y + i * N, y + (i + 1) * N, s.cache + i * (K + N) + K);
      }
    if constexpr (Spec::quantize_output) {
      if (r.training) ema(s.state + 2, s.state + 3, y, m * N);
      const auto op = out_params(s.state);
      for (std::size_t i = 0; i < m * N; ++i) y[i] = quantization::fake_quant(y[i], op);
    }
  }

  static void backward(layer_slot<T> s, const T* x, const T*, T* dy, T* dx, run_info r) {
    const std::size_t m = r.batch;
    thread_local std::vector<float> xq, z, wq;
    xq.resize(m * K);
    z.resize(m * N);
    wq.resize(K * N);
    for (std::size_t i = 0; i < m; ++i) {
      std::copy(s.cache + i * (K + N), s.cache + i * (K + N) + K, xq.data() + i * K);
      std::copy(s.cache + i * (K + N) + K, s.cache + (i + 1) * (K + N), z.data() + i * N);
    }
    if constexpr (Spec::quantize_output) {
      const auto op = out_params(s.state);
      for (std::size_t i = 0; i < m * N; ++i)
        if (!quantization::fake_quant_passes(z[i], op)) dy[i] = 0;
    }
    Act::template backward<Backend>(z.data(), dy, m, N);
    // the weights' fake quant passes every weight (the range is their own max |w|): dW = x^T dz
    ops<Backend>::template dense_backward_weights<K, N>(xq.data(), dy, s.grads, s.grads + K * N, m);
    if (dx) {
      fake_quant_kernel(s.params, wq.data());
      ops<Backend>::template dense_backward_input<K, N>(dy, wq.data(), dx, m);
      const auto ip = in_params(s.state);
      for (std::size_t i = 0; i < m * K; ++i)
        if (!quantization::fake_quant_passes(x[i], ip)) dx[i] = 0;
    }
  }
};

// qat_conv2d<F, KH, KW, Stride, Padding, Act, QuantizeOutput>: conv2d's QAT form, the rules of
// qat_dense (the input's moving-average range per tensor, the kernel per output channel f over
// its KH KW C weights, the output's range when QuantizeOutput), run as conv2d does (im2col + GEMM
// through ops<Backend>) on x^ and W^.
template <class Spec, Shape In, class P, class Backend>
struct qat_conv2d_layer;

template <std::size_t F, std::size_t KH, std::size_t KW, std::size_t Stride = 1, padding Pad = padding::valid,
          Activation Act = identity, bool QuantizeOutput = false, class Scheme = quantization::full_integer>
struct qat_conv2d {
  static_assert(F > 0 && KH > 0 && KW > 0 && Stride > 0,
                "qat_conv2d: the filters, kernel height and width and the stride must be > 0");
  static_assert(quantization::is_full_integer_v<Scheme>,
                "qat_conv2d: the scheme is quantization::full_integer or quantization::reduce_range<full_integer>");
  using scheme = Scheme;
  using is_layer_spec = void;
  using activation = Act;
  using regularizer = no_regularizer;
  using initializer = glorot_uniform;
  static constexpr std::size_t filters = F, kernel_height = KH, kernel_width = KW, stride = Stride;
  static constexpr padding pad = Pad;
  static constexpr bool quantize_output = QuantizeOutput;
  static std::string name() {
    std::string s = "qat_conv2d<" + std::to_string(F) + ", " + std::to_string(KH) + ", " + std::to_string(KW) + ", " +
                    std::to_string(Stride) + ", " + padding_name(Pad);
    if (!std::is_same_v<Act, identity>) s += ", " + Act::name();
    if (QuantizeOutput) s += ", output";
    if (!std::is_same_v<Scheme, quantization::full_integer>) s += ", " + Scheme::name();
    return s + ">";
  }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return conv2d<F, KH, KW, Stride, Pad, Act>::template check<In, Pos>();
  }
  template <Shape In, class P, class Backend>
  using bind = qat_conv2d_layer<qat_conv2d, In, precision::float32, Backend>;
};

namespace layer_kind {
struct qat_conv2d {};
}  // namespace layer_kind

template <class Spec, Shape In, class P, class Backend>
struct qat_conv2d_layer {
  using kind = layer_kind::qat_conv2d;
  using spec = Spec;
  using T = float;
  using variable_type = float;
  using compute_type = float;
  using Act = typename Spec::activation;
  using O = ops<Backend>;
  // the float layer: its geometry and its cache (the im2col matrix of x^)
  using float_layer = conv2d_layer<conv2d<Spec::filters, Spec::kernel_height, Spec::kernel_width, Spec::stride,
                                          Spec::pad, Act>,
                                   In, precision::policy_of_t<precision::float32>, Backend>;
  static constexpr kernels::conv_geometry geometry = float_layer::geometry;
  static constexpr std::size_t F = geometry.f, K = float_layer::K, N = F, kernel_count = K * F;
  static constexpr std::size_t columns = float_layer::cache_per_sample, out_size = geometry.out_size();
  using in_shape = In;
  using out_shape = typename float_layer::out_shape;
  static std::string name() { return Spec::name(); }
  static constexpr std::array<buffer, 7> buffers{
      buffer::parameter("kernel", {geometry.kh, geometry.kw, geometry.c, F}),
      buffer::parameter("bias", {F}),
      buffer::state("input_min", {1}),
      buffer::state("input_max", {1}),
      buffer::state("output_min", {1}),
      buffer::state("output_max", {1}),
      buffer::cache("fake_quant", columns + out_size)};  // the batch's columns of x^, then its act(conv(x^, W^) + b)
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = count_of(buffers, role::state);
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  using dense_rules = qat_dense_layer<qat_dense<1>, shape<1>, P, Backend>;  // ema, fake_quant_passes' users

  static void init(layer_slot<T> s, rng& g) {
    glorot_uniform::fill(s.params, kernel_count, K, geometry.kh * geometry.kw * F, g);
    std::fill(s.params + kernel_count, s.params + kernel_count + F, 0.0f);
    s.state[0] = s.state[2] = quantization::qat_initial_min;
    s.state[1] = s.state[3] = quantization::qat_initial_max;
  }
  static quantization::params in_params(const float* st) {
    return quantization::range_params(st[0], st[1], Spec::name() + "'s input range");
  }
  static quantization::params out_params(const float* st) {
    return quantization::range_params(st[2], st[3], Spec::name() + "'s output range");
  }
  // W^ ([K, F]) per output channel, from the current kernel.
  static void fake_quant_kernel(const float* w, float* wq) {
    quantization::fake_quant_columns(w, wq, K, F, Spec::name(), Spec::scheme::weight_max);
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    const std::size_t m = r.batch, n_in = m * geometry.in_size(), n_out = m * out_size;
    if (r.training) dense_rules::ema(s.state, s.state + 1, x, n_in);
    const auto ip = in_params(s.state);
    thread_local std::vector<float> xq, wq, cols;
    xq.resize(n_in);
    wq.resize(kernel_count);
    for (std::size_t i = 0; i < n_in; ++i) xq[i] = quantization::fake_quant(x[i], ip);
    fake_quant_kernel(s.params, wq.data());
    float* c = s.cache;
    if (!c) {
      cols.resize(m * columns);
      c = cols.data();
    }
    O::template conv_forward<geometry>(xq.data(), wq.data(), s.params + kernel_count, y, c, m);
    Act::template forward<Backend>(y, m * geometry.oh * geometry.ow, F);
    if (s.cache) std::copy(y, y + n_out, s.cache + m * columns);
    if constexpr (Spec::quantize_output) {
      if (r.training) dense_rules::ema(s.state + 2, s.state + 3, y, n_out);
      const auto op = out_params(s.state);
      for (std::size_t i = 0; i < n_out; ++i) y[i] = quantization::fake_quant(y[i], op);
    }
  }

  static void backward(layer_slot<T> s, const T* x, const T*, T* dy, T* dx, run_info r) {
    const std::size_t m = r.batch, n_out = m * out_size;
    const float* z = s.cache + m * columns;
    if constexpr (Spec::quantize_output) {
      const auto op = out_params(s.state);
      for (std::size_t i = 0; i < n_out; ++i)
        if (!quantization::fake_quant_passes(z[i], op)) dy[i] = 0;
    }
    Act::template backward<Backend>(z, dy, m * geometry.oh * geometry.ow, F);
    // the weights' fake quant passes every weight (the range is their own max |w|)
    thread_local std::vector<float> wq;
    wq.resize(kernel_count);
    fake_quant_kernel(s.params, wq.data());
    O::template conv_backward<geometry>(dy, wq.data(), s.grads, s.grads + kernel_count, dx, s.cache, m);
    if (dx) {
      const auto ip = in_params(s.state);
      for (std::size_t i = 0; i < m * geometry.in_size(); ++i)
        if (!quantization::fake_quant_passes(x[i], ip)) dx[i] = 0;
    }
  }
};

namespace quantization::detail {
template <>
inline constexpr bool converts_v<layer_kind::qat_dense> = true;
template <>
inline constexpr bool converts_v<layer_kind::qat_conv2d> = true;

template <class Spec, bool Last, class Scheme>
struct qat_spec {
  using type = Spec;
};
template <long long N, class Act, class O1, class O2, bool Last, class Scheme>
struct qat_spec<dense<N, Act, O1, O2>, Last, Scheme> {
  using type = qat_dense<N, Act, Last, Scheme>;
};
template <std::size_t F, std::size_t KH, std::size_t KW, std::size_t S, padding Pad, class Act, class R, class I,
          bool Last, class Scheme>
struct qat_spec<conv2d<F, KH, KW, S, Pad, Act, R, I>, Last, Scheme> {
  using type = qat_conv2d<F, KH, KW, S, Pad, Act, Last, Scheme>;
};
// the layers qat_t quantizes (the last one fake-quantizes its output)
template <class Spec>
inline constexpr bool is_dense_spec = false;
template <long long N, class Act, class O1, class O2>
inline constexpr bool is_dense_spec<dense<N, Act, O1, O2>> = true;
template <std::size_t F, std::size_t KH, std::size_t KW, std::size_t S, padding Pad, class Act, class R, class I>
inline constexpr bool is_dense_spec<conv2d<F, KH, KW, S, Pad, Act, R, I>> = true;

template <class Net, class Scheme>
struct qat_net;
template <class In, class... Ls, class Scheme>
struct qat_net<sequential<In, Ls...>, Scheme> {
  static constexpr std::size_t last_dense = [] {
    std::size_t i = 0, last = sizeof...(Ls);
    ((is_dense_spec<Ls> ? (last = i, ++i) : ++i), ...);
    return last;
  }();
  template <std::size_t... I>
  static auto make(std::index_sequence<I...>)
      -> sequential<In, typename qat_spec<Ls, I == last_dense, Scheme>::type...>;
  using type = decltype(make(std::index_sequence_for<Ls...>{}));
};

template <class Scheme, long long N, class Act, bool Out, class QS, class Bound>
struct quant_spec<Scheme, qat_dense<N, Act, Out, QS>, Bound> {
  using type = quantized_dense<Bound::K, std::size_t(N), Act, Scheme>;
};
template <class Scheme, std::size_t F, std::size_t KH, std::size_t KW, std::size_t S, padding Pad, class Act, bool Out,
          class QS, class Bound>
struct quant_spec<Scheme, qat_conv2d<F, KH, KW, S, Pad, Act, Out, QS>, Bound> {
  using type = quantized_conv2d<F, KH, KW, S, Pad, Act, Scheme>;
};

// The full-integer scheme a QAT network trains for: its qat layers' (one for all of them).
template <class Spec>
struct qat_scheme_of {
  using type = void;
};
template <long long N, class Act, bool Out, class QS>
struct qat_scheme_of<qat_dense<N, Act, Out, QS>> {
  using type = QS;
};
template <std::size_t F, std::size_t KH, std::size_t KW, std::size_t S, padding Pad, class Act, bool Out, class QS>
struct qat_scheme_of<qat_conv2d<F, KH, KW, S, Pad, Act, Out, QS>> {
  using type = QS;
};
template <class Net>
struct qat_scheme;
template <class In, class... Ls>
struct qat_scheme<sequential<In, Ls...>> {
  template <class A, class B>
  using pick = std::conditional_t<std::is_void_v<A>, B, A>;
  template <class... S>
  struct first {
    using type = void;
  };
  template <class S0, class... S>
  struct first<S0, S...> {
    using type = pick<S0, typename first<S...>::type>;
  };
  using type = typename first<typename qat_scheme_of<Ls>::type...>::type;
  static_assert(((std::is_void_v<typename qat_scheme_of<Ls>::type> ||
                  std::is_same_v<typename qat_scheme_of<Ls>::type, type>) && ...),
                "convert_qat: the qat layers of a network share one scheme (full_integer or reduce_range<full_integer>)");
};
template <class Net>
using qat_scheme_t = std::conditional_t<std::is_void_v<typename qat_scheme<Net>::type>, full_integer,
                                        typename qat_scheme<Net>::type>;
}  // namespace quantization::detail

// (batch_norm layers folded first: quantization/fold.hpp). Scheme: the full-integer scheme the QAT
// network trains for (quantization::reduce_range<full_integer>: the kernels fake-quantized to [-64, 64]).
template <class Net, class Scheme = quantization::full_integer>
using qat_t = typename quantization::detail::qat_net<quantization::fold_t<Net>, Scheme>::type;

// A QAT model of m's network with m's kernels and biases (ranges at TFMOT's initial [-6, 6]); a
// network with batch_norm layers is folded first (fold_batch_norm: the moving statistics frozen
// into the weights of the layer before or after, which the QAT then trains).
// Range: quantization::full_range (the default) or quantization::reduce_range (quantize_model<
// quantization::reduce_range>(m): the QAT trains with the kernels fake-quantized to [-64, 64], and
// convert_qat gives reduce_range<full_integer> layers).
template <template <class> class Range = quantization::full_range, class Net, class P, class B>
auto quantize_model(const model<Net, P, B>& m) {
  if constexpr (quantization::has_batch_norm_v<Net>) {
    return quantize_model<Range>(fold_batch_norm(m));
  } else {
    model<qat_t<Net, Range<quantization::full_integer>>, precision::float32, B> q(m.seed());
    std::vector<variable_ref> src, dst;
    m.for_each_variable([&](const variable_ref& v) { src.push_back(v); });
    q.for_each_variable([&](const variable_ref& v) { dst.push_back(v); });
    for (const auto& d : dst)
      if (d.kind == role::parameter) {
        const auto& s = quantization::detail::find_var(src, d.layer, d.name);
        std::copy_n(reinterpret_cast<const float*>(s.data), d.extent, reinterpret_cast<float*>(d.data));
      }
    return q;
  }
}

namespace quantization::detail {
// A trained QAT model's ranges as convert takes them: per qat_dense / qat_conv2d layer, its learned
// input range, then the next such layer's input range (the last layer: its own output range).
template <class Net, class P, class B>
std::vector<std::pair<double, double>> qat_ranges(const model<Net, P, B>& q) {
  using layers = typename model<Net, P, B>::layers;
  std::vector<variable_ref> vs;
  q.for_each_variable([&](const variable_ref& v) { vs.push_back(v); });
  std::vector<std::pair<double, double>> ins, outs;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          using S = std::tuple_element_t<I, layers>;
          if constexpr (std::is_same_v<kind_t<S>, layer_kind::qat_dense> ||
                        std::is_same_v<kind_t<S>, layer_kind::qat_conv2d>) {
            ins.emplace_back(*data_of<float>(vs, I, "input_min"), *data_of<float>(vs, I, "input_max"));
            outs.emplace_back(*data_of<float>(vs, I, "output_min"), *data_of<float>(vs, I, "output_max"));
          }
        }(),
        ...);
  }(std::make_index_sequence<std::tuple_size_v<layers>>{});
  std::vector<std::pair<double, double>> ranges;
  for (std::size_t i = 0; i < ins.size(); ++i) {
    ranges.push_back(ins[i]);
    ranges.push_back(i + 1 < ins.size() ? ins[i + 1] : outs[i]);
  }
  return ranges;
}
}  // namespace quantization::detail

// A callback for quantization-aware training of a pruned model (TFMOT's pruning-preserving QAT):
// when training begins it records which weights of every parameter named "kernel" are exactly 0,
// and after every batch sets them to 0 again (after the optimizer's update), so that the trained
// QAT model keeps the pruned model's zeros and strips to the same blocks (convert_qat(q, w)).
// The weights are written through the model's for_each_variable (host backends).
struct preserve_sparsity {
  std::vector<std::vector<std::size_t>> zeros;  // per kernel, in for_each_variable order: the indices held at 0
  template <class Ctx>
  void on_train_begin(Ctx& ctx) {
    zeros.clear();
    ctx.model.for_each_variable([&](const variable_ref& v) {
      if (v.kind != role::parameter || v.name != "kernel" || v.element_bytes != sizeof(float)) return;
      const auto* w = reinterpret_cast<const float*>(v.data);
      auto& z = zeros.emplace_back();
      for (std::size_t i = 0; i < v.extent; ++i)
        if (w[i] == 0.0f) z.push_back(i);
    });
  }
  template <class Ctx>
  void on_batch_end(Ctx& ctx) {
    std::size_t k = 0;
    ctx.model.for_each_variable([&](const variable_ref& v) {
      if (v.kind != role::parameter || v.name != "kernel" || v.element_bytes != sizeof(float) || k >= zeros.size())
        return;
      auto* w = reinterpret_cast<float*>(v.data);
      for (std::size_t i : zeros[k++]) w[i] = 0.0f;
    });
  }
};

// The full-integer model of a trained QAT model: int8 kernels, int32 biases, and for each layer
// the input parameters of its learned input range and the output parameters of the next
// qat_dense's or qat_conv2d's input range (the last layer: its own output range).
template <class Net, class P, class B>
auto convert_qat(const model<Net, P, B>& q) {
  return quantization::detail::convert<quantization::detail::qat_scheme_t<Net>>(q, quantization::detail::qat_ranges(q));
}

// The same with the weights of the float model w instead of q's: w's network has a quantizable
// layer (dense, conv2d, sparse_dense_block) where q's has a qat_dense or qat_conv2d, in the same
// order (typically w = strip_pruning<layout::block<R, C>>(pruned) after q's trained weights were
// copied into `pruned`: the block-sparse int8 model with q's learned ranges, docs/quantization.md
// "Block-sparse int8"). Throws std::invalid_argument when the counts differ.
template <class Net, class P, class B, class WNet, class WP, class WB>
auto convert_qat(const model<Net, P, B>& q, const model<WNet, WP, WB>& w) {
  if constexpr (quantization::has_batch_norm_v<WNet>) {
    return convert_qat(q, fold_batch_norm(w));
  } else {
    using wl = typename model<WNet, WP, WB>::layers;
    const auto ranges = quantization::detail::qat_ranges(q);
    const std::size_t layers = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return (std::size_t(quantization::detail::converts_layer<std::tuple_element_t<I, wl>>()) + ... + 0);
    }(std::make_index_sequence<std::tuple_size_v<wl>>{});
    if (2 * layers != ranges.size())
      throw std::invalid_argument("convert_qat: the float model has " + std::to_string(layers) +
                                  " quantizable layers but the QAT model " + std::to_string(ranges.size() / 2) +
                                  " qat_dense / qat_conv2d layers");
    return quantization::detail::convert<quantization::detail::qat_scheme_t<Net>>(w, ranges);
  }
}

}  // namespace ctnn
