// ctnn/layers/gru.hpp — gru<Units, Options>: keras.layers.GRU (Keras 3, reset_after = true).
//
// Per step, with x W + b_in = [x_z, x_r, x_h] and h_prev R + b_rec = [r_z, r_r, r_h]
// (Keras' gate order z, r, h):
//   z = sigmoid(x_z + r_z), r = sigmoid(x_r + r_r), hh = tanh(x_h + r * r_h)
//   h = z * h_prev + (1 - z) * hh                   (h_0 = 0)
// Variables: kernel [F, 3U] (glorot_uniform), recurrent_kernel [U, 3U] (orthogonal),
// bias [2, 3U] (zeros; row 0 the input bias, row 1 the recurrent bias), as Keras 3's
// default reset_after = true; reset_after = false is not supported yet.
// Input shape<Steps, Features>; output shape<Units> or, with return_sequences, shape<Steps, Units>.
// The shared machinery (BPTT, caches, go_backwards): layers/recurrent.hpp; docs/sequences.md.
#pragma once
#include "recurrent.hpp"

namespace ctnn {

namespace layer_kind {
struct gru {};
}  // namespace layer_kind

struct gru_cell {
  static constexpr std::size_t gates = 3;
  static constexpr bool separate_recurrent_bias = true, keeps_cell_state = false;
  template <recurrent_options, class T>
  static void init_bias(T*, std::size_t) {}
  // xz, xr, xh: x W + b_in on entry, z, r, hh on exit; rz, rr, rh: h_prev R + b_rec (kept)
  struct forward_rule {
    template <class V>
    CTNN_HOST_DEVICE void operator()(V& xz, V& xr, V& xh, V rz, V rr, V rh, V hp, V& h) const {
      const V z = fn::sigmoid_fn{}.forward(xz + rz), r = fn::sigmoid_fn{}.forward(xr + rr);
      const V hh = fn::tanh_fn{}.forward(xh + r * rh);
      h = z * hp + (V(1) - z) * hh;
      xz = z, xr = r, xh = hh;
    }
  };
  // z, r, hh in, dz of the input projection out; rz, rr, rh: dz of the recurrent product out;
  // dh: dL/dh_t in, its part dL/dh_prev = dh z (the direct path) out
  struct backward_rule {
    template <class V>
    CTNN_HOST_DEVICE void operator()(V& xz, V& xr, V& xh, V& rz, V& rr, V& rh, V hp, V& dh) const {
      const V z = xz, r = xr, hh = xh;
      const V dah = dh * (V(1) - z) * (V(1) - hh * hh);
      const V daz = dh * (hp - hh) * z * (V(1) - z);
      const V dar = dah * rh * r * (V(1) - r);
      xz = daz, xr = dar, xh = dah;
      rz = daz, rr = dar, rh = dah * r;
      dh = dh * z;
    }
  };
  template <class O, class T, std::size_t U>
  static void forward_step(std::size_t n, T* x, T* rec, const T* hp, T* h, const T*, T*) {
    constexpr std::size_t G = 3 * U;
    O::map_rows(forward_rule{}, n, U, kernels::rows{x, G}, kernels::rows{x + U, G}, kernels::rows{x + 2 * U, G},
                kernels::rows<const T>{rec, G}, kernels::rows<const T>{rec + U, G},
                kernels::rows<const T>{rec + 2 * U, G}, kernels::rows<const T>{hp, U}, kernels::rows{h, U});
  }
  template <class O, class T, std::size_t U>
  static void backward_step(std::size_t n, T* x, T* rec, const T* hp, const T*, const T*, const T*, T* dh, T*) {
    constexpr std::size_t G = 3 * U;
    O::map_rows(backward_rule{}, n, U, kernels::rows{x, G}, kernels::rows{x + U, G}, kernels::rows{x + 2 * U, G},
                kernels::rows{rec, G}, kernels::rows{rec + U, G}, kernels::rows{rec + 2 * U, G},
                kernels::rows<const T>{hp, U}, kernels::rows{dh, U});
  }
};

template <std::size_t Units, recurrent_options Opt = recurrent_options{}>
struct gru {
  static_assert(Units > 0, "gru: the number of units must be > 0");
  using is_layer_spec = void;
  using kind = layer_kind::gru;
  using cell = gru_cell;
  static constexpr std::size_t units = Units;
  static constexpr recurrent_options options = Opt;
  template <recurrent_options O>
  using with_options = gru<Units, O>;  // the same layer with other options (bidirectional's backward copy)
  static std::string name() { return detail::recurrent_name<detail::gru_name, Units, Opt>(); }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return detail::recurrent_check<detail::gru_name, Units, In, Pos>();
  }
  template <Shape In, class P, class Backend>
  using bind = recurrent_layer<gru, In, precision::policy_of_t<P>, Backend>;
};

}  // namespace ctnn
