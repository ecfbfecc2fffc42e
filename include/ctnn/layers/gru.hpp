// ctnn/layers/gru.hpp — gru<Units, Options>: keras.layers.GRU (Keras 3).
//
// Per step, with x W + b_in = [x_z, x_r, x_h] and h_prev R + b_rec = [r_z, r_r, r_h]
// (Keras' gate order z, r, h):
//   z = sigmoid(x_z + r_z), r = sigmoid(x_r + r_r), hh = tanh(x_h + r * r_h)
//   h = z * h_prev + (1 - z) * hh                   (h_0 = 0)
// (in float, sigmoid and tanh within 3.1e-7 of the exact ones: fn::gate_sigmoid_fn, gate_tanh_fn)
// Variables: kernel [F, 3U] (glorot_uniform), recurrent_kernel [U, 3U] (orthogonal),
// bias [2, 3U] (zeros; row 0 the input bias, row 1 the recurrent bias), as Keras 3's
// default reset_after = true. With {.reset_after = false} (gru_reset_before_cell):
//   [r_z, r_r] = h_prev R_zr, hh = tanh(x_h + (r * h_prev) R_h), bias [3U] (the input's only);
// its recurrent products cost twice reset_after's (recurrent.hpp), and it has no recurrent_dropout.
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
      const V z = fn::gate_sigmoid_fn{}.forward(xz + rz), r = fn::gate_sigmoid_fn{}.forward(xr + rr);
      const V hh = fn::gate_tanh_fn{}.forward(xh + r * rh);
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
  template <class O, class T, std::size_t U, class Map>
  static void forward_step(const Map& map, std::size_t n, T* x, T* rec, const T* hp, T* h, const T*, T*) {
    constexpr std::size_t G = 3 * U;
    map(forward_rule{}, n, U, kernels::rows{x, G}, kernels::rows{x + U, G}, kernels::rows{x + 2 * U, G},
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

// reset_after = false: the candidate reads (r ⊙ h_prev) R_h, so a step is two products with the
// rules between them (recurrent.hpp's reset_before path): forward_gates (z, r, q = r ⊙ h_prev),
// forward_candidate (hh, h); backward_candidate (dz_z, dz_h, dh z), backward_gates (dz_r from
// dq = dz_h R_h^T, dh += dq ⊙ r).
struct gru_reset_before_cell {
  static constexpr std::size_t gates = 3;
  static constexpr bool separate_recurrent_bias = false, keeps_cell_state = false, reset_before = true;
  template <recurrent_options, class T>
  static void init_bias(T*, std::size_t) {}
  // xz, xr: x W + b on entry, z and r on exit; rz, rr: h_prev R's blocks; q = r ⊙ h_prev
  struct gate_rule {
    template <class V>
    CTNN_HOST_DEVICE void operator()(V& xz, V& xr, V rz, V rr, V hp, V& q) const {
      const V z = fn::gate_sigmoid_fn{}.forward(xz + rz), r = fn::gate_sigmoid_fn{}.forward(xr + rr);
      q = r * hp;
      xz = z, xr = r;
    }
  };
  // z in; xh: x W + b on entry, hh on exit; rh: (r ⊙ h_prev) R's block h
  struct candidate_rule {
    template <class V>
    CTNN_HOST_DEVICE void operator()(V z, V& xh, V rh, V hp, V& h) const {
      const V hh = fn::gate_tanh_fn{}.forward(xh + rh);
      h = z * hp + (V(1) - z) * hh;
      xh = hh;
    }
  };
  // z, hh in, dz_z, dz_h out (dz_h also into eq); dh: dL/dh_t in, dh z out
  struct backward_candidate_rule {
    template <class V>
    CTNN_HOST_DEVICE void operator()(V& xz, V& xh, V hp, V& dh, V& eq) const {
      const V z = xz, hh = xh;
      const V dah = dh * (V(1) - z) * (V(1) - hh * hh);
      xz = dh * (hp - hh) * z * (V(1) - z);
      xh = dah, eq = dah;
      dh = dh * z;
    }
  };
  // r in, dz_r out; dq = dL/d(r ⊙ h_prev); dh += dq r
  struct backward_gate_rule {
    template <class V>
    CTNN_HOST_DEVICE void operator()(V& xr, V hp, V dq, V& dh) const {
      const V r = xr;
      xr = dq * hp * r * (V(1) - r);
      dh = dh + dq * r;
    }
  };
  template <class O, class T, std::size_t U>
  static void forward_gates(std::size_t n, T* x, const T* rec, const T* hp, T* q) {
    constexpr std::size_t G = 3 * U;
    O::map_rows(gate_rule{}, n, U, kernels::rows{x, G}, kernels::rows{x + U, G}, kernels::rows<const T>{rec, G},
                kernels::rows<const T>{rec + U, G}, kernels::rows<const T>{hp, U}, kernels::rows{q, U});
  }
  template <class O, class T, std::size_t U>
  static void forward_candidate(std::size_t n, T* x, const T* rec, const T* hp, T* h) {
    constexpr std::size_t G = 3 * U;
    O::map_rows(candidate_rule{}, n, U, kernels::rows<const T>{x, G}, kernels::rows{x + 2 * U, G},
                kernels::rows<const T>{rec + 2 * U, G}, kernels::rows<const T>{hp, U}, kernels::rows{h, U});
  }
  template <class O, class T, std::size_t U>
  static void backward_candidate(std::size_t n, T* x, const T* hp, T* dh, T* eq) {
    constexpr std::size_t G = 3 * U;
    O::map_rows(backward_candidate_rule{}, n, U, kernels::rows{x, G}, kernels::rows{x + 2 * U, G},
                kernels::rows<const T>{hp, U}, kernels::rows{dh, U}, kernels::rows{eq + 2 * U, G});
  }
  template <class O, class T, std::size_t U>
  static void backward_gates(std::size_t n, T* x, const T* hp, const T* dq, T* dh) {
    constexpr std::size_t G = 3 * U;
    O::map_rows(backward_gate_rule{}, n, U, kernels::rows{x + U, G}, kernels::rows<const T>{hp, U},
                kernels::rows<const T>{dq, U}, kernels::rows{dh, U});
  }
};

template <std::size_t Units, recurrent_options Opt = recurrent_options{}>
struct gru {
  static_assert(Units > 0, "gru: the number of units must be > 0");
  static_assert(Opt.reset_after || Opt.recurrent_dropout == 0,
                "gru: reset_after = false with recurrent_dropout is not supported (docs/sequences.md)");
  using is_layer_spec = void;
  using kind = layer_kind::gru;
  using cell = std::conditional_t<Opt.reset_after, gru_cell, gru_reset_before_cell>;
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
