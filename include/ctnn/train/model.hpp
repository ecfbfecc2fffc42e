// ctnn/train/model.hpp — model<Net, Precision, Backend>: a network's storage and its passes.
//
// A model owns ONE allocation of its backend's memory laid out by Net::plan<Precision, Backend>
// (core/plan.hpp), plus the step's scalars. make_model<Net>(seed) initialises the parameters
// deterministically. forward(x, batch, training) returns the output rows (the caller keeps x
// alive until backward()); backward() starts from output_gradient() and leaves the parameter
// gradients in gradients(). The allocation grows (variables and optimizer state kept) when a
// larger batch or more optimizer slots are asked for; it never shrinks, and predict() never
// reallocates it (a larger chunk runs in scratch memory), so spans of the variables stay valid.
// Every backend: layers, losses and updates run through its runner and ops<Backend>; host code
// reaches the memory only through host views (host_region, for_each_variable, host_outputs)
// and inputs through the feeder, so on a device the spans point into device memory.
// Mixed precision: the layers compute in one type; the plan's compute-type copy of the
// parameters is refreshed through ops<Backend>::convert before the next forward after any
// writable view was handed out (a write through a span kept across a forward needs
// refresh_compute_parameters()). The derived buffers (role::derived: a stripped sparse layer's
// weights decoded to dense) are rewritten at the same points, by the layers' derive(). The optimizer's slots are a plan region; its counts and
// learning-rate scale live here (optimizer_state()); fit re-initialises them for an optimizer
// of another kind. A backend's optional fused small-MLP hook runs where it applies
// (fused_mlp()). docs/design.md ("The plan", "Training") and docs/mixed-precision.md.
#pragma once
#include <algorithm>
#include <array>
#include <concepts>
#include <initializer_list>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backends/cpu/backend.hpp"
#include "../backends/cpu/ops.hpp"
#include "../core/concepts.hpp"
#include "../core/fused_mlp_hook.hpp"
#include "../core/plan.hpp"
#include "../core/compile_message.hpp"
#include "../core/precision.hpp"
#include "../core/rng.hpp"
#include "../core/sequential.hpp"
#include "../core/type_at.hpp"

namespace ctnn {

// The optimizer's bookkeeping kept with the model (its slots are in the plan).
struct optimizer_state {
  std::int64_t iterations = 0;       // updates applied: Keras 3's optimizer.iterations (with gradient
                                     // accumulation, its _iterations // gradient_accumulation_steps)
  std::int64_t steps = 0;            // training steps run, micro-steps included: Keras 3's _iterations
  double learning_rate_scale = 1.0;  // multiplies the schedule's rate (reduce_lr_on_plateau)
  const void* kind = nullptr;        // which optimizer type the slots were made for (nullptr: none)
};

namespace detail {
template <class O>
inline constexpr char optimizer_kind_tag = 0;
struct training_access;

// The step's per-layer update (train/step.hpp): backward calls ready(context, lo, hi) once per
// layer with parameters as soon as that layer's gradients are final (its regularizer's gradient
// added), [lo, hi) the part of the parameter region the layer owns (its block and the padding up
// to the next layer's; the parts of all layers cover the region once), and sets used when it did
// so for every layer (model::updates_per_layer; a non-finite loss or a gradient listener: never).
struct layer_update_hook {
  void* context = nullptr;
  void (*ready)(void* context, std::size_t lo, std::size_t hi) = nullptr;
  bool used = false;
  // Whether ready may also take a dense kernel in blocks of whole rows, from the pool's threads,
  // as the fused backward finishes them (an update with no optimizer transform: it reads only the
  // gradients of the values it updates); ready then covers the rest of that layer's part.
  bool rows = false;
};

// The count an optimizer's learning-rate schedule reads: os.iterations, or
// what O::schedule_step(os) says (with_options under gradient accumulation:
// os.steps, as Keras 3). docs/training.md, "Which count each consumer reads", has the table.
template <class O>
std::int64_t schedule_step(const O& opt, const optimizer_state& os) {
  if constexpr (requires { { opt.schedule_step(os) } -> std::convertible_to<std::int64_t>; })
    return opt.schedule_step(os);
  else
    return os.iterations;
}
// A bound layer that draws random numbers in training (dropout): a replayed graph would repeat its draws.
template <class L>
concept draws_random_layer = requires { requires bool(L::draws_random); };
template <class Layers>
inline constexpr bool any_draws_random = false;
template <class... L>
inline constexpr bool any_draws_random<std::tuple<L...>> = any_of_v<draws_random_layer<L>...>;
// The rate the next update uses: the schedule's at schedule_step, times the model's scale.
template <class O>
double current_learning_rate(const O& opt, const optimizer_state& os) {
  return opt.learning_rate(schedule_step(opt, os)) * os.learning_rate_scale;
}
}  // namespace detail

namespace detail {
// Whether bound layer V adds a penalty / its gradient through a slot of type Slot. (Concepts at
// namespace scope: written as requires-expressions inside model's member lambdas, nvcc 13's
// device pass found them false where its host pass found them true, so the kernels they launch
// were never compiled for the device: "invalid device function".)
template <class V, class Slot>
concept adds_penalty = requires(Slot v, step_scalars* p) { V::add_penalty(v, p); };
template <class V, class Slot>
concept adds_penalty_gradient = requires(Slot v) { V::add_penalty_gradient(v); };
// Whether bound layer L rewrites a derived buffer (role::derived: decoded weights) through
// L::derive(layer_slot<T>) (nvcc 13 refused the requires-expression inside model's member).
template <class L, class T>
concept derives = requires(layer_slot<T> s) { L::derive(s); };
// Whether bound layer L takes a regularizer that adds a penalty (dense, conv2d: L::Reg).
template <class L>
constexpr bool has_active_regularizer() {
  if constexpr (requires { L::Reg::active; }) return bool(L::Reg::active);
  else return false;
}
// One layer's variable_refs: layer k, of bound type L, of a plan whose offsets `offset`
// gives (Plan::offset), each handed to sink(ctx, ref). One instance per bound layer type and
// policy, whatever the position: an instance per position named the whole layer list in its
// symbol, N^2 bytes of symbols over a network (docs/performance.md, "Compile time and memory").
template <class L, class Policy>
void layer_variables_in(std::size_t k, std::byte* base, const plan_layout& lay, std::size_t batch,
                        std::size_t (*offset)(std::size_t, role, std::size_t), void (*sink)(void*, variable_ref&),
                        void* ctx) {
  for (std::size_t b = 0; b < L::buffers.size(); ++b) {
    const buffer& d = L::buffers[b];
    if (d.kind == role::cache || d.kind == role::derived) continue;  // not variables: never in files
    variable_ref v;
    v.layer = k;
    v.name = d.name;
    v.kind = d.kind;
    v.type = d.type;
    v.element_bytes = elem_bytes<Policy>(d.type);
    v.dims = d.dims;
    v.rank = d.rank;
    v.extent = d.extent;
    v.offset = offset(k, d.kind, batch) + buffer_offset<Policy>(L::buffers, b);
    v.data = base + lay.at(d.kind) + v.offset;
    if constexpr (requires(const std::byte* p) {
                    { L::check_metadata(std::string_view{}, p) } -> std::same_as<std::string>;
                  })
      if (d.kind == role::metadata) v.check = &L::check_metadata;
    if constexpr (requires(const std::byte* p, const std::byte* const* s) {
                    { L::check_state(std::string_view{}, p, s, std::size_t{}) } -> std::same_as<std::string>;
                  })
      if (d.kind == role::state) v.check_state = &L::check_state;
    if constexpr (requires { typename L::input_element; })
      v.int8_input = std::is_same_v<typename L::input_element, std::int8_t>;
    sink(ctx, v);
  }
}
// Calls f(variable_ref) for every parameter, state, mask and metadata buffer
// of the bound layers Layers (a std::tuple) laid out by Plan under Policy in
// the memory at base (layout lay, batch capacity batch), layer by layer in
// declaration order (tests/cuda walks a device layout on the host with it).
template <class Layers, class Policy, class Plan, class F>
void for_each_variable_in(std::byte* base, const plan_layout& lay, std::size_t batch, F&& f) {
  using Fn = std::remove_reference_t<F>;
  void* ctx = const_cast<void*>(static_cast<const void*>(std::addressof(f)));
  void (*sink)(void*, variable_ref&) = [](void* c, variable_ref& v) { (*static_cast<Fn*>(c))(v); };
  [&]<class... L>(std::tuple<L...>*) {
    std::size_t k = 0;  // a braced list: evaluated in order
    (void)std::initializer_list<int>{(layer_variables_in<L, Policy>(k++, base, lay, batch, &Plan::offset, sink, ctx), 0)...};
  }(static_cast<Layers*>(nullptr));
}
}  // namespace detail

// The plan's memory, allocated through Backend::memory.
template <class Backend>
class plan_memory {
 public:
  plan_memory() = default;
  explicit plan_memory(std::size_t bytes) : p_(static_cast<std::byte*>(Backend::memory::allocate(bytes))), n_(bytes) {}
  plan_memory(const plan_memory& o) : plan_memory(o.n_) { Backend::memory::copy(p_, o.p_, n_); }
  plan_memory(plan_memory&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  plan_memory& operator=(plan_memory o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~plan_memory() { Backend::memory::deallocate(p_, n_); }
  std::byte* data() const noexcept { return p_; }
  std::size_t size() const noexcept { return n_; }

 private:
  std::byte* p_ = nullptr;
  std::size_t n_ = 0;
};

namespace detail {
template <class T>
inline constexpr bool is_element_type_v = std::is_same_v<T, float> || std::is_same_v<T, double> || is_half_v<T>;
// "model: my_policy is neither an element type (float, double, float16_t, bfloat16_t) nor a precision policy ..."
template <class Precision>
constexpr diag::message precision_text() {
  diag::message m;
  m << "model: ";
  m.type<Precision>() << " is neither an element type (float, double, float16_t, bfloat16_t) nor a precision policy "
                         "of them (precision::float32, mixed_float16, ...)";
  return m;
}
}  // namespace detail

template <Network Net, class Precision = float, class Backend = cpu<>>
class model {
 public:
  using network = Net;
  using policy = precision::policy_of_t<Precision>;
  using variable_type = typename policy::variable_type;
  using compute_type = typename policy::compute_type;
  static_assert(diag::require<detail::is_element_type_v<variable_type> && detail::is_element_type_v<compute_type>,
                              &detail::precision_text<Precision>>());
  // the element type of inputs, outputs and dL/dy: compute_type, or float
  // under the 16-bit policies (losses and metrics run in float32 there)
  using value_type = typename policy::io_type;
  using backend = Backend;
  static_assert(BackendOps<Backend>, "model: ops<Backend> must provide the whole op set (core/backend_ops.hpp)");
  using layers = typename Net::template bound<policy, Backend>;
  // the specs bound with the variable type (float when it is 16-bit): init and the penalties
  using variable_layers = typename Net::template variable_bound<policy, Backend>;
  using plan = typename Net::template plan<policy, Backend>;
  static constexpr std::size_t layer_count = Net::layer_count;
  static constexpr std::size_t input_size = Net::input_type::size;
  static constexpr std::size_t output_size = Net::output_type::size;
  static constexpr std::size_t parameter_count = Net::parameter_count;
  static constexpr std::size_t state_count = Net::state_count;
  // The backend's policies (core/backend.hpp); a host backend that names no
  // runner gets the CPU's, so its steps flush denormals as cpu<>'s do.
  using host_view_type = host_view_t<Backend>;
  using feeder_type = feeder_t<Backend>;
  using runner_type = runner_t<Backend, host_runner>;
  // whether a training pass draws random numbers (no captured training pass: train_pass)
  static constexpr bool draws_random = detail::any_draws_random<layers>;
  // Whether backward can hand each layer's final gradients to the step's per-layer update
  // (detail::layer_update_hook): host memory, float or double variables, no compute-type copies
  // (their gradients are final only once widened after the whole backward).
  static constexpr bool updates_per_layer = Backend::memory::host_accessible &&
                                            (std::is_same_v<variable_type, float> || std::is_same_v<variable_type, double>) &&
                                            [] {
                                              for (bool c : plan::copies)
                                                if (c) return false;
                                              return true;
                                            }();

  explicit model(std::uint64_t seed = 0) : seed_(seed), gen_(seed) {
    reserve(1, 0);
    initialize(seed);
  }

  // Re-draws every parameter from `seed` (as a fresh make_model would) and forgets the optimizer state.
  // (cold, as the allocation's growth: run once, optimized for size and out of line, so that a
  // program's edit compiles less of it)
  [[gnu::cold, gnu::noinline]] void initialize(std::uint64_t seed) {
    seed_ = seed;
    rng init_gen(seed);
    host_view_type v = variables_view();
    // by type, the position at run time: one init_layer per bound layer type, not per position
    [&]<class... V>(std::tuple<V...>*) {
      std::size_t i = 0;  // a braced list: evaluated in order
      (void)std::initializer_list<int>{(init_layer<V>(i++, init_gen, v.data()), 0)...};
    }(static_cast<variable_layers*>(nullptr));
    v.commit();
    refresh_compute_parameters();
    gen_ = rng::derive(seed, 0x64726f70ull);  // stream for dropout and other run-time randomness
    reset_optimizer();
  }

  std::uint64_t seed() const noexcept { return seed_; }
  rng& generator() noexcept { return gen_; }

  // Ensures the memory holds a batch of `batch` samples and `slots` optimizer
  // values per parameter. Variables and (same slot count) slots survive.
  void reserve(std::size_t batch, std::size_t slots) {
    if (batch <= batch_capacity_ && slots == slots_) return;
    grow(batch, slots);
  }

  std::size_t batch_capacity() const noexcept { return batch_capacity_; }
  std::size_t memory_bytes() const noexcept { return mem_.size(); }
  const plan_layout& layout() const noexcept { return lay_; }

  // The regions as flat spans (layers one after another, each block 64-byte
  // aligned; padding between blocks is zero and stays zero).
  std::span<variable_type> parameters() noexcept {
    stale_ = true;
    return region<variable_type>(role::parameter);
  }
  std::span<const variable_type> parameters() const noexcept { return region<const variable_type>(role::parameter); }
  std::span<variable_type> gradients() noexcept { return region<variable_type>(role::gradient); }
  std::span<variable_type> state() noexcept { return region<variable_type>(role::state); }
  std::span<const variable_type> state() const noexcept { return region<const variable_type>(role::state); }
  std::span<std::uint8_t> masks() noexcept { return region<std::uint8_t>(role::mask); }
  // The step mask of the last forward pass (unset: none; layers/masking.hpp), which the loss reads.
  const sequence_mask& step_mask() const noexcept { return mask_; }
  std::span<variable_type> optimizer_slots() noexcept { return region<variable_type>(role::optimizer_slot); }

  // Parameters of layer I (all its parameter buffers, in declaration order).
  template <std::size_t I>
  std::span<variable_type> layer_parameters() noexcept {
    using L = detail::type_at_t<I, layers>;
    stale_ = true;
    return {block<variable_type>(role::parameter, I), L::parameter_count};
  }
  template <std::size_t I>
  std::span<variable_type> layer_gradients() noexcept {
    using L = detail::type_at_t<I, layers>;
    return {block<variable_type>(role::gradient, I), L::parameter_count};
  }

  // Rewrites every layer's compute-type copy of its parameters from the
  // variables (ops<Backend>::convert; nothing under a uniform policy), then
  // every derived buffer (L::derive: decoded weights) from those.
  void refresh_compute_parameters() {
    if constexpr (any_copies)
      for_each_layer([&]<std::size_t I, class L>() {
        if constexpr (plan::copies[I] && L::parameter_count > 0)
          ops<Backend>::convert(block<variable_type>(role::parameter, I), block<layer_type<I>>(role::compute_parameter, I),
                                L::parameter_count);
      });
    if constexpr (any_derived)
      for_each_layer([&]<std::size_t I, class L>() {
        if constexpr (has_derived<I, L>()) L::derive(slot<I>());
      });
    stale_ = false;
  }

  // Calls f(variable_ref) for every declared parameter, state, mask and
  // metadata buffer, layer by layer in declaration order. v.data is host
  // memory: the model's own on a host backend, else a host view of the
  // variables which the non-const overload writes back when f returns.
  template <class F>
  void for_each_variable(F&& f) const {
    stale_ = true;  // the refs may be written through (load_weights)
    host_view_type v = variables_view();
    detail::for_each_variable_in<layers, policy, plan>(v.data(), lay_, batch_capacity_, f);
  }
  template <class F>
  void for_each_variable(F&& f) {
    stale_ = true;  // the refs are written through (load_weights)
    host_view_type v = variables_view();
    detail::for_each_variable_in<layers, policy, plan>(v.data(), lay_, batch_capacity_, f);
    v.commit();
  }

  // Calls f(refs) once with every variable_ref of for_each_variable, all valid while f runs (on a
  // device: one host view held for the call, which the non-const overload writes back when f
  // returns). For work that reads or writes several buffers, or two models, at once (strip_to,
  // strip_pruning_to, copy_variables): refs kept past f point into a view that is gone.
  template <class F>
  void with_variables(F&& f) const {
    host_view_type v = variables_view();
    const std::vector<variable_ref> refs = variable_refs(v);
    f(refs);
  }
  template <class F>
  void with_variables(F&& f) {
    host_view_type v = variables_view();
    const std::vector<variable_ref> refs = variable_refs(v);
    f(refs);
    v.commit();
  }

  // The same walk without a host view: v.data points into the backend's memory
  // (for ops<Backend> and offsets; never read on the host of a device backend).
  template <class F>
  void for_each_variable_in_memory(F&& f) const {
    detail::for_each_variable_in<layers, policy, plan>(mem_.data(), lay_, batch_capacity_, f);
  }

  // A host view of region r (core/backend.hpp): zero-copy on host memory, a
  // copy elsewhere (read from the model when `read`; commit() writes it back).
  host_view_type host_region(role r, bool read = true) const {
    return host_view_type(mem_.data() + lay_.at(r), lay_.bytes(r), read);
  }

  // Calls f() as the backend runs work (core/backend.hpp's runner); with
  // flush_denormals given, the CPU's runner sets (true) or clears (false)
  // flush-to-zero for the call.
  template <class F>
  decltype(auto) run(F&& f) {
    return runner_.run(std::forward<F>(f));
  }
  template <class F>
  decltype(auto) run(F&& f, bool flush_denormals) {
    return runner_.run(std::forward<F>(f), flush_denormals);
  }
  // The backend's figures for the epoch (the CUDA feeder's and runner's:
  // device wait and compute seconds, graph steps) added to l; fit calls it.
  template <class Logs>
  void log_epoch(Logs& l) {
    if constexpr (requires { feeder_.log_epoch(l); }) feeder_.log_epoch(l);
    if constexpr (requires { runner_.log_epoch(l); }) runner_.log_epoch(l);
  }

  // Where the model reads n values of host's (the feeder's slot k: 0 inputs, 1 targets).
  template <class U>
  const U* feed(std::size_t k, const U* host, std::size_t n) {
    return feeder_.feed(k, host, n);
  }

  // Runs every layer on x[batch, input_size] (host memory); returns the output rows.
  const value_type* forward(const value_type* x, std::size_t batch, bool training) {
    if (batch == 0) throw std::invalid_argument("model::forward: the batch is empty");
    return forward_fed(feed(0, x, batch * input_size), batch, training);
  }
  // forward() on inputs already where the model reads them (feed(0, x, ...)).
  const value_type* forward_fed(const value_type* x, std::size_t batch, bool training) {
    if (batch == 0) throw std::invalid_argument("model::forward: the batch is empty");
    reserve(batch, slots_);
    return run([&] { return training ? run_layers(x, batch, true) : run_inference(x, batch); });
  }
  const value_type* output() noexcept { return model_output(); }
  // The last forward's first n output rows on the host (a view of the model's
  // memory on a host backend, else a copy that lives until the next call).
  std::span<const value_type> host_outputs(std::size_t n) {
    const value_type* y = model_output();
    if constexpr (Backend::memory::host_accessible) {
      return {y, n * output_size};
    } else {
      host_out_.resize(n * output_size);
      Backend::memory::copy(host_out_.data(), y, host_out_.size() * sizeof(value_type));
      return host_out_;
    }
  }

  // Where the loss writes dL/d(output) for the last forward's batch.
  value_type* output_gradient() noexcept { return delta<value_type>(0); }

  // The step's scalars (core/plan.hpp's step_scalars) in the backend's memory: a member on a
  // host-accessible backend (the model's one allocation stays the plan's), else a small allocation
  // of its own. The loss ops accumulate into scalars(); reset_scalars writes them (sums 0, the loss
  // scale) and read_scalars reads them (one memory::copy each way on a device).
  step_scalars* scalars() noexcept {
    if constexpr (Backend::memory::host_accessible) return &scalars_;
    else return reinterpret_cast<step_scalars*>(scalars_.data());
  }
  void reset_scalars(double loss_scale = 1.0) {
    step_scalars h;
    h.loss_scale = loss_scale;
    if constexpr (Backend::memory::host_accessible) scalars_ = h;
    else Backend::memory::copy(scalars_.data(), &h, sizeof h);
  }
  step_scalars read_scalars() const {
    if constexpr (Backend::memory::host_accessible) {
      return scalars_;
    } else {
      step_scalars h;
      Backend::memory::copy(&h, scalars_.data(), sizeof h);
      return h;
    }
  }

  // Phases 1-3 of a training step (train/step.hpp) on fed inputs x and targets y: the training
  // forward, loss(outputs) (the caller's: into scalars(), dL/dy into output_gradient()), backward;
  // returns the outputs. As a graph the backend's runner replays (CUDA: keyed by x, y, the batch and
  // `pass`, the step's id) unless a layer draws random numbers (draws_random), else plainly.
  template <class Loss>
  const value_type* train_pass(const value_type* x, const void* y, std::size_t batch, std::uint64_t pass, Loss&& loss,
                               bool flush_denormals) {
    if (batch == 0) throw std::invalid_argument("model::forward: the batch is empty");
    reserve(batch, slots_);
    return run(
        [&]() -> const value_type* {
          auto queue = [&]() -> const value_type* {
            const value_type* out = run_layers(x, batch, true);
            loss(out);
            backward();
            return out;
          };
          if constexpr (!draws_random && requires { runner_.graph(mem_.data(), x, y, batch, pass, [] {}); }) {
            if (stale_) refresh_compute_parameters();  // outside the graph: it reads the variables as they are then
            x_ = x, batch_ = batch;                     // what the pass sets on the host, also when it is replayed
            const std::uint64_t key =
                pass * 2 + (fused_mlp_backward_active() && fused_mlp_train_batch<Backend, layers>(batch) ? 1 : 0);
            if (runner_.graph(mem_.data(), x, y, batch, key, [&] { queue(); })) return model_output();
          }
          return queue();
        },
        flush_denormals);
  }

  // Back-propagates output_gradient() through every layer.
  // Then widens the compute-type gradients of the layers that have them into gradients().
  void backward() {
    static_assert(!is_half_v<variable_type>, "model::backward: this model's variables are 16-bit (precision::float16 "
                                             "is for inference); train under mixed_float16");
    run(pass{this, fused_mlp_backward_active() && fused_mlp_train_batch<Backend, layers>(batch_) ? &model::fused_backward
                                                                                                 : &model::backward_layers});
  }

  // Whether a layer has an active regularizer (else penalty() is 0 and reads nothing).
  static constexpr bool has_penalty = []<std::size_t... I>(std::index_sequence<I...>) {
    return detail::any_of_v<detail::has_active_regularizer<detail::type_at_t<I, variable_layers>>()...>;
  }(std::make_index_sequence<layer_count>{});
  // Adds the layers' regularization penalties to s (the step's scalars, in Backend's memory)
  // through ops<Backend>::add_penalty: nothing is read on the host, nothing waits (the step runs
  // it inside phases 1-3). penalty() is the sum now: the scalars reset, the ops, one read.
  // Both run on the float32 variables and gradients (the variable binding).
  void add_penalty(step_scalars* s) { run(pass{this, &model::add_penalty_layers, s}); }
  double penalty() {
    if constexpr (!has_penalty || is_half_v<variable_type>) {
      return 0.0;
    } else {
      reset_scalars();
      add_penalty(scalars());
      return read_scalars().penalty;
    }
  }
  void add_penalty_gradients() { run(pass{this, &model::add_penalty_gradient_layers}); }

  // Outputs for n samples, computed in chunks of at most `batch` samples (inference: training off).
  // The model's memory is never reallocated: a chunk above batch_capacity() runs in scratch memory.
  std::vector<value_type> predict(const value_type* x, std::size_t n, std::size_t batch = 256) {
    std::vector<value_type> out(n * output_size);
    if (n == 0) return out;
    if (batch == 0) throw std::invalid_argument("model::predict: the batch is empty");
    const std::size_t widest = std::min(batch, n);
    std::optional<predict_scratch> scratch;
    if (widest > batch_capacity_) scratch.emplace(widest);
    // While scratch_ is set, the layers' activations and caches are the scratch's; afterwards the
    // model is as before (x_ and batch_ too, so a backward() never reads past the capacity).
    struct restore {
      model& m;
      const value_type* x;
      std::size_t batch;
      ~restore() {
        if (m.scratch_) m.x_ = x, m.batch_ = batch;
        m.scratch_ = nullptr;
      }
    } guard{*this, x_, batch_};
    scratch_ = scratch ? &*scratch : nullptr;
    for (std::size_t i = 0; i < n; i += batch) {
      const std::size_t b = std::min(batch, n - i);
      const value_type* dx = feed(0, x + i * input_size, b * input_size);
      const value_type* y = run([&] { return run_inference(dx, b); });
      Backend::memory::copy(out.data() + i * output_size, y, b * output_size * sizeof(value_type));
    }
    return out;
  }

  // The optimizer's counts and learning-rate scale (read-only: fit and the
  // training context change them).
  const ctnn::optimizer_state& optimizer_state() const noexcept { return opt_; }
  // Updates applied (Keras 3's optimizer.iterations; gradient accumulation: docs/training.md).
  std::int64_t optimizer_iterations() const noexcept { return opt_.iterations; }
  // Forgets the optimizer state: the next fit starts with fresh slots and update count 0.
  void reset_optimizer() noexcept { opt_ = ctnn::optimizer_state{}; }

  static std::string architecture() { return Net::spec_string(); }

  // Whether the backend's optional fused small-MLP hook (core/fused_mlp_hook.hpp) runs where it has
  // one for this network: inference (forward), training's backward (backward) and forward
  // (training_forward); each starts as the backend says (fused_mlp_defaults).
  ctnn::fused_mlp_options& fused_mlp() noexcept { return fused_; }
  // Whether the next inference / training backward runs as the backend's fused pass (inference:
  // of at least fused_mlp_min_batch<Backend, layers>() samples; training: a batch where
  // fused_mlp_train_batch<Backend, layers>(batch), core/fused_mlp_hook.hpp).
  bool fused_mlp_active() const {
    if constexpr (has_fused_mlp_forward<Backend, layers, layer_type<0>>)
      return fused_.forward && ops<Backend>::template fused_mlp_ready<layers>();
    return false;
  }
  bool fused_mlp_backward_active() const {
    if constexpr (has_fused_mlp_backward<Backend, layers, layer_type<0>>)
      return fused_.backward && ops<Backend>::template fused_mlp_backward_ready<layers>();
    return false;
  }
  // Whether the next training forward (of at least fused_mlp_min_batch samples) runs as the
  // backend's fused pass (fused_mlp().training_forward, where the backend has that hook).
  bool fused_mlp_training_forward_active() const {
    if constexpr (has_fused_mlp_training_forward<Backend, layers, layer_type<0>>)
      return fused_.training_forward && ops<Backend>::template fused_mlp_ready<layers>();
    return false;
  }

 private:
  friend struct detail::training_access;

  // reserve's new allocation (once per larger batch or other slot count: cold).
  [[gnu::cold, gnu::noinline]] void grow(std::size_t batch, std::size_t slots) {
    const std::size_t new_batch = std::max(batch, batch_capacity_);
    const plan_layout nl = plan::layout(new_batch, slots);
    plan_memory<Backend> nm(nl.total);
    if (mem_.size()) {
      // parameters .. metadata do not depend on the batch or the slots: same offsets, one copy
      Backend::memory::copy(nm.data(), mem_.data(), lay_.at(role::optimizer_slot));
      if (slots == slots_)
        Backend::memory::copy(nm.data() + nl.at(role::optimizer_slot), mem_.data() + lay_.at(role::optimizer_slot),
                              lay_.bytes(role::optimizer_slot));
      else
        opt_.kind = nullptr;  // the slots are gone: the next fit initialises them
    }
    stale_ = true;  // the compute-type copy is not carried over
    mem_ = std::move(nm);
    lay_ = nl;
    batch_capacity_ = new_batch;
    offsets_ = sample_offsets(new_batch);
    slots_ = slots;
  }

  // whether a layer keeps a compute-type copy of its parameters (a mixed policy)
  static constexpr bool any_copies = [] {
    for (bool c : plan::copies)
      if (c) return true;
    return false;
  }();
  // whether a layer declares a derived buffer (role::derived) of any size: its derive() runs at each refresh
  static constexpr bool any_derived = plan::region(role::derived, 1) > 0;
  // layer I's derived block is rewritten by its derive(); a layer that holds a derived buffer but
  // writes none (time_distributed over a sparse layer) gets none in its slot (its kernels run)
  template <std::size_t I, class L>
  static constexpr bool has_derived() {
    if constexpr (plan::unit_bytes(I, role::derived) > 0) return detail::derives<L, layer_type<I>>;
    else return false;
  }
  // A member pass handed to the runner: one type for backward and the penalties, so the
  // runner's run is instantiated once for them (compile time and memory, docs/performance.md).
  struct pass {
    model* m;
    void (model::*f)(step_scalars*);
    step_scalars* s = nullptr;
    void operator()() const { (m->*f)(s); }
  };
  // Whether layer I's dL/dx is used: only when a layer below it has parameters. Every
  // layer's backward takes dx = nullptr (as the first layer always has): flatten then dense
  // (an MLP) computes no dX = dY W^T of the first dense layer (784 x 256 multiply-adds per
  // sample in the Fashion-MNIST MLP, 28 % of its step), and layers below it do nothing.
  // (one table for all I: a fold over layers 0..I-1 per I would instantiate N^2 / 2 lookups)
  static constexpr std::array<bool, layer_count> params_below = []<std::size_t... J>(std::index_sequence<J...>) {
    const std::array<bool, layer_count> has{(detail::type_at_t<J, layers>::parameter_count > 0)...};
    std::array<bool, layer_count> a{};
    for (std::size_t i = 1; i < layer_count; ++i) a[i] = a[i - 1] || has[i - 1];
    return a;
  }(std::make_index_sequence<layer_count>{});
  template <std::size_t I>
  static constexpr bool input_gradient_needed() {
    return params_below[I];
  }
  // backward()'s layers: dL/d(output) arrives in io; each layer's dL/dx in its compute type:
  // converted into the other buffer (free again) when the next layer down computes in another
  // type. Then the compute-type gradients widened into gradients().
  [[gnu::noinline]] void backward_layers(step_scalars*) {
    const run_info r{batch_, true, &gen_, replicas_, &mask_};
    const bool per_layer = updating_per_layer();
    std::size_t cur = 0;  // which delta buffer holds this layer's dL/d(output)
    for_each_layer_reverse([&]<std::size_t I, class L>() {
      using T = layer_type<I>;
      using From = std::conditional_t<I + 1 == layer_count, value_type, layer_type<I + (I + 1 < layer_count)>>;
      if constexpr (!std::is_same_v<From, T>) {
        ops<Backend>::convert(delta<From>(cur), delta<T>(1 - cur), batch_ * L::out_shape::size);
        cur = 1 - cur;
      }
      if constexpr (plan::aliases[I]) return;  // dL/dx is dL/dy, where it is (in delta(cur))
      T* dx = input_gradient_needed<I>() ? delta<T>(1 - cur) : nullptr;
      L::backward(slot<I>(), input_of<I>(), activation<I>(), delta<T>(cur), dx, r);
      if constexpr (updates_per_layer && L::parameter_count > 0)
        if (per_layer) layer_gradients_final(I);
      if constexpr (!any_copies && L::parameter_count > 0 && std::is_same_v<variable_type, float>)
        if constexpr (Backend::memory::host_accessible)
          if (listener_) tell_listener(slot<I>().grads, L::parameter_count);
      cur = 1 - cur;
    });
    if (per_layer) update_hook_->used = true;
    if constexpr (any_copies)
      for_each_layer([&]<std::size_t I, class L>() {
        if constexpr (plan::copies[I] && L::parameter_count > 0)
          ops<Backend>::convert(block<layer_type<I>>(role::compute_gradient, I), block<variable_type>(role::gradient, I),
                                L::parameter_count);
      });
  }
  // Whether this backward hands each layer's final gradients to the step's update (update_hook_):
  // not without a hook, nor with a gradient listener (data_parallel: the gradients are averaged
  // first), nor after a non-finite loss or penalty (the step ends before any update; read here,
  // before the backward, as the step reads it after).
  bool updating_per_layer() const noexcept {
    if constexpr (updates_per_layer)
      return update_hook_ && !listener_ && scalars_.non_finite == 0 && std::isfinite(scalars_.loss_sum + scalars_.penalty);
    return false;
  }
  static constexpr std::array<bool, layer_count> has_parameters = []<std::size_t... J>(std::index_sequence<J...>) {
    return std::array<bool, layer_count>{(detail::type_at_t<J, layers>::parameter_count > 0)...};
  }(std::make_index_sequence<layer_count>{});
  std::size_t parameter_offset(std::size_t i) const noexcept {
    return std::size_t(block<variable_type>(role::parameter, i) - region<variable_type>(role::parameter).data());
  }
  // backward_layers' gradient listener (data_parallel), told that n gradients at g are final: one
  // body per model, not one per layer with parameters.
  [[gnu::noinline]] void tell_listener(variable_type* g, std::size_t n) const {
    const auto all = region<variable_type>(role::gradient);
    const bool finite = scalars_.non_finite == 0 && std::isfinite(scalars_.loss_sum + scalars_.penalty);
    listener_->ready(listener_->context, g, n, all.data(), all.size(), finite);
  }
  // Layer i's gradients are final: its regularizer's gradient (as add_penalty_gradients), then the
  // step's update of its part of the parameter region, [its block, the next layer's block) (the
  // first layer with parameters from 0, the last to the region's end: the parts cover the region).
  // (not inlined: one body per model for every layer of backward_layers and the fused backward)
  [[gnu::noinline]] void layer_gradients_final(std::size_t i) {
    if constexpr (updates_per_layer) {
      for_each_layer([&]<std::size_t I, class>() {
        using V = detail::type_at_t<I, variable_layers>;
        if constexpr (detail::adds_penalty_gradient<V, layer_slot<variable_type>>)
          if (I == i) V::add_penalty_gradient(variable_slot(I));
      });
      std::size_t lo = parameter_offset(i), hi = region<variable_type>(role::parameter).size();
      bool below = false;
      for (std::size_t j = 0; j < layer_count; ++j) {
        if (!has_parameters[j]) continue;
        if (j < i) below = true;
        if (j > i) {
          hi = parameter_offset(j);
          break;
        }
      }
      if (!below) lo = 0;
      if (rows_kernel_[i]) {  // the kernel's rows were updated in the fused backward: the rest
        const std::size_t k0 = parameter_offset(i), k1 = k0 + rows_kernel_[i];
        if (lo < k0) update_hook_->ready(update_hook_->context, lo, k0);
        update_hook_->ready(update_hook_->context, k1, hi);
        return;
      }
      update_hook_->ready(update_hook_->context, lo, hi);
    }
  }
  // The fused backward's done (fused_layer_done) for layer i.
  static void fused_layer_final(void* m, std::size_t i) { static_cast<model*>(m)->layer_gradients_final(i); }
  // The fused backward's rows (fused_layer_io::rows) of a layer whose kernel starts at offset.
  struct rows_context {
    model* m = nullptr;
    std::size_t offset = 0;
  };
  static void fused_rows(void* c, std::size_t lo, std::size_t hi) {
    const rows_context& x = *static_cast<const rows_context*>(c);
    x.m->update_hook_->ready(x.m->update_hook_->context, x.offset + lo, x.offset + hi);
  }
  // add_penalty's and add_penalty_gradients' layers (the variable binding; none with 16-bit variables).
  void add_penalty_layers(step_scalars* s) {
    if constexpr (!is_half_v<variable_type>)
      for_each_layer([&]<std::size_t I, class>() {
        using V = detail::type_at_t<I, variable_layers>;
        if constexpr (detail::adds_penalty<V, layer_slot<variable_type>>) V::add_penalty(variable_slot(I), s);
      });
  }
  void add_penalty_gradient_layers(step_scalars*) {
    if constexpr (!is_half_v<variable_type>)
      for_each_layer([&]<std::size_t I, class>() {
        using V = detail::type_at_t<I, variable_layers>;
        if constexpr (detail::adds_penalty_gradient<V, layer_slot<variable_type>>)
          V::add_penalty_gradient(variable_slot(I));
      });
  }

  // f.template operator()<I, L>() for every layer, first to last (reverse: last to first);
  // for_each_layer takes the bound layers from one deduction of the tuple's pack.
  template <class F>
  static void for_each_layer(F&& f) {
    [&]<std::size_t... I, class... L>(std::index_sequence<I...>, std::tuple<L...>*) {
      (void)std::initializer_list<int>{(f.template operator()<I, L>(), 0)...};
    }(std::make_index_sequence<layer_count>{}, static_cast<layers*>(nullptr));
  }
  template <class F>
  static void for_each_layer_reverse(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (void)std::initializer_list<int>{
          (f.template operator()<layer_count - 1 - I, detail::type_at_t<layer_count - 1 - I, layers>>(), 0)...};
    }(std::make_index_sequence<layer_count>{});
  }

  // A host view of the variable regions (parameters .. metadata: the bytes before the slots).
  // for_each_variable's refs into host view v, as one list (with_variables).
  std::vector<variable_ref> variable_refs(host_view_type& v) const {
    stale_ = true;  // the refs may be written through
    std::vector<variable_ref> refs;
    detail::for_each_variable_in<layers, policy, plan>(v.data(), lay_, batch_capacity_,
                                                       [&](const variable_ref& r) { refs.push_back(r); });
    return refs;
  }

  host_view_type variables_view() const { return host_view_type(mem_.data(), lay_.at(role::optimizer_slot), true); }

  template <class U>
  std::span<U> region(role r) const noexcept {
    return {reinterpret_cast<U*>(mem_.data() + lay_.at(r)), lay_.bytes(r) / sizeof(U)};
  }
  // The blocks of the roles that grow with the batch (activation, cache, converted: plan::per_sample)
  // at one batch: at[k][i] = plan::offset(i, r, batch) for k = index(r), computed when the batch
  // changes (grow, predict's scratch), so that a layer's block is a load, not a sum over the
  // layers before it in every pass (a run-time batch: plan::offset of such a role adds the blocks).
  struct sample_offsets {
    std::array<std::array<std::size_t, layer_count + 1>, 3> at{};
    static constexpr std::size_t index(role r) noexcept { return r == role::activation ? 0 : r == role::cache ? 1 : 2; }
    sample_offsets() = default;
    [[gnu::cold]] explicit sample_offsets(std::size_t batch) {  // (once per allocation: optimized for size)
      for (const role r : {role::activation, role::cache, role::converted}) {
        auto& o = at[index(r)];
        for (std::size_t i = 0; i < layer_count; ++i) o[i + 1] = o[i] + align_bytes(plan::block_bytes(i, r, batch));
      }
    }
  };
  // predict's memory for a chunk above the batch capacity: the activation and cache regions of the
  // plan at that batch (all a forward pass without training writes), one after the other.
  struct predict_scratch {
    std::size_t batch;
    plan_layout lay;
    plan_memory<Backend> mem;
    sample_offsets offsets;
    explicit predict_scratch(std::size_t b)
        : batch(b),
          lay(plan::layout(b, 0)),
          mem(lay.bytes(role::activation) + lay.bytes(role::cache) + lay.bytes(role::converted)),
          offsets(b) {}
    std::byte* region(role r) const noexcept {
      if (r == role::cache) return mem.data() + lay.bytes(role::activation);
      if (r == role::converted) return mem.data() + lay.bytes(role::activation) + lay.bytes(role::cache);
      return mem.data();
    }
  };

  // The runs every forward pass shares (forward reserves the memory first, predict does not).
  // A layer whose input is of another type than it computes in gets it converted first; the
  // last layer's output is widened to io. (Not inlined, as backward_layers and fused_backward: one
  // body each per model, called once a pass, not one more inside the training step's.)
  [[gnu::noinline]] const value_type* run_layers(const value_type* x, std::size_t batch, bool training) {
    if (stale_) refresh_compute_parameters();
    x_ = x;
    batch_ = batch;
    if (batch >= fused_mlp_min_batch<Backend, layers>()) {
      if (!training && fused_mlp_active()) return fused_forward(x, batch);
      if (training && fused_mlp_training_forward_active() && fused_mlp_train_batch<Backend, layers>(batch))
        return fused_training_forward(x, batch);
    }
    mask_ = {};  // a mask producer sets it again (layers/masking.hpp)
    const run_info r{batch, training, &gen_, training ? replicas_ : nullptr, &mask_};
    for_each_layer([&]<std::size_t I, class L>() {
      if constexpr (plan::converts_input[I]) {
        if constexpr (I == 0) ops<Backend>::convert(x, converted_input<0>(), batch * input_size);
        else ops<Backend>::convert(activation<I - 1>(), converted_input<I>(), batch * L::in_shape::size);
      }
      if constexpr (!plan::aliases[I]) L::forward(slot<I>(), input_of<I>(), activation<I>(), r);
    });
    if constexpr (plan::converts_output) ops<Backend>::convert(activation<layer_count - 1>(), model_output(), batch * output_size);
    return model_output();
  }

  // An inference pass on fed inputs x: as a graph the backend's runner
  // replays (CUDA: keyed by the feeder's buffer and the batch), else run_layers.
  // The compute-type copy is refreshed first, outside any graph.
  const value_type* run_inference(const value_type* x, std::size_t batch) {
    if constexpr (requires { runner_.graph(mem_.data(), x, batch, [] {}); }) {
      if (stale_) refresh_compute_parameters();
      if (!scratch_) {
        x_ = x, batch_ = batch;
        if (runner_.graph(mem_.data(), x, batch, [&] { run_layers(x, batch, false); })) return model_output();
      }
    }
    return run_layers(x, batch, false);
  }

  // The backend's fused passes (fused_mlp_active(), fused_mlp_backward_active()): the same
  // conversions as run_layers / backward around one call of the hook.
  const value_type* fused_forward(const value_type* x, std::size_t batch) {
    if constexpr (has_fused_mlp_forward<Backend, layers, layer_type<0>>) {
      if constexpr (plan::converts_input[0]) ops<Backend>::convert(x, converted_input<0>(), batch * input_size);
      const layer_type<0>* p[layer_count];
      for_each_layer([&]<std::size_t I, class>() { p[I] = slot<I>().params; });
      ops<Backend>::template fused_mlp_forward<layers>(input_of<0>(), activation<layer_count - 1>(), batch, p);
      if constexpr (plan::converts_output)
        ops<Backend>::convert(activation<layer_count - 1>(), model_output(), batch * output_size);
    }
    return model_output();
  }
  // Training's forward through the hook: every layer with parameters writes its activation (what
  // the backward reads), the others (flatten, reshape) alias theirs.
  const value_type* fused_training_forward(const value_type* x, std::size_t batch) {
    if constexpr (has_fused_mlp_training_forward<Backend, layers, layer_type<0>>) {
      using T = layer_type<0>;
      if constexpr (plan::converts_input[0]) ops<Backend>::convert(x, converted_input<0>(), batch * input_size);
      const T* p[layer_count];
      T* o[layer_count];
      for_each_layer([&]<std::size_t I, class L>() {
        p[I] = slot<I>().params;
        o[I] = L::parameter_count > 0 ? activation<I>() : nullptr;
      });
      ops<Backend>::template fused_mlp_training_forward<layers>(input_of<0>(), batch, p, o);
      if constexpr (plan::converts_output)
        ops<Backend>::convert(activation<layer_count - 1>(), model_output(), batch * output_size);
    }
    return model_output();
  }
  [[gnu::noinline]] void fused_backward(step_scalars* = nullptr) {
    if constexpr (has_fused_mlp_backward<Backend, layers, layer_type<0>>) {
      using T = layer_type<0>;
      const T* dy = delta<T>(0);
      if constexpr (!std::is_same_v<value_type, T>) {
        ops<Backend>::convert(delta<value_type>(0), delta<T>(1), batch_ * output_size);
        dy = delta<T>(1);
      }
      fused_layer_io<T> io[layer_count];
      for_each_layer([&]<std::size_t I, class>() { io[I] = {slot<I>().params, slot<I>().grads, input_of<I>(), activation<I>()}; });
      if constexpr (updates_per_layer && requires(const fused_layer_done* d) {
                      ops<Backend>::template fused_mlp_backward<layers>(dy, batch_, io, d);
                    }) {
        if (updating_per_layer()) {
          rows_context rc[layer_count];
          struct rows_reset {  // no other backward sees them, whatever happens
            std::array<std::size_t, layer_count>& k;
            ~rows_reset() { k = {}; }
          } reset{rows_kernel_};
          if constexpr (std::is_same_v<T, variable_type> && !any_copies)
            if (update_hook_->rows)
              for_each_layer([&]<std::size_t I, class L>() {
                constexpr std::size_t K = L::in_shape::size, N = L::out_shape::size;
                if constexpr (L::parameter_count == K * N + N && !detail::has_active_regularizer<L>()) {
                  rc[I] = {this, parameter_offset(I)};
                  io[I].rows = &model::fused_rows;
                  io[I].rows_context = &rc[I];
                  rows_kernel_[I] = K * N;
                }
              });
          const fused_layer_done done{this, &model::fused_layer_final};
          ops<Backend>::template fused_mlp_backward<layers>(dy, batch_, io, &done);
          update_hook_->used = true;
          return;
        }
      }
      ops<Backend>::template fused_mlp_backward<layers>(dy, batch_, io);
      if constexpr (any_copies)
        for_each_layer([&]<std::size_t I, class L>() {
          if constexpr (plan::copies[I] && L::parameter_count > 0)
            ops<Backend>::convert(block<T>(role::compute_gradient, I), block<variable_type>(role::gradient, I),
                                  L::parameter_count);
        });
    }
  }

  // Layer i's block of role r: in the model's memory, or (activations and caches during a predict
  // above the capacity) in predict's scratch.
  // (vars: the variable regions' base, mem_.data() or a host view of them.)
  template <class U>
  U* block(role r, std::size_t i, std::byte* vars = nullptr) const noexcept {
    if (plan::per_sample(r)) {
      const std::size_t k = sample_offsets::index(r);
      if (scratch_) return reinterpret_cast<U*>(scratch_->region(r) + scratch_->offsets.at[k][i]);
      return reinterpret_cast<U*>((vars ? vars : mem_.data()) + lay_.at(r) + offsets_.at[k][i]);
    }
    return reinterpret_cast<U*>((vars ? vars : mem_.data()) + lay_.at(r) + plan::offset(i, r, batch_capacity_));
  }

  // Layer I's compute type (one for all its buffers).
  template <std::size_t I>
  using layer_type = detail::compute_at_t<I, plan>;

  // What layer I sees: its parameters (the compute-type copy when it has one) and gradients,
  // its state (in the state region's type; batch_norm reads it as such), caches, masks, metadata.
  // (auto: a return type spelled with layer_type<I> puts the whole layer list into
  // the symbol of every such function, N^2 bytes of symbols over a network)
  template <std::size_t I>
  auto slot() const noexcept {
    using T = layer_type<I>;
    constexpr role p = plan::copies[I] ? role::compute_parameter : role::parameter;
    constexpr role g = plan::copies[I] ? role::compute_gradient : role::gradient;
    return layer_slot<T>{block<T>(p, I),
                         block<T>(g, I),
                         block<T>(role::state, I),
                         block<T>(role::cache, I),
                         block<std::uint8_t>(role::mask, I),
                         block<std::byte>(role::metadata, I),
                         has_derived<I, detail::type_at_t<I, layers>>() ? block<T>(role::derived, I) : nullptr};
  }
  // What the variable binding of layer i sees: the variables and gradients themselves.
  // (vars: a host view of the variable regions, as in block().)
  layer_slot<variable_type> variable_slot(std::size_t i, std::byte* vars = nullptr) const noexcept {
    return {block<variable_type>(role::parameter, i, vars), block<variable_type>(role::gradient, i, vars),
            block<variable_type>(role::state, i, vars),     nullptr,
            block<std::uint8_t>(role::mask, i, vars),       block<std::byte>(role::metadata, i, vars)};
  }
  // Draws layer i's variables with V, its variable binding; a 16-bit variable type (float16) draws
  // in float32 on the host and converts. (vars: a host view of the variable regions.)
  template <class V>
  void init_layer(std::size_t i, rng& g, std::byte* vars) {
    if constexpr (!is_half_v<variable_type>) {
      V::init(variable_slot(i, vars), g);
    } else {
      std::vector<float> p(V::parameter_count + 1), st(V::state_count + 1);
      layer_slot<float> f{p.data(), nullptr, st.data(), nullptr, block<std::uint8_t>(role::mask, i, vars),
                          block<std::byte>(role::metadata, i, vars)};
      V::init(f, g);
      // vars is host memory (a host view): converted on the host, whatever the backend
      variable_type* pv = block<variable_type>(role::parameter, i, vars);
      variable_type* sv = block<variable_type>(role::state, i, vars);
      for (std::size_t j = 0; j < V::parameter_count; ++j) pv[j] = variable_type(p[j]);
      for (std::size_t j = 0; j < V::state_count; ++j) sv[j] = variable_type(st[j]);
    }
  }
  // Layer I's output, in its compute type: its input where the layer aliases it (flatten,
  // reshape; nothing writes through that pointer, the layer's forward does not run).
  template <std::size_t I>
  auto* activation() const noexcept {
    if constexpr (plan::aliases[I]) return const_cast<layer_type<I>*>(input_of<I>());
    else return block<layer_type<I>>(role::activation, I);
  }
  // Layer I's input converted to its compute type (plan::converts_input[I]).
  template <std::size_t I>
  auto* converted_input() const noexcept {
    return block<layer_type<I>>(role::converted, I);
  }
  // The model's output rows (io): the last activation, or its widened copy.
  value_type* model_output() const noexcept {
    if constexpr (plan::converts_output) {
      const std::size_t b = scratch_ ? scratch_->batch : batch_capacity_;
      return reinterpret_cast<value_type*>(reinterpret_cast<std::byte*>(block<std::byte>(role::converted, layer_count - 1)) +
                                           plan::converted_input_bytes(layer_count - 1, b));
    } else {
      return activation<layer_count - 1>();
    }
  }

  template <class U = compute_type>
  U* delta(std::size_t k) const noexcept {
    return reinterpret_cast<U*>(mem_.data() + lay_.at(role::delta) + k * plan::delta_bytes(batch_capacity_));
  }
  template <std::size_t I>
  auto input_of() const noexcept {
    const layer_type<I>* p = nullptr;
    if constexpr (plan::converts_input[I]) p = converted_input<I>();
    else if constexpr (I == 0) p = x_;
    else p = activation<I - 1>();
    return p;
  }

  std::uint64_t seed_;
  rng gen_;
  sequence_mask mask_{};  // the step mask of the current pass (masking, embedding<..., mask_zero>)
  const cross_replica* replicas_ = nullptr;  // data_parallel's during its fit (training_access::set_replicas)
  const gradient_listener* listener_ = nullptr;  // and its gradient buckets (set_gradient_listener)
  detail::layer_update_hook* update_hook_ = nullptr;  // the step's per-layer update (set_update_hook)
  std::array<std::size_t, layer_count> rows_kernel_{};  // per layer: its kernel's values the fused backward's rows update
  plan_memory<Backend> mem_;
  // the step's scalars (scalars())
  using scalars_storage = std::conditional_t<Backend::memory::host_accessible, step_scalars, plan_memory<Backend>>;
  static scalars_storage make_scalars() {
    if constexpr (Backend::memory::host_accessible) return step_scalars{};
    else return plan_memory<Backend>(step_scalars_bytes);
  }
  scalars_storage scalars_ = make_scalars();
  plan_layout lay_{};
  std::size_t batch_capacity_ = 0;
  sample_offsets offsets_{};  // the per-sample blocks at batch_capacity_
  std::size_t slots_ = 0;
  std::size_t batch_ = 0;
  const value_type* x_ = nullptr;
  ctnn::optimizer_state opt_{};
  const predict_scratch* scratch_ = nullptr;  // set only while predict runs above the capacity
  feeder_type feeder_{};
  [[no_unique_address]] runner_type runner_{};
  std::vector<value_type> host_out_;  // host_outputs' copy (device backends)
  mutable bool stale_ = true;                  // the compute-type copy needs a refresh before the next forward
  // fused_mlp(): whether the backend's fused hook runs (from the backend's defaults for these layers)
  ctnn::fused_mlp_options fused_ = fused_mlp_defaults<Backend, layers>();
};

namespace detail {
// What fit's training step may change in a model besides its variables.
struct training_access {
  // data_parallel hands the model its replicas for synchronized layers, and takes them back.
  template <class M>
  static void set_replicas(M& m, const cross_replica* r) noexcept {
    m.replicas_ = r;
  }
  // ... and a listener told when each layer's gradients are final (none where the model
  // widens compute-type gradients after backward: they are final only then).
  template <class M>
  static void set_gradient_listener(M& m, const gradient_listener* l) noexcept {
    m.listener_ = l;
  }
  // ... and the step's per-layer update for the next backward (null: none).
  template <class M>
  static void set_update_hook(M& m, layer_update_hook* h) noexcept {
    m.update_hook_ = h;
  }
  template <class M>
  static ctnn::optimizer_state& optimizer_state(M& m) noexcept {
    return m.opt_;
  }
  // Makes m's slots fit optimizer O: on a first fit, or after another kind of
  // optimizer, the slots are zeroed and O::init_slots runs, the update count
  // and the learning-rate scale restart.
  template <class M, class O>
  static void prepare_optimizer(M& m, const O& opt) {
    m.reserve(1, opt.slots_per_parameter());
    const void* kind = &optimizer_kind_tag<O>;
    if (m.opt_.kind == kind) return;
    using W = typename M::variable_type;
    auto v = m.host_region(role::optimizer_slot, false);
    W* slots = reinterpret_cast<W*>(v.data());
    std::fill(slots, slots + v.size() / sizeof(W), W(0));
    opt.init_slots(slots, m.parameters().size());
    v.commit();
    m.opt_ = ctnn::optimizer_state{};
    m.opt_.kind = kind;
  }
};
}  // namespace detail

// The model of network Net, its parameters drawn from `seed`; Precision is an
// element type (float, double) or a precision policy, Backend a backend type.
template <Network Net, class Precision = float, class Backend = cpu<>>
model<Net, Precision, Backend> make_model(std::uint64_t seed = 0) {
  return model<Net, Precision, Backend>(seed);
}

template <class M>
inline constexpr bool is_model_v = false;
template <class N, class P, class B>
inline constexpr bool is_model_v<model<N, P, B>> = true;
template <class M>
concept Model = is_model_v<std::remove_cvref_t<M>>;

}  // namespace ctnn
