// ctnn/layers/bidirectional.hpp — bidirectional<Layer, Merge = merge::concat>: keras.layers.Bidirectional (Keras 3).
//
// Layer is simple_rnn, lstm or gru (without go_backwards); bidirectional runs it (the forward
// layer) and a copy with go_backwards (the backward layer) on the same input <Steps, Features>
// and merges their outputs: merge::concat (the default: [y, y_rev] on the last axis), sum
// (y + y_rev), mul (y * y_rev) or ave ((y + y_rev) / 2). With return_sequences the backward
// layer's sequence is reversed back before merging (step t of both is input step t), and, as
// Keras forces zero_output_for_mask on both, a step masked by a step mask gives zeros.
// Output: Layer's output shape, its last axis doubled by concat. Variables: the forward layer's
// then the backward layer's, named forward_<name> and backward_<name> (forward_kernel, ...),
// the order of Keras' weights. Keras' merge_mode=None (two outputs) is not supported: a
// sequential layer has one output. docs/sequences.md ("Bidirectional").
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../core/backend.hpp"
#include "../kernels/rows.hpp"
#include "recurrent.hpp"

namespace ctnn {

namespace layer_kind {
struct bidirectional {};
}  // namespace layer_kind

// bidirectional's merge modes (Keras' merge_mode strings)
namespace merge {
struct concat {
  static constexpr const char* name = "concat";
};
struct sum {
  static constexpr const char* name = "sum";
};
struct mul {
  static constexpr const char* name = "mul";
};
struct ave {
  static constexpr const char* name = "ave";
};
}  // namespace merge

namespace detail {
template <class L>
concept recurrent_spec = requires {
  { L::options } -> std::convertible_to<recurrent_options>;
  typename L::template with_options<recurrent_options{}>;
};
template <class M>
inline constexpr bool is_merge_v = std::is_same_v<M, merge::concat> || std::is_same_v<M, merge::sum> ||
                                   std::is_same_v<M, merge::mul> || std::is_same_v<M, merge::ave>;

struct add2_fn {  // d = a + b
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& d, V a, V b) const { d = a + b; }
};
struct half_sum_fn {  // d = (a + b) / 2
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& d, V a, V b) const { d = (a + b) * V(0.5); }
};
struct half_fn {  // d = a / 2
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& d, V a) const { d = a * V(0.5); }
};

// "forward_" / "backward_" + each buffer's name, stored for the buffers' string_views
template <std::size_t N>
struct prefixed_names {
  std::array<std::array<char, 64>, N> text{};
  std::array<std::size_t, N> size{};
};
template <std::size_t N>
constexpr prefixed_names<N> prefix_names(std::string_view prefix, const std::array<buffer, N>& bs) {
  prefixed_names<N> p;
  for (std::size_t i = 0; i < N; ++i) {
    std::size_t k = 0;
    for (char c : prefix) p.text[i][k++] = c;
    for (char c : bs[i].name) p.text[i][k++] = c;
    p.size[i] = k;
  }
  return p;
}
}  // namespace detail

template <class Spec, Shape In, class P, class Backend>
struct bidirectional_layer;

template <class Layer, class Merge = merge::concat>
struct bidirectional {
  static_assert(detail::recurrent_spec<Layer>,
                "bidirectional: the wrapped layer must be a recurrent layer (simple_rnn, lstm or gru)");
  static_assert(detail::is_merge_v<Merge>, "bidirectional: the merge mode must be merge::concat, sum, mul or ave");
  using is_layer_spec = void;
  using kind = layer_kind::bidirectional;
  using layer = Layer;
  using merge_mode = Merge;
  static constexpr recurrent_options options = Layer::options;
  static_assert(!options.go_backwards,
                "bidirectional: the wrapped layer has go_backwards; bidirectional makes the backward copy itself (as Keras)");
  using backward_layer = typename Layer::template with_options<recurrent_options{
      options.return_sequences, true, options.unit_forget_bias, options.reset_after, options.dropout,
      options.recurrent_dropout}>;
  static std::string name() {
    return "bidirectional<" + Layer::name() + (std::is_same_v<Merge, merge::concat> ? "" : std::string(", ") + Merge::name) +
           ">";
  }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return Layer::template check<In, Pos>();
  }
  template <Shape In, class P, class Backend>
  using bind = bidirectional_layer<bidirectional, In, precision::policy_of_t<P>, Backend>;
};

// The bound layer: the forward and backward layers' buffers (renamed), then its own caches.
template <class Spec, Shape In, class P, class Backend>
struct bidirectional_layer {
  using kind = layer_kind::bidirectional;
  using spec = Spec;
  using Fwd = typename Spec::layer::template bind<In, P, Backend>;
  using Bwd = typename Spec::backward_layer::template bind<In, P, Backend>;
  using M = typename Spec::merge_mode;
  using T = typename P::compute_type;
  using O = ops<Backend>;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  static constexpr bool seq = Spec::options.return_sequences, concat = std::is_same_v<M, merge::concat>;
  static constexpr std::size_t S = Fwd::S, F = Fwd::F, U = Fwd::U;
  static constexpr std::size_t steps = seq ? S : 1, width = concat ? 2 * U : U;  // output rows per sample, their width
  using in_shape = In;
  using out_shape = std::conditional_t<seq, shape<S, width>, shape<width>>;
  static constexpr std::size_t Y = Fwd::out_shape::size;  // one direction's output per sample
  static constexpr bool draws_random = Fwd::draws_random;
  static constexpr std::size_t nf = Fwd::buffers.size(), nb = Bwd::buffers.size();
  static constexpr auto forward_names = detail::prefix_names("forward_", Fwd::buffers);
  static constexpr auto backward_names = detail::prefix_names("backward_", Bwd::buffers);
  // caches: both directions' outputs (the backward one in its reading order), the gradients
  // sent to each, the step mask widened to the units ([S, U] per sample), and the backward dx
  static constexpr auto buffers = [] {
    std::array<buffer, nf + nb + 4> b{};
    for (std::size_t i = 0; i < nf; ++i) {
      b[i] = Fwd::buffers[i];
      b[i].name = std::string_view(forward_names.text[i].data(), forward_names.size[i]);
    }
    for (std::size_t i = 0; i < nb; ++i) {
      b[nf + i] = Bwd::buffers[i];
      b[nf + i].name = std::string_view(backward_names.text[i].data(), backward_names.size[i]);
    }
    b[nf + nb] = buffer::cache("outputs", 2 * Y);
    b[nf + nb + 1] = buffer::cache("output_gradients", 2 * Y);
    b[nf + nb + 2] = buffer::cache("step_mask", seq ? S * U + U : 0);
    b[nf + nb + 3] = buffer::cache("backward_dx", S * F);
    return b;
  }();
  static constexpr std::size_t parameter_count = Fwd::parameter_count + Bwd::parameter_count;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static std::string name() { return Spec::name(); }

  static layer_slot<T> forward_slot(layer_slot<T> s) { return {s.params, s.grads, nullptr, s.cache}; }
  static layer_slot<T> backward_slot(layer_slot<T> s, std::size_t n) {
    return {s.params + Fwd::parameter_count, s.grads ? s.grads + Fwd::parameter_count : nullptr, nullptr,
            s.cache + n * Fwd::cache_per_sample};
  }
  struct views {
    T *yf, *yb, *df, *db, *mw, *ones, *dxb;
  };
  static views split(T* c, std::size_t n) {
    views v;
    v.yf = c + n * (Fwd::cache_per_sample + Bwd::cache_per_sample);
    v.yb = v.yf + n * Y;
    v.df = v.yb + n * Y;
    v.db = v.df + n * Y;
    v.mw = v.db + n * Y;
    v.ones = v.mw + (seq ? n * S * U : 0);
    v.dxb = v.ones + (seq ? n * U : 0);
    return v;
  }
  template <class X>
  static kernels::rows<X> rows_at(X* p, std::size_t stride) { return {p, stride}; }
  template <class X>
  static kernels::rows<const X> crows(X* p, std::size_t stride) { return {p, stride}; }

  static void init(layer_slot<T> s, rng& g) {
    Fwd::init(s, g);
    Bwd::init(backward_slot(s, 0), g);
  }

  // Row blocks of step t (t = 0 without return_sequences): each direction's output at input
  // step t, with the sample stride of its buffer
  static constexpr std::size_t fwd_at(std::size_t t) { return t * U; }
  static constexpr std::size_t bwd_at(std::size_t t) { return seq ? (S - 1 - t) * U : 0; }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    const std::size_t n = r.batch;
    if (n == 0) return;
    const views v = split(s.cache, n);
    Fwd::forward(forward_slot(s), x, v.yf, r);
    Bwd::forward(backward_slot(s, n), x, v.yb, r);
    const T* mask = seq ? Fwd::step_mask(r, v.df) : nullptr;  // df: scratch until backward
    if (mask) {  // [n, S] widened to [n, S, U] by a one-column GEMM with ones
      O::fill(v.ones, U, 1);
      O::template dense_forward<1, U>(mask, v.ones, static_cast<const T*>(nullptr), v.mw, S * n);
    }
    for (std::size_t t = 0; t < steps; ++t) {
      const auto a = crows(v.yf + fwd_at(t), Y), b = crows(v.yb + bwd_at(t), Y);
      T* out = y + t * width;
      if constexpr (concat) {
        O::map_rows(detail::assign_fn{}, n, U, rows_at(out, steps * width), a);
        O::map_rows(detail::assign_fn{}, n, U, rows_at(out + U, steps * width), b);
      } else if constexpr (std::is_same_v<M, merge::sum>) {
        O::map_rows(detail::add2_fn{}, n, U, rows_at(out, steps * width), a, b);
      } else if constexpr (std::is_same_v<M, merge::mul>) {
        O::map_rows(detail::mul_fn{}, n, U, rows_at(out, steps * width), a, b);
      } else {
        O::map_rows(detail::half_sum_fn{}, n, U, rows_at(out, steps * width), a, b);
      }
      if (mask)  // zero_output_for_mask: a masked step's output is 0 (m is 0 or 1)
        for (std::size_t h = 0; h < width; h += U)
          O::map_rows(detail::scale_by_fn{}, n, U, rows_at(out + h, steps * width), crows(v.mw + t * U, S * U));
    }
  }

  static void backward(layer_slot<T> s, const T* x, const T*, T* dy, T* dx, run_info r) {
    const std::size_t n = r.batch;
    if (n == 0) return;
    const views v = split(s.cache, n);
    const bool masked = seq && Fwd::has_step_mask(r);
    for (std::size_t t = 0; t < steps; ++t) {
      const auto d = crows(static_cast<const T*>(dy) + t * width, steps * width);
      const auto df = rows_at(v.df + fwd_at(t), Y), db = rows_at(v.db + bwd_at(t), Y);
      if constexpr (concat) {
        O::map_rows(detail::assign_fn{}, n, U, df, d);
        O::map_rows(detail::assign_fn{}, n, U, db, crows(static_cast<const T*>(dy) + t * width + U, steps * width));
      } else if constexpr (std::is_same_v<M, merge::sum>) {
        O::map_rows(detail::assign_fn{}, n, U, df, d);
        O::map_rows(detail::assign_fn{}, n, U, db, d);
      } else if constexpr (std::is_same_v<M, merge::mul>) {  // d(a b) = b da + a db
        O::map_rows(detail::mul_fn{}, n, U, df, d, crows(v.yb + bwd_at(t), Y));
        O::map_rows(detail::mul_fn{}, n, U, db, d, crows(v.yf + fwd_at(t), Y));
      } else {
        O::map_rows(detail::half_fn{}, n, U, df, d);
        O::map_rows(detail::half_fn{}, n, U, db, d);
      }
      if (masked) {  // a zeroed output passes no gradient
        O::map_rows(detail::scale_by_fn{}, n, U, df, crows(v.mw + t * U, S * U));
        O::map_rows(detail::scale_by_fn{}, n, U, db, crows(v.mw + t * U, S * U));
      }
    }
    Fwd::backward(forward_slot(s), x, v.yf, v.df, dx, r);
    Bwd::backward(backward_slot(s, n), x, v.yb, v.db, dx ? v.dxb : nullptr, r);
    if (dx) O::accumulate(dx, v.dxb, n * S * F);
  }
};

}  // namespace ctnn
