// ctnn/layers/lstm.hpp — lstm<Units, Options>: keras.layers.LSTM (Keras 3).
//
// Per step, z = x W + h R + b split in Keras' gate order i, f, c, o:
//   i = sigmoid(z_i), f = sigmoid(z_f), g = tanh(z_c), o = sigmoid(z_o)
//   c = f * c_prev + i * g,  h = o * tanh(c)      (h_0 = c_0 = 0)
// (in float, sigmoid and tanh within 3.1e-7 of the exact ones: fn::gate_sigmoid_fn, gate_tanh_fn)
// Variables: kernel [F, 4U] (glorot_uniform), recurrent_kernel [U, 4U] (orthogonal),
// bias [4U] (zeros; the forget gate's part 1 with unit_forget_bias, the default).
// Input shape<Steps, Features>; output shape<Units>, or shape<Steps, Units> with
// return_sequences (lstm<64, ctnn::return_sequences>, or recurrent_options{...}).
// The shared machinery (BPTT, caches, go_backwards): layers/recurrent.hpp; docs/sequences.md.
#pragma once
#include "recurrent.hpp"

namespace ctnn {

namespace layer_kind {
struct lstm {};
}  // namespace layer_kind

struct lstm_cell {
  static constexpr std::size_t gates = 4;
  static constexpr bool separate_recurrent_bias = false, keeps_cell_state = true;
  template <recurrent_options O, class T>
  static void init_bias(T* b, std::size_t u) {
    if constexpr (O.unit_forget_bias)
      for (std::size_t j = 0; j < u; ++j) b[u + j] = T(1);
  }
  // zi..zo: the whole pre-activation x W + b + h R on entry, the gate activations on exit
  struct forward_rule_summed {
    template <class V>
    CTNN_HOST_DEVICE void operator()(V& zi, V& zf, V& zg, V& zo, V cp, V& c, V& h) const {
      const V i = fn::gate_sigmoid_fn{}.forward(zi), f = fn::gate_sigmoid_fn{}.forward(zf);
      const V g = fn::gate_tanh_fn{}.forward(zg), o = fn::gate_sigmoid_fn{}.forward(zo);
      c = f * cp + i * g;
      h = o * fn::gate_tanh_fn{}.forward(c);
      zi = i, zf = f, zg = g, zo = o;
    }
  };
  // zi..zo: x W + b on entry, the gate activations on exit; ri..ro: h_prev R
  struct forward_rule {
    template <class V>
    CTNN_HOST_DEVICE void operator()(V& zi, V& zf, V& zg, V& zo, V ri, V rf, V rg, V ro, V cp, V& c, V& h) const {
      zi = zi + ri, zf = zf + rf, zg = zg + rg, zo = zo + ro;
      forward_rule_summed{}(zi, zf, zg, zo, cp, c, h);
    }
  };
  // gates in, dz out; dh: dL/dh_t in, 0 out (all of dL/dh_{t-1} goes through R); dc: dL/dc_t in, dL/dc_{t-1} out
  struct backward_rule {
    template <class V>
    CTNN_HOST_DEVICE void operator()(V& zi, V& zf, V& zg, V& zo, V cp, V c, V& dh, V& dc) const {
      const V i = zi, f = zf, g = zg, o = zo, tc = fn::gate_tanh_fn{}.forward(c);
      const V dct = dc + dh * o * (V(1) - tc * tc);
      zi = dct * g * i * (V(1) - i);
      zf = dct * cp * f * (V(1) - f);
      zg = dct * i * (V(1) - g * g);
      zo = dh * tc * o * (V(1) - o);
      dc = dct * f;
      dh = V(0);
    }
  };
  template <class O, class T, std::size_t U, class Map>
  static void forward_step(const Map& map, std::size_t n, T* z, T* rec, const T*, T* h, const T* cp, T* c) {
    constexpr std::size_t G = 4 * U;
    map(forward_rule{}, n, U, kernels::rows{z, G}, kernels::rows{z + U, G}, kernels::rows{z + 2 * U, G},
        kernels::rows{z + 3 * U, G}, kernels::rows<const T>{rec, G}, kernels::rows<const T>{rec + U, G},
        kernels::rows<const T>{rec + 2 * U, G}, kernels::rows<const T>{rec + 3 * U, G},
        kernels::rows<const T>{cp, U}, kernels::rows{c, U}, kernels::rows{h, U});
  }
  // the step where the backend sums the input projection into the step product (recurrent.hpp:
  // step_projection): z holds x W + b + h R
  static constexpr bool sums_step_projection = true;
  template <class O, class T, std::size_t U>
  static void forward_step_summed(std::size_t n, T* z, const T* cp, T* c, T* h) {
    constexpr std::size_t G = 4 * U;
    O::map_rows(forward_rule_summed{}, n, U, kernels::rows{z, G}, kernels::rows{z + U, G}, kernels::rows{z + 2 * U, G},
                kernels::rows{z + 3 * U, G}, kernels::rows<const T>{cp, U}, kernels::rows{c, U}, kernels::rows{h, U});
  }
  template <class O, class T, std::size_t U>
  static void backward_step(std::size_t n, T* z, T*, const T*, const T*, const T* cp, const T* c, T* dh, T* dc) {
    constexpr std::size_t G = 4 * U;
    O::map_rows(backward_rule{}, n, U, kernels::rows{z, G}, kernels::rows{z + U, G}, kernels::rows{z + 2 * U, G},
                kernels::rows{z + 3 * U, G}, kernels::rows<const T>{cp, U}, kernels::rows<const T>{c, U},
                kernels::rows{dh, U}, kernels::rows{dc, U});
  }
};

template <std::size_t Units, recurrent_options Opt = recurrent_options{}>
struct lstm {
  static_assert(Units > 0, "lstm: the number of units must be > 0");
  static_assert(Opt.reset_after, "lstm: reset_after is an option of gru only");
  using is_layer_spec = void;
  using kind = layer_kind::lstm;
  using cell = lstm_cell;
  static constexpr std::size_t units = Units;
  static constexpr recurrent_options options = Opt;
  template <recurrent_options O>
  using with_options = lstm<Units, O>;  // the same layer with other options (bidirectional's backward copy)
  static std::string name() {
    return detail::recurrent_name<detail::lstm_name, Units, Opt>(Opt.unit_forget_bias ? "" : ", unit_forget_bias = false");
  }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return detail::recurrent_check<detail::lstm_name, Units, In, Pos>();
  }
  template <Shape In, class P, class Backend>
  using bind = recurrent_layer<lstm, In, precision::policy_of_t<P>, Backend>;
};

}  // namespace ctnn
