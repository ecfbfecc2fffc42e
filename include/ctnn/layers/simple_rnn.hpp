// ctnn/layers/simple_rnn.hpp — simple_rnn<Units, Activation = tanh, Options>:
// keras.layers.SimpleRNN (Keras 3).
//
// Per step h = activation(x W + h_prev R + b)   (h_0 = 0); the activation is any
// element-wise one with a rule (tanh, sigmoid, relu, leaky_relu; layers/activation.hpp).
// Variables: kernel [F, U] (glorot_uniform), recurrent_kernel [U, U] (orthogonal), bias [U] (zeros).
// Input shape<Steps, Features>; output shape<Units> or, with return_sequences, shape<Steps, Units>.
// The shared machinery (BPTT, caches, go_backwards): layers/recurrent.hpp; docs/sequences.md.
#pragma once
#include "activation.hpp"
#include "recurrent.hpp"

namespace ctnn {

namespace layer_kind {
struct simple_rnn {};
}  // namespace layer_kind

template <class Act>
struct simple_rnn_cell {
  using Rule = decltype(Act::template rule<float>());
  static constexpr std::size_t gates = 1;
  static constexpr bool separate_recurrent_bias = false, keeps_cell_state = false;
  template <recurrent_options, class T>
  static void init_bias(T*, std::size_t) {}
  struct forward_rule {
    Rule a;
    template <class V>
    CTNN_HOST_DEVICE void operator()(V z, V r, V& h) const { h = a.forward(z + r); }
  };
  struct backward_rule {
    Rule a;
    template <class V>
    CTNN_HOST_DEVICE void operator()(V& z, V h, V& dh) const {
      z = a.backward(h, dh);
      dh = V(0);
    }
  };
  template <class O, class T, std::size_t U, class Map>
  static void forward_step(const Map& map, std::size_t n, T* z, T* rec, const T*, T* h, const T*, T*) {
    map(forward_rule{Act::template rule<float>()}, n, U, kernels::rows<const T>{z, U}, kernels::rows<const T>{rec, U}, kernels::rows{h, U});
  }
  template <class O, class T, std::size_t U>
  static void backward_step(std::size_t n, T* z, T*, const T*, const T* h, const T*, const T*, T* dh, T*) {
    O::map_rows(backward_rule{Act::template rule<float>()}, n, U, kernels::rows{z, U}, kernels::rows<const T>{h, U}, kernels::rows{dh, U});
  }
};

template <std::size_t Units, Activation Act = tanh, recurrent_options Opt = recurrent_options{}>
struct simple_rnn {
  static_assert(Units > 0, "simple_rnn: the number of units must be > 0");
  static_assert(Opt.reset_after, "simple_rnn: reset_after is an option of gru only");
  static_assert(requires { Act::template rule<float>(); },
                "simple_rnn: the activation must be element-wise (tanh, sigmoid, relu, leaky_relu)");
  using is_layer_spec = void;
  using kind = layer_kind::simple_rnn;
  using activation = Act;
  using cell = simple_rnn_cell<Act>;
  static constexpr std::size_t units = Units;
  static constexpr recurrent_options options = Opt;
  template <recurrent_options O>
  using with_options = simple_rnn<Units, Act, O>;  // the same layer with other options (bidirectional's backward copy)
  static std::string name() {
    return detail::recurrent_name<detail::simple_rnn_name, Units, Opt>(std::is_same_v<Act, tanh> ? "" : ", " + Act::name());
  }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return detail::recurrent_check<detail::simple_rnn_name, Units, In, Pos>();
  }
  template <Shape In, class P, class Backend>
  using bind = recurrent_layer<simple_rnn, In, precision::policy_of_t<P>, Backend>;
};

}  // namespace ctnn
