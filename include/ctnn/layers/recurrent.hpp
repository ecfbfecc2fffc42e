// ctnn/layers/recurrent.hpp — what simple_rnn, lstm and gru share: their options,
// the shape check, and recurrent_layer<Spec, In, P, B>, one bound layer for the
// three cells (the cell, a small policy of the spec, holds the gate rules).
//
// Input shape<Steps, Features>; output shape<Units>, or shape<Steps, Units> with
// return_sequences (go_backwards: the steps are read last to first and a returned
// sequence is in that order, as Keras). Variables as Keras 3: kernel [F, G],
// recurrent_kernel [U, G], bias [G] (gru: [2, G]; gru with reset_after = false: [G]),
// G = gates * U, gates in Keras' order. Forward: the input projection of every step is
// one GEMM (Steps * batch rows, time-major), then per step the recurrent product h R
// (ops<B>::dense_forward_packed over R packed once per forward pass, ops<B>::pack_weights)
// and the cell's rule over [batch, U] (ops<B>::map_rows; step 0 skips the product of
// h_0 = 0); at batch 1 both in one pass by blocks of units where the backend has it
// (ops<cpu>::recurrent_row: the rule reads each block's products while they are in L1; every
// other step reads R's rows last to first, to start on those the step before left in L1). A cell
// with a rule over the summed pre-activation (lstm) on a backend that sums it (ops<cpu>::
// dense_forward_packed_sum; from packed_rows rows, without dropout): no projection GEMM, each
// step's z = x_t W + b + h R in one product over W and R packed once a pass (step_projection).
// Every step reads and writes only its rows' states, so where the backend splits the loops
// (ops<cpu>::recurrent_row_blocks: float and double, at least 2 x 16 rows and two threads) each
// thread runs the whole time loop over its block of rows, one pool run a pass rather than one a
// step product (the same bits whatever the thread count).
// Backward through time: R packed once for dz R^T (pack_weights_transposed), then per step
// the cell's backward rule and dh += dz R^T (dense_backward_input_packed, or where the backend
// adds in the product's tiles, ops<cpu>::dense_backward_input_packed_add); then dW, dR and
// dx are each one GEMM over all steps (where the backend has ops<cpu>::step_weights_gradient,
// step_weights: dW, dR and db summed a step at a time, last step first, right after each step's
// dz, in the time loop where it runs as one block, else after it). The caches (time-major input, gates,
// states, the packed R) are in the plan.
// gru with reset_after = false (a cell with reset_before): per step h R gives z and r, then
// (r ⊙ h) R the candidate's part; both products run over the whole [U, G] recurrent kernel
// (ops<B> has no product on a column block), and dR is one GEMM over the stacked rows
// [r ⊙ h; h] against [dz_h only; dz_z, dz_r].
// dropout / recurrent_dropout (training only, Keras 3's DropoutRNNCell): masks drawn from
// run_info::gen once per forward (input masks [batch, F], then state masks [batch, U], one
// uniform per value), reused at every step; with recurrent_dropout > 0 a gated cell uses
// one mask per gate for both (Keras' implementation 1), done as `gates` row blocks of the
// same GEMMs. docs/sequences.md has the formulas and what is not supported yet.
#pragma once
#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "../backends/cpu/ops.hpp"  // the plan reads ops<B>::packed_size (the packed recurrent kernel)
#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/format.hpp"
#include "../core/compile_message.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../backends/cpu/ops.hpp"  // the plan reads ops<B>::packed_size (the packed recurrent kernel)
#include "../core/backend.hpp"
#include "../kernels/functors.hpp"
#include "../kernels/rows.hpp"
#include "initializers.hpp"

namespace ctnn {

// Keras' RNN arguments that ctnn has (a structural value: lstm<64, {.return_sequences = true}>).
struct recurrent_options {
  bool return_sequences = false;
  bool go_backwards = false;
  bool unit_forget_bias = true;  // lstm: the forget gate's bias starts at 1
  bool reset_after = true;       // gru: the reset gate applied after the recurrent product (Keras 3's default)
  double dropout = 0;            // the fraction of the inputs dropped (training), in [0, 1)
  double recurrent_dropout = 0;  // the fraction of the state dropped before h R (training), in [0, 1)
  // The four flags come first, before the doubles: with a bool after them (padding inside and
  // at the end) clang 19 read the doubles of a template argument 8 bytes off (dropout 0.2 read
  // as 0.3, the recurrent dropout as 5e-324; tests/layers/test_recurrent.cpp's names found it).
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
  if (O.dropout > 0) s += ", dropout = " + format_number(O.dropout);
  if (O.recurrent_dropout > 0) s += ", recurrent_dropout = " + format_number(O.recurrent_dropout);
  if (!O.reset_after) s += ", reset_after = false";
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
struct mul_fn {  // d = a * b
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& d, V a, V b) const { d = a * b; }
};
struct scale_by_fn {  // d *= m
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& d, V m) const { d = d * m; }
};
struct add_product_fn {  // d += a * b
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& d, V a, V b) const { d = d + a * b; }
};
struct keep_masked_fn {  // a masked step (m = 0) keeps the previous state: d = m ? d : prev
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& d, V prev, V m) const {
    using fn::select;
    d = select(m != V(0), d, prev);
  }
};
struct split_masked_fn {  // d (dL/d state) to the step's cell where m = 1, else to the previous state (pass)
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& d, V& pass, V m) const {
    using fn::select;
    pass = select(m != V(0), V(0), d);
    d = select(m != V(0), d, V(0));
  }
};
// How a cell's forward_step runs its rule over [rows, cols]: ops<B>::map_rows.
template <class O>
struct map_rows_of {
  template <class F, class... P>
  void operator()(const F& f, std::size_t rows, std::size_t cols, kernels::rows<P>... a) const {
    O::map_rows(f, rows, cols, a...);
  }
};
// A backend whose ops run one row's recurrent product and a cell's rule together (ops<cpu>::recurrent_row).
template <class O>
inline constexpr bool fuses_recurrent_row = requires { requires O::fused_recurrent_row; };
// A backend whose ops split a recurrent layer's time loop by rows of the batch (ops<cpu>::recurrent_row_blocks).
template <class O>
inline constexpr bool splits_recurrent_rows = requires { requires O::split_recurrent_rows; };
// A backend whose ops have dense_backward_weights_in_place (ops<cpu>: the weights gradient without packing).
template <class O, class T>
inline constexpr bool has_weights_in_place = requires(const T* x, T* w) {
  O::template dense_backward_weights_in_place<4, 4>(x, x, w, w, std::size_t(1));
};
// A backend whose ops sum a step's input projection into its step product (ops<cpu>::dense_forward_packed_sum).
template <class O>
inline constexpr bool fuses_step_projection = requires { requires O::fused_step_projection; };
// A backend whose ops add dy W^T into dx over a packing (ops<cpu>::dense_backward_input_packed_add).
template <class O>
inline constexpr bool adds_input_packed = requires { requires O::fused_packed_add; };
// A backend whose ops sum one step's weight gradients while its dz is in cache (ops<cpu>::step_weights_gradient).
template <class O>
inline constexpr bool steps_weight_gradients = requires { requires O::step_weight_gradients; };
// A cell with a rule over that summed pre-activation (lstm_cell::forward_step_summed).
template <class Cell>
inline constexpr bool sums_step_projection = requires { requires Cell::sums_step_projection; };
// A cell whose candidate reads the product of the reset state, (r ⊙ h) R (gru's reset_after = false).
template <class Cell>
inline constexpr bool resets_before_product = requires { requires Cell::reset_before; };
}  // namespace detail

// The bound recurrent layer. Cell (Spec::cell) gives: gates, separate_recurrent_bias,
// keeps_cell_state, init_bias, and the rules forward_rule / backward_rule with their
// arrays (see lstm.hpp, gru.hpp, simple_rnn.hpp; forward_step(map, ...) runs its rule through
// map: ops<B>::map_rows, or at batch 1 recurrent_row's product and rule together); a cell with
// reset_before = true gives forward_gates / forward_candidate / backward_candidate /
// backward_gates instead (gru.hpp).
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
  // batch 1 without recurrent dropout: h R and the cell's rule in one pass by blocks of units
  static constexpr bool row_step = detail::fuses_recurrent_row<O> && (std::is_same_v<T, float> || std::is_same_v<T, double>);
  // the time loops by blocks of rows of the batch, one per thread (ops<cpu>::recurrent_row_blocks)
  static constexpr bool row_blocks =
      detail::splits_recurrent_rows<O> && (std::is_same_v<T, float> || std::is_same_v<T, double>);
  static constexpr std::size_t U = Spec::units, G = cell::gates * U;
  static constexpr bool sep_bias = cell::separate_recurrent_bias, cells = cell::keeps_cell_state;
  static constexpr bool reset_before = detail::resets_before_product<cell>;
  // each step's input projection summed into its step product (ops<cpu>::dense_forward_packed_sum over W
  // and R packed once a pass: z_t = x_t W + b + h R written once), where the projection of every step
  // was one GEMM before the loop; at batch >= packed_rows without dropout (forward_rows: projected)
  static constexpr bool step_projection = detail::fuses_step_projection<O> && detail::sums_step_projection<cell> &&
                                          (std::is_same_v<T, float> || std::is_same_v<T, double>);
  // dW, dR and db summed step by step, last step first, while each step's dz is in cache
  // (ops<cpu>::step_weights_gradient: inside backward's time loop where it runs as one block, else
  // after it; the same bits), where they were products over every step's rows after the loop; for a
  // cell whose dz serves both kernels (not gru's separate recurrent part, not reset_before), at batch
  // >= O::step_weights_rows without dropout (backward: per_step)
  static constexpr bool step_weights = detail::steps_weight_gradients<O> && !sep_bias && !reset_before &&
                                       (std::is_same_v<T, float> || std::is_same_v<T, double>);
  static_assert(opt.dropout >= 0 && opt.dropout < 1 && opt.recurrent_dropout >= 0 && opt.recurrent_dropout < 1,
                "recurrent layer: dropout and recurrent_dropout must be in [0, 1)");
  // dropout: the input masks (nin of them, one per gate with recurrent_dropout, as Keras'
  // implementation 1) and the state masks (nrec); each mask a row block of the GEMMs
  static constexpr bool drop_in = opt.dropout > 0, drop_rec = opt.recurrent_dropout > 0;
  static constexpr bool draws_random = drop_in || drop_rec;  // a training pass draws masks
  static constexpr std::size_t per_gate = drop_rec ? cell::gates : 1;
  static constexpr std::size_t nin = drop_in ? per_gate : 1, in_masks = drop_in ? nin : 0, nrec = drop_rec ? per_gate : 0;
  // > 1: the expanded [blocks * S, G] dz (reset_before: the candidate's dz, then the gates')
  static constexpr std::size_t blocks = reset_before ? 2 : nin > nrec ? nin : nrec;
  using in_shape = In;
  using out_shape = std::conditional_t<opt.return_sequences, shape<S, U>, shape<U>>;
  static constexpr std::size_t kernel_count = F * G, recurrent_count = U * G, bias_count = sep_bias ? 2 * G : G;
  // caches, each batch * extent, time-major ([step][sample][...]): the input (nin masked
  // copies), the gates (activations, then dz), the recurrent products (gru: per step; else
  // one step), the reset states r ⊙ h_0 .. r ⊙ h_{S-1} (reset_before), the states
  // h_0 = 0 .. h_S, the cell states c_0 = 0 .. c_S (lstm), the masked states (nrec copies
  // of h_0 .. h_{S-1}), the masks, the expanded dz, and backward's scratch
  static constexpr std::size_t rec_steps = sep_bias ? S : 1;
  // R packed for the backend's step products (ops<B>::pack_weights: once per forward, then its
  // transposed packing once per backward, in the same values); a packing serves batches of at
  // least O::packed_rows, so that many samples hold it
  static constexpr std::size_t packed_count = O::template packed_size<U, G, T>;
  static constexpr std::size_t packed_per_sample = (packed_count + O::packed_rows - 1) / O::packed_rows;
  // W packed for the step products that sum the projection (step_projection)
  static constexpr std::size_t packed_kernel_per_sample = [] {
    if constexpr (step_projection) return (O::template packed_size<F, G, T> + O::packed_rows - 1) / O::packed_rows;
    else return std::size_t(0);
  }();
  static constexpr auto buffers = [] {
    std::array<buffer, 16> b{buffer::parameter("kernel", {F, G}), buffer::parameter("recurrent_kernel", {U, G}),
                             sep_bias ? buffer::parameter("bias", {2, G}) : buffer::parameter("bias", {G}),
                             buffer::cache("inputs", nin * S * F), buffer::cache("gates", S * G),
                             buffer::cache("recurrent", rec_steps * G),
                             buffer::cache("reset_states", reset_before ? S * U : 0),
                             buffer::cache("states", (S + 1) * U),
                             buffer::cache("cell_states", cells ? (S + 1) * U : 0),
                             buffer::cache("masked_states", nrec * S * U),
                             buffer::cache("dropout_masks", in_masks * F + nrec * U),
                             buffer::cache("expanded", blocks > 1 ? blocks * S * G : 0),
                             buffer::cache("scratch", 3 * U + (nrec > 0 ? 2 * G : 0)),
                             buffer::cache("step_mask", S + S * U + 3 * U),
                             buffer::cache("packed_recurrent", packed_per_sample),
                             buffer::cache("packed_kernel", packed_kernel_per_sample)};
    return b;
  }();
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  // what prune_low_magnitude prunes (pruning/prune.hpp), as TFMOT's RNN cells: not the bias
  static constexpr std::array<std::string_view, 2> prunable_weights{"kernel", "recurrent_kernel"};
  static std::string name() { return Spec::name(); }

  static void init(layer_slot<T> s, rng& g) {
    glorot_uniform::fill(s.params, kernel_count, F, G, g);
    orthogonal::fill(s.params + kernel_count, recurrent_count, U, G, g);
    T* b = s.params + kernel_count + recurrent_count;
    for (std::size_t j = 0; j < bias_count; ++j) b[j] = T(0);
    cell::template init_bias<opt>(b, U);
  }

  struct views {
    T *xs, *zs, *rec, *qs, *hs, *cs, *mh, *min, *mrec, *ex, *dh, *dhr, *dc, *tmp, *tdz;
    T *mt, *mw, *ones, *dpass, *dcpass;  // the step mask: time-major [S, n], widened [S, n, U]; backward's passes
    T* pk;                               // R packed (n >= O::packed_rows)
    T* pkw;                              // W packed (step_projection, n >= O::packed_rows)
  };
  static views split(T* c, std::size_t n) {
    views v;
    v.xs = c;
    v.zs = v.xs + n * nin * S * F;
    v.rec = v.zs + n * S * G;
    v.qs = v.rec + n * rec_steps * G;  // (just before hs: backward's stacked rows [qs; hs])
    v.hs = v.qs + (reset_before ? n * S * U : 0);
    v.cs = v.hs + n * (S + 1) * U;
    v.mh = v.cs + (cells ? n * (S + 1) * U : 0);
    v.min = v.mh + n * nrec * S * U;
    v.mrec = v.min + n * in_masks * F;
    v.ex = v.mrec + n * nrec * U;
    v.dh = v.ex + (blocks > 1 ? n * blocks * S * G : 0);
    v.dhr = v.dh + n * U;
    v.dc = v.dhr + n * U;
    v.tmp = v.dc + n * U;
    v.tdz = v.tmp + (nrec > 0 ? n * G : 0);
    v.mt = v.tdz + (nrec > 0 ? n * G : 0);
    v.mw = v.mt + n * S;
    v.ones = v.mw + n * S * U;
    v.dpass = v.ones + n * U;
    v.dcpass = v.dpass + n * U;
    v.pk = v.dcpass + n * U;
    v.pkw = v.pk + n * packed_per_sample;
    return v;
  }
  static constexpr std::size_t source_step(std::size_t t) { return opt.go_backwards ? S - 1 - t : t; }
  template <class X>
  static kernels::rows<X> rows_at(X* p, std::size_t stride) { return {p, stride}; }
  template <class X>
  static kernels::rows<const X> crows(X* p, std::size_t stride) { return {p, stride}; }
  // masks used in this pass: only in training
  static bool dropping(const run_info& r) { return draws_random && r.training; }
  // Whether a step mask applies to this layer (run_info::mask with S steps, of T or, for a
  // 16-bit T, of float: keep_float32<embedding<V, D, true>> before it).
  static bool has_step_mask(const run_info& r) {
    if (!r.mask || !r.mask->data || r.mask->steps != S) return false;
    if (r.mask->value_bytes != sizeof(T) && !(is_half_v<T> && r.mask->value_bytes == sizeof(float)))
      throw std::invalid_argument(name() + ": the step mask comes from a layer of another compute type");
    return true;
  }
  // That mask as T values ([batch, S]), or null; a float mask is converted into scratch (batch * S values).
  static const T* step_mask(const run_info& r, T* scratch) {
    if (!has_step_mask(r)) return nullptr;
    if (r.mask->value_bytes == sizeof(T)) return static_cast<const T*>(r.mask->data);
    O::convert(static_cast<const float*>(r.mask->data), scratch, r.batch * S);
    return scratch;
  }
  // dst [rows, G] = src's gate block k, zeros elsewhere
  static void select_block(T* dst, const T* src, std::size_t k, std::size_t rows) {
    O::fill_zero(dst, rows * G);
    O::map_rows(detail::assign_fn{}, rows, U, rows_at(dst + k * U, G), rows_at(src + k * U, G));
  }

  // f(r0, m) over blocks of the batch's n rows: one per thread where the backend splits the time
  // loops (row_blocks), else f(0, n)
  template <class F>
  static void for_rows(std::size_t n, F&& f) {
    if constexpr (row_blocks) O::recurrent_row_blocks(n, f);
    else f(std::size_t(0), n);
  }
  // forward's time loop over rows [r0, r0 + m) of the batch of n (caches time-major: step t's row r
  // at (t n + r) times the row's extent): every step reads only these rows' states and writes only
  // theirs, so blocks of rows run apart, one task each (for_rows)
  // (projected: each step's z = x_t W + b + h R in one product, step_projection)
  static void forward_rows(const views& v, const T* W, const T* R, const T* b, std::size_t n, std::size_t nr,
                           bool projected, bool masked, std::size_t r0, std::size_t m) {
    const T* rb = sep_bias ? b + G : static_cast<const T*>(nullptr);
    auto at = [&](T* p, std::size_t t, std::size_t w) { return p + (t * n + r0) * w; };
    for (std::size_t t = 0; t < S; ++t) {
      T* rec = v.rec + ((sep_bias ? t * n : 0) + r0) * G;
      const T* h = at(v.hs, t, U);
      if constexpr (reset_before) {  // h R for z and r, then (r ⊙ h) R for the candidate (h_0 = 0: both 0)
        T *z = at(v.zs, t, G), *q = at(v.qs, t, U);
        if (t == 0) O::fill_zero(rec, m * G);
        else O::template dense_forward_packed<U, G>(h, R, v.pk, static_cast<const T*>(nullptr), rec, m);
        cell::template forward_gates<O, T, U>(m, z, rec, h, q);
        if (t > 0) O::template dense_forward_packed<U, G>(q, R, v.pk, static_cast<const T*>(nullptr), rec, m);
        cell::template forward_candidate<O, T, U>(m, z, rec, h, at(v.hs, t + 1, U));
      } else if (projected) {  // the step's whole product below, with its rule
      } else if (t == 0) {  // h_0 = 0: the product is the recurrent bias (gru) or zero
        if constexpr (sep_bias) O::map_rows(detail::assign_fn{}, m, G, rows_at(rec, G), rows_at(b + G, 0));
        else O::fill_zero(rec, m * G);
      } else if (nr == 0) {
        if (!(row_step && n == 1)) O::template dense_forward_packed<U, G>(h, R, v.pk, rb, rec, m);  // else below
      } else {  // (h ⊙ m_k) R, gate block k from copy k
        for (std::size_t k = 0; k < nr; ++k) {
          T* hm = v.mh + ((k * S + t) * n + r0) * U;
          O::map_rows(detail::mul_fn{}, m, U, rows_at(hm, U), crows(h, U), crows(v.mrec + (k * n + r0) * U, U));
          if (nr == 1) {
            O::template dense_forward_packed<U, G>(hm, R, v.pk, rb, rec, m);
          } else {
            T* tmp = v.tmp + r0 * G;  // (v.tmp holds n G values only with recurrent dropout)
            O::template dense_forward_packed<U, G>(hm, R, v.pk, rb, tmp, m);
            O::map_rows(detail::assign_fn{}, m, U, rows_at(rec + k * U, G), crows(tmp + k * U, G));
          }
        }
      }
      if constexpr (!reset_before) {
        T *z = at(v.zs, t, G), *hn = at(v.hs, t + 1, U);
        T *cp = cells ? at(v.cs, t, U) : nullptr, *c = cells ? at(v.cs, t + 1, U) : nullptr;
        bool fused = false;
        if constexpr (step_projection) {
          if (projected) {  // z = x_t W + b + h R (h_0 = 0: x_t W + b), then the rule over z
            O::template dense_forward_packed_sum<F, U, G>(at(v.xs, t, F), W, v.pkw, t > 0 ? h : nullptr, R, v.pk, b,
                                                         z, m);
            cell::template forward_step_summed<O, T, U>(m, z, cp, c, hn);
            fused = true;
          }
        }
        if constexpr (row_step) {
          if (n == 1 && t > 0 && nr == 0) {  // rec = h R (+ rb) and the rule, block by block of units
            cell::template forward_step<O, T, U>(
                [&](const auto& f, std::size_t, std::size_t, auto... a) {
                  O::template recurrent_row<U, U, cell::gates>(f, h, R, rb, rec, t % 2 == 0, a.data...);
                },
                m, z, rec, h, hn, cp, c);
            fused = true;
          }
        }
        if (!fused) cell::template forward_step<O, T, U>(detail::map_rows_of<O>{}, m, z, rec, h, hn, cp, c);
      }
      if (masked) {  // masked steps carry h (and c) forward; a returned sequence repeats the last output
        O::map_rows(detail::keep_masked_fn{}, m, U, rows_at(at(v.hs, t + 1, U), U), crows(h, U),
                    crows(at(v.mw, t, U), U));
        if constexpr (cells)
          O::map_rows(detail::keep_masked_fn{}, m, U, rows_at(at(v.cs, t + 1, U), U), crows(at(v.cs, t, U), U),
                      crows(at(v.mw, t, U), U));
      }
    }
  }
  // backward's time loop (through time, last step first) over rows [r0, r0 + m) of the batch of n,
  // as forward_rows: dz of every step into the gates (and rec, ex), dL/dh and dL/dc in dh, dc
  // (weights: dW, dR, db summed here step by step, step_weights, when the block is the whole batch)
  static void backward_rows(const views& v, const T* R, const T* dy, std::size_t n, std::size_t nr, bool masked,
                            std::size_t r0, std::size_t m, T* dW = nullptr, T* dR = nullptr, T* db = nullptr) {
    auto at = [&](T* p, std::size_t t, std::size_t w) { return p + (t * n + r0) * w; };
    T *dh = v.dh + r0 * U, *dhr = v.dhr + r0 * U, *dc = v.dc + r0 * U;
    T *dpass = v.dpass + r0 * U, *dcpass = v.dcpass + r0 * U;
    for (std::size_t t = S; t-- > 0;) {
      if constexpr (opt.return_sequences)
        O::map_rows(detail::add_fn{}, m, U, rows_at(dh, U), crows(dy + r0 * S * U + t * U, S * U));
      T* rec = v.rec + ((sep_bias ? t * n : 0) + r0) * G;
      if (masked) {  // a masked step: dL/dh_t (and dL/dc_t) pass to the previous state, the cell gets 0
        O::map_rows(detail::split_masked_fn{}, m, U, rows_at(dh, U), rows_at(dpass, U), crows(at(v.mw, t, U), U));
        if constexpr (cells)
          O::map_rows(detail::split_masked_fn{}, m, U, rows_at(dc, U), rows_at(dcpass, U), crows(at(v.mw, t, U), U));
      }
      if constexpr (reset_before) {
        // dz of the step into gates; ex's two row blocks get [0, 0, dz_h] (against r ⊙ h_{t-1}) and
        // [dz_z, dz_r, 0] (against h_{t-1}); dh becomes dh z + (dz_h R_h^T) ⊙ r, the rest below
        T *z = at(v.zs, t, G), *eq = at(v.ex, t, G), *eh = at(v.ex, S + t, G);
        const T* hp = at(v.hs, t, U);
        O::fill_zero(eq, m * G);
        cell::template backward_candidate<O, T, U>(m, z, hp, dh, eq);
        if (t == 0) O::fill_zero(dhr, m * U);  // h_0 = 0: dz_r is 0 whatever dL/d(r ⊙ h_0)
        else O::template dense_backward_input_packed<U, G>(eq, R, v.pk, dhr, m);
        cell::template backward_gates<O, T, U>(m, z, hp, dhr, dh);
        O::fill_zero(eh, m * G);
        O::map_rows(detail::assign_fn{}, m, 2 * U, rows_at(eh, G), crows(z, G));
      } else {
        // dz of this step into gates (and, for gru, the recurrent part into rec); dh becomes
        // the part of dL/dh_{t-1} that does not go through R
        cell::template backward_step<O, T, U>(m, at(v.zs, t, G), rec, at(v.hs, t, U), at(v.hs, t + 1, U),
                                              cells ? at(v.cs, t, U) : nullptr, cells ? at(v.cs, t + 1, U) : nullptr,
                                              dh, cells ? dc : nullptr);
      }
      if (masked) {
        O::accumulate(dh, dpass, m * U);
        if constexpr (cells) O::accumulate(dc, dcpass, m * U);
      }
      if constexpr (step_weights)
        if (dW) step_weights_of(v, dW, dR, db, n, t);
      if (t == 0) continue;
      if constexpr (reset_before) {  // dh += [dz_z, dz_r, 0] R^T
        O::template dense_backward_input_packed<U, G>(at(v.ex, S + t, G), R, v.pk, dhr, m);
        O::accumulate(dh, dhr, m * U);
        continue;
      }
      const T* dzr = sep_bias ? rec : at(v.zs, t, G);
      if (nr == 0) {
        bool added = false;
        if constexpr (detail::adds_input_packed<O> && (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
          if (m >= O::packed_rows) {  // dh += dz R^T in the product's tiles
            O::template dense_backward_input_packed_add<U, G>(dzr, R, v.pk, dh, m);
            added = true;
          }
        }
        if (!added) {
          O::template dense_backward_input_packed<U, G>(dzr, R, v.pk, dhr, m);
          O::accumulate(dh, dhr, m * U);
        }
      } else {  // dh += sum_k (dz_k R^T) ⊙ m_k, dz_k: gate block k (all of dz with one mask)
        T* tdz = v.tdz + r0 * G;  // (v.tdz holds n G values only with recurrent dropout)
        for (std::size_t k = 0; k < nr; ++k) {
          if (nr > 1) select_block(tdz, dzr, k, m);
          O::template dense_backward_input_packed<U, G>(nr > 1 ? tdz : dzr, R, v.pk, dhr, m);
          O::map_rows(detail::add_product_fn{}, m, U, rows_at(dh, U), crows(dhr, U),
                      crows(v.mrec + (k * n + r0) * U, U));
        }
      }
    }
  }

  // step t's dW += x_t^T dz_t, dR += h_{t-1}^T dz_t (h_0 = 0: none), db += colsum(dz_t), over the
  // batch's n rows (step S-1 starts them from 0), column panels over the pool where it has threads
  // (in the time loop only where that runs as one block: one thread, or below 2 x 16 rows; else after
  // it, every step in one call)
  static void step_weights_of(const views& v, T* dW, T* dR, T* db, std::size_t n, std::size_t t) {
    if constexpr (step_weights)
      O::template step_weights_gradient<F, U, G>(v.xs + t * n * F, t > 0 ? v.hs + t * n * U : nullptr,
                                                 v.zs + t * n * G, dW, dR, db, n, t == S - 1, true);
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    const std::size_t n = r.batch;
    if (n == 0) return;
    const views v = split(s.cache, n);
    const T *W = s.params, *R = W + kernel_count, *b = R + recurrent_count;
    const bool drop = dropping(r);
    const std::size_t ni = drop ? nin : 1, nr = drop ? nrec : 0;
    if (drop) {  // the masks (0 or 1 / (1 - rate)), drawn in order: inputs, then states
      if (!r.gen) throw std::invalid_argument(name() + ": training with dropout needs a random generator (run_info::gen is null)");
      if constexpr (drop_in) {
        O::fill(v.min, n * in_masks * F, 1);
        O::dropout_forward(v.min, v.xs, v.min, n * in_masks * F, opt.dropout, *r.gen);  // xs: a scratch here
      }
      if constexpr (drop_rec) {
        O::fill(v.mrec, n * nrec * U, 1);
        O::dropout_forward(v.mrec, v.mh, v.mrec, n * nrec * U, opt.recurrent_dropout, *r.gen);
      }
    }
    // the input, time-major (steps reversed for go_backwards), masked (one copy per input mask), then its
    // projection for every step: one GEMM (over the copies' rows; each gate block taken from its copy)
    if (n == 1 && !opt.go_backwards) {  // one sample in order: time-major already (one copy, not S row copies)
      O::copy(x, v.xs, S * F);
    } else {
      for (std::size_t t = 0; t < S; ++t)
        O::map_rows(detail::assign_fn{}, n, F, rows_at(v.xs + t * n * F, F), rows_at(x + source_step(t) * F, S * F));
    }
    if (drop && drop_in) {
      for (std::size_t k = ni; k-- > 0;)
        for (std::size_t t = 0; t < S; ++t)
          O::map_rows(detail::mul_fn{}, n, F, rows_at(v.xs + (k * S + t) * n * F, F), crows(v.xs + t * n * F, F),
                      crows(v.min + k * n * F, F));
    }
    const bool projected = step_projection && ni == 1 && nr == 0 && n >= O::packed_rows;
    if (projected) {  // in each step's product (forward_rows)
      O::template pack_weights<F, G>(W, v.pkw, n);
    } else if (ni == 1) {
      O::template dense_forward<F, G>(v.xs, W, b, v.zs, S * n);
    } else {
      O::template dense_forward<F, G>(v.xs, W, b, v.ex, ni * S * n);
      for (std::size_t k = 0; k < ni; ++k)
        O::map_rows(detail::assign_fn{}, S * n, U, rows_at(v.zs + k * U, G), crows(v.ex + k * S * n * G + k * U, G));
    }
    O::fill_zero(v.hs, n * U);
    if constexpr (cells) O::fill_zero(v.cs, n * U);
    if (nr > 0) O::fill_zero(v.mh, nr * S * n * U);
    if constexpr (S > 1) O::template pack_weights<U, G>(R, v.pk, n);  // step 0 has no product
    const T* mask = step_mask(r, v.mw);  // (a converted float mask in mw until the GEMM below overwrites it)
    if (mask) {  // time-major (in reading order), then widened to [S * n, U] by a one-column GEMM with ones
      for (std::size_t t = 0; t < S; ++t)
        O::map_rows(detail::assign_fn{}, n, 1, rows_at(v.mt + t * n, 1), rows_at(mask + source_step(t), S));
      O::fill(v.ones, U, 1);
      O::template dense_forward<1, U>(v.mt, v.ones, static_cast<const T*>(nullptr), v.mw, S * n);
    }  // masked h_0 = 0 (rows t = 0 of each copy)
    for_rows(n, [&](std::size_t r0, std::size_t m) {
      forward_rows(v, W, R, b, n, nr, projected, mask != nullptr, r0, m);
    });
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
    const bool drop = dropping(r);
    const std::size_t ni = drop ? nin : 1, nr = drop ? nrec : 0;
    const bool masked = has_step_mask(r);
    O::fill_zero(v.dh, n * U);
    if constexpr (cells) O::fill_zero(v.dc, n * U);
    if constexpr (!opt.return_sequences) O::copy(dy, v.dh, n * U);
    if constexpr (S > 1) O::template pack_weights_transposed<U, G>(R, v.pk, n);
    // dW, dR, db step by step (step_weights): in the time loop where it runs as one block (the whole
    // batch), else after it in one call, steps S-1 .. 0 (the same sums in the same order)
    bool per_step = false;
    if constexpr (step_weights) per_step = ni == 1 && nr == 0 && n >= O::step_weights_rows;
    bool in_loop = false;
    for_rows(n, [&](std::size_t r0, std::size_t m) {
      if (per_step && m == n) {
        in_loop = true;
        backward_rows(v, R, dy, n, nr, masked, r0, m, dW, dR, db);
      } else {
        backward_rows(v, R, dy, n, nr, masked, r0, m);
      }
    });
    if constexpr (step_weights)
      if (per_step && !in_loop)  // every step in one call (one pool run; step 0 without h)
        O::template step_weights_gradient<F, U, G>(v.xs, v.hs, v.zs, dW, dR, db, n, true, true, S);
    if (per_step && S == 1) O::fill_zero(dR, recurrent_count);
    // every step at once: dW = xs^T dz, dR = h_{t-1}^T dz_rec, dx = dz W^T (with masks: over the copies' rows,
    // each copy's dz its gate block)
    if (per_step) {
    } else if (ni == 1) {
      if constexpr (detail::has_weights_in_place<O, T>)  // nothing packed: dz is 28 n rows for F outputs
        O::template dense_backward_weights_in_place<F, G>(v.xs, v.zs, dW, db, S * n);
      else
        O::template dense_backward_weights<F, G>(v.xs, v.zs, dW, db, S * n);
    } else {
      for (std::size_t k = 0; k < ni; ++k) select_block(v.ex + k * S * n * G, v.zs, k, S * n);
      O::template dense_backward_weights<F, G>(v.xs, v.ex, dW, db, ni * S * n);
    }
    if (dx) {
      O::template dense_backward_input<F, G>(ni == 1 ? v.zs : v.ex, W, v.xs, ni * S * n);
      if (drop && drop_in) {  // dx = sum_k (dz_k W^T) ⊙ m_k, into copy 0
        for (std::size_t t = 0; t < S; ++t) {
          O::map_rows(detail::scale_by_fn{}, n, F, rows_at(v.xs + t * n * F, F), crows(v.min, F));
          for (std::size_t k = 1; k < ni; ++k)
            O::map_rows(detail::add_product_fn{}, n, F, rows_at(v.xs + t * n * F, F),
                        crows(v.xs + (k * S + t) * n * F, F), crows(v.min + k * n * F, F));
        }
      }
      for (std::size_t t = 0; t < S; ++t)
        O::map_rows(detail::assign_fn{}, n, F, rows_at(dx + source_step(t) * F, S * F),
                    rows_at(static_cast<const T*>(v.xs) + t * n * F, F));
    }
    const T* dzr_all = sep_bias ? v.rec : v.zs;
    // gru: the column sums are the recurrent bias' gradient; the other cells have none (null: not summed)
    T* rdb = sep_bias ? db + G : static_cast<T*>(nullptr);
    if (per_step) {
    } else if (nr == 1) {  // every step (the masked h_0 is 0)
      O::template dense_backward_weights<U, G>(v.mh, dzr_all, dR, rdb, S * n);
    } else if (nr > 1) {
      for (std::size_t k = 0; k < nr; ++k) select_block(v.ex + k * S * n * G, dzr_all, k, S * n);
      O::template dense_backward_weights<U, G>(v.mh, v.ex, dR, rdb, nr * S * n);
    } else if constexpr (sep_bias) {
      O::template dense_backward_weights<U, G>(v.hs, v.rec, dR, db + G, S * n);
    } else if constexpr (reset_before) {  // [r ⊙ h; h]^T [dz_h; dz_zr] (the rows of step 0 are 0)
      O::template dense_backward_weights<U, G>(v.qs, v.ex, dR, static_cast<T*>(nullptr), 2 * S * n);
    } else if constexpr (S == 1) {
      O::fill_zero(dR, recurrent_count);
    } else {  // steps 1 .. S-1 (h_0 = 0 adds nothing)
      O::template dense_backward_weights<U, G>(v.hs + n * U, v.zs + n * G, dR, static_cast<T*>(nullptr), (S - 1) * n);
    }
  }
};

}  // namespace ctnn
