// ctnn/layers/recurrent.hpp — what simple_rnn, lstm and gru share: their options,
// the shape check, and recurrent_layer<Spec, In, P, B>, one bound layer for the
// three cells (the cell, a small policy of the spec, holds the gate rules).
//
// Input shape<Steps, Features>; output shape<Units>, or shape<Steps, Units> with
// return_sequences (go_backwards: the steps are read last to first and a returned
// sequence is in that order, as Keras). Variables as Keras 3: kernel [F, G],
// recurrent_kernel [U, G], bias [G] (gru: [2, G]), G = gates * U, gates in Keras'
// order. Forward: the input projection of every step is one GEMM (Steps * batch
// rows, time-major), then per step the recurrent product h R (ops<B>::dense_forward)
// and the cell's rule over [batch, U] (ops<B>::map_rows; step 0 skips the product
// of h_0 = 0). Backward through time:
// per step the cell's backward rule and dh += dz R^T; then dW, dR and dx are each one
// GEMM over all steps. The caches (time-major input, gates, states) are in the plan.
// docs/sequences.md has the formulas and what is not supported yet.
#pragma once
#include <array>
#include <cstddef>
#include <string>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/compile_message.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../backends/cpu/ops.hpp"
#include "../kernels/rows.hpp"
#include "initializers.hpp"

namespace ctnn {

// Keras' RNN arguments that ctnn has (a structural value: lstm<64, {.return_sequences = true}>).
struct recurrent_options {
  bool return_sequences = false;
  bool go_backwards = false;
  bool unit_forget_bias = true;  // lstm: the forget gate's bias starts at 1
};
inline constexpr recurrent_options return_sequences{.return_sequences = true};
inline constexpr recurrent_options go_backwards{.go_backwards = true};

namespace diag {
// "layer 1 (lstm<32>): input has rank 1 (784); a recurrent layer takes shape<steps, features>"
template <std::size_t Pos, const char* Name, std::size_t U, class In>
constexpr message recurrent_rank_text() {
  message m;
  m << "layer " << Pos << " (" << Name << "<" << U << ">): input has rank " << In::rank << " (";
  m.dims(In::dims) << "); a recurrent layer takes shape<steps, features>";
  return m;
}
}  // namespace diag

namespace detail {
inline constexpr char simple_rnn_name[] = "simple_rnn", lstm_name[] = "lstm", gru_name[] = "gru";

template <const char* Name, std::size_t U, recurrent_options O>
std::string recurrent_name(std::string extra = {}) {
  std::string s = std::string(Name) + "<" + std::to_string(U) + extra;
  if (O.return_sequences) s += ", return_sequences";
  if (O.go_backwards) s += ", go_backwards";
  return s + ">";
}
template <const char* Name, std::size_t U, class In, std::size_t Pos>
constexpr bool recurrent_check() {
  return diag::require<In::rank == 2, &diag::recurrent_rank_text<Pos, Name, U, In>>();
}

// d = s (element-wise copy through map_rows)
struct assign_fn {
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& d, V s) const { d = s; }
};
struct add_fn {
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& d, V s) const { d = d + s; }
};
}  // namespace detail

// The bound recurrent layer. Cell (Spec::cell) gives: gates, separate_recurrent_bias,
// keeps_cell_state, init_bias, and the rules forward_rule / backward_rule with their
// arrays (see lstm.hpp, gru.hpp, simple_rnn.hpp).
template <class Spec, Shape In, class P, class Backend>
struct recurrent_layer {
  using kind = typename Spec::kind;
  using spec = Spec;
  using cell = typename Spec::cell;
  using T = typename P::compute_type;
  using O = ops<Backend>;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  static constexpr recurrent_options opt = Spec::options;
  static constexpr std::size_t S = In::rank == 2 ? In::dims[0] : 1, F = In::rank == 2 ? In::dims[1] : 1;
  static constexpr std::size_t U = Spec::units, G = cell::gates * U;
  static constexpr bool sep_bias = cell::separate_recurrent_bias, cells = cell::keeps_cell_state;
  using in_shape = In;
  using out_shape = std::conditional_t<opt.return_sequences, shape<S, U>, shape<U>>;
  static constexpr std::size_t kernel_count = F * G, recurrent_count = U * G, bias_count = sep_bias ? 2 * G : G;
  // caches, each batch * extent, time-major ([step][sample][...]): the input, the gates
  // (activations, then dz), the recurrent products (gru: per step; else one step), the
  // states h_0 = 0 .. h_S, the cell states c_0 = 0 .. c_S (lstm), and backward's scratch
  static constexpr std::size_t rec_steps = sep_bias ? S : 1;
  static constexpr auto buffers = [] {
    std::array<buffer, 9> b{buffer::parameter("kernel", {F, G}), buffer::parameter("recurrent_kernel", {U, G}),
                            sep_bias ? buffer::parameter("bias", {2, G}) : buffer::parameter("bias", {G}),
                            buffer::cache("inputs", S * F), buffer::cache("gates", S * G),
                            buffer::cache("recurrent", rec_steps * G), buffer::cache("states", (S + 1) * U),
                            buffer::cache("cell_states", cells ? (S + 1) * U : 0),
                            buffer::cache("scratch", 3 * U + G)};
    return b;
  }();
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static std::string name() { return Spec::name(); }

  static void init(layer_slot<T> s, rng& g) {
    glorot_uniform::fill(s.params, kernel_count, F, G, g);
    orthogonal::fill(s.params + kernel_count, recurrent_count, U, G, g);
    T* b = s.params + kernel_count + recurrent_count;
    for (std::size_t j = 0; j < bias_count; ++j) b[j] = T(0);
    cell::template init_bias<opt>(b, U);
  }

  struct views {
    T *xs, *zs, *rec, *hs, *cs, *dh, *dhr, *dc, *db;
  };
  static views split(T* c, std::size_t n) {
    views v;
    v.xs = c;
    v.zs = v.xs + n * S * F;
    v.rec = v.zs + n * S * G;
    v.hs = v.rec + n * rec_steps * G;
    v.cs = v.hs + n * (S + 1) * U;
    v.dh = v.cs + (cells ? n * (S + 1) * U : 0);
    v.dhr = v.dh + n * U;
    v.dc = v.dhr + n * U;
    v.db = v.dc + n * U;
    return v;
  }
  static constexpr std::size_t source_step(std::size_t t) { return opt.go_backwards ? S - 1 - t : t; }
  template <class X>
  static kernels::rows<X> rows_at(X* p, std::size_t stride) { return {p, stride}; }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    const std::size_t n = r.batch;
    if (n == 0) return;
    const views v = split(s.cache, n);
    const T *W = s.params, *R = W + kernel_count, *b = R + recurrent_count;
    // the input, time-major (steps reversed for go_backwards), then its projection for every step: one GEMM
    for (std::size_t t = 0; t < S; ++t)
      O::map_rows(detail::assign_fn{}, n, F, rows_at(v.xs + t * n * F, F), rows_at(x + source_step(t) * F, S * F));
    O::template dense_forward<F, G>(v.xs, W, b, v.zs, S * n);
    O::fill_zero(v.hs, n * U);
    if constexpr (cells) O::fill_zero(v.cs, n * U);
    for (std::size_t t = 0; t < S; ++t) {
      T* rec = v.rec + (sep_bias ? t * n * G : 0);
      if (t == 0) {  // h_0 = 0: the product is the recurrent bias (gru) or zero
        if constexpr (sep_bias) O::map_rows(detail::assign_fn{}, n, G, rows_at(rec, G), rows_at(b + G, 0));
        else O::fill_zero(rec, n * G);
      } else {
        O::template dense_forward<U, G>(v.hs + t * n * U, R, sep_bias ? b + G : static_cast<const T*>(nullptr), rec, n);
      }
      cell::template forward_step<O, T, U>(n, v.zs + t * n * G, rec, v.hs + t * n * U, v.hs + (t + 1) * n * U,
                                           cells ? v.cs + t * n * U : nullptr, cells ? v.cs + (t + 1) * n * U : nullptr);
    }
    if constexpr (opt.return_sequences) {
      for (std::size_t t = 0; t < S; ++t)
        O::map_rows(detail::assign_fn{}, n, U, rows_at(y + t * U, S * U), rows_at(v.hs + (t + 1) * n * U, U));
    } else {
      O::copy(v.hs + S * n * U, y, n * U);
    }
  }

  static void backward(layer_slot<T> s, const T*, const T*, T* dy, T* dx, run_info r) {
    const std::size_t n = r.batch;
    if (n == 0) return;
    const views v = split(s.cache, n);
    const T *W = s.params, *R = W + kernel_count;
    T *dW = s.grads, *dR = dW + kernel_count, *db = dR + recurrent_count;
    O::fill_zero(v.dh, n * U);
    if constexpr (cells) O::fill_zero(v.dc, n * U);
    if constexpr (!opt.return_sequences) O::copy(dy, v.dh, n * U);
    for (std::size_t t = S; t-- > 0;) {
      if constexpr (opt.return_sequences)
        O::map_rows(detail::add_fn{}, n, U, rows_at(v.dh, U), rows_at(static_cast<const T*>(dy) + t * U, S * U));
      T* rec = v.rec + (sep_bias ? t * n * G : 0);
      // dz of this step into gates (and, for gru, the recurrent part into rec); dh becomes
      // the part of dL/dh_{t-1} that does not go through R
      cell::template backward_step<O, T, U>(n, v.zs + t * n * G, rec, v.hs + t * n * U, v.hs + (t + 1) * n * U,
                                            cells ? v.cs + t * n * U : nullptr, cells ? v.cs + (t + 1) * n * U : nullptr,
                                            v.dh, cells ? v.dc : nullptr);
      if (t > 0) {
        O::template dense_backward_input<U, G>(sep_bias ? rec : v.zs + t * n * G, R, v.dhr, n);
        O::accumulate(v.dh, v.dhr, n * U);
      }
    }
    // every step at once: dW = xs^T dz, dR = h_{t-1}^T dz_rec, dx = dz W^T
    O::template dense_backward_weights<F, G>(v.xs, v.zs, dW, db, S * n);
    if constexpr (sep_bias)  // every step: the column sums are the recurrent bias' gradient
      O::template dense_backward_weights<U, G>(v.hs, v.rec, dR, db + G, S * n);
    else if constexpr (S == 1)
      O::fill_zero(dR, recurrent_count);
    else  // steps 1 .. S-1 (h_0 = 0 adds nothing)
      O::template dense_backward_weights<U, G>(v.hs + n * U, v.zs + n * G, dR, v.db, (S - 1) * n);
    if (dx) {
      O::template dense_backward_input<F, G>(v.zs, W, v.xs, S * n);
      for (std::size_t t = 0; t < S; ++t)
        O::map_rows(detail::assign_fn{}, n, F, rows_at(dx + source_step(t) * F, S * F),
                    rows_at(static_cast<const T*>(v.xs) + t * n * F, F));
    }
  }
};

}  // namespace ctnn
