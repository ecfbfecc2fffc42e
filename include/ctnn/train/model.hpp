// ctnn/train/model.hpp — model<Net, Precision, Backend>: a network's storage and its passes.
//
// A model owns ONE allocation of its backend's memory, laid out by the typed
// plan Net::plan<Precision, Backend> (core/plan.hpp): parameters | gradients
// | state | masks | metadata | optimizer slots | activations | deltas |
// caches, each layer's block 64-byte aligned. Layers get typed pointers to
// their blocks (layer_slot); users get spans and, per declared buffer, a
// variable_ref with its name, role, element type and logical shape
// (for_each_variable). make_model<Net>(seed) initialises the parameters
// deterministically from the seed. forward(x, batch, training) runs the
// layers and returns the output rows; the caller keeps x alive until
// backward(), which starts from output_gradient() (written by the loss) and
// leaves the parameter gradients in gradients(). The allocation grows (one
// reallocation, variables and optimizer state kept) when forward() or fit is
// asked for a larger batch or more optimizer slots; it never shrinks.
// predict() never reallocates it: a chunk larger than the batch capacity runs
// its activations and caches in scratch memory of its own, so spans of the
// variables (parameters(), layer_parameters<I>(), ...) stay valid.
//
// The optimizer's state belongs to the model it updates: its slots are a plan
// region and its update and step counts and learning-rate scale live here
// (optimizer_state()). fit() (re)initialises them when the model meets an
// optimizer of another kind than the one its slots were made for, or none
// yet; reset_optimizer() forgets them.
#pragma once
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "../backends/cpu/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/precision.hpp"
#include "../core/rng.hpp"
#include "../core/sequential.hpp"

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
// The rate the next update uses: the schedule's at schedule_step, times the model's scale.
template <class O>
double current_learning_rate(const O& opt, const optimizer_state& os) {
  return opt.learning_rate(schedule_step(opt, os)) * os.learning_rate_scale;
}
}  // namespace detail

namespace detail {
// Calls f(variable_ref) for every parameter, state, mask and metadata buffer
// of the bound layers Layers (a std::tuple) laid out by Plan under Policy in
// the memory at base (layout lay, batch capacity batch), layer by layer in
// declaration order. The host model and the CUDA model (cuda/model.cuh) share it.
template <class Layers, class Policy, class Plan, class F>
void for_each_variable_in(std::byte* base, const plan_layout& lay, std::size_t batch, F&& f) {
  auto layer = [&]<std::size_t K, class L>() {
    for (std::size_t b = 0; b < L::buffers.size(); ++b) {
      const buffer& d = L::buffers[b];
      if (d.kind == role::cache) continue;
      variable_ref v;
      v.layer = K;
      v.name = d.name;
      v.kind = d.kind;
      v.type = d.type;
      v.element_bytes = elem_bytes<Policy>(d.type);
      v.dims = d.dims;
      v.rank = d.rank;
      v.extent = d.extent;
      v.offset = Plan::offset(K, d.kind, batch) + buffer_offset<Policy>(L::buffers, b);
      v.data = base + lay.at(d.kind) + v.offset;
      if constexpr (requires(const std::byte* p) {
                      { L::check_metadata(std::string_view{}, p) } -> std::same_as<std::string>;
                    })
        if (d.kind == role::metadata) v.check = &L::check_metadata;
      f(v);
    }
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (layer.template operator()<I, std::tuple_element_t<I, Layers>>(), ...);
  }(std::make_index_sequence<std::tuple_size_v<Layers>>{});
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

template <Network Net, class Precision = float, class Backend = cpu<>>
class model {
 public:
  using network = Net;
  using policy = precision::policy_of_t<Precision>;
  using variable_type = typename policy::variable_type;
  using compute_type = typename policy::compute_type;
  // the element type of inputs, outputs and dL/dy: compute_type, or float
  // under the 16-bit policies (losses and metrics run in float32 there)
  using value_type = typename policy::io_type;
  using backend = Backend;
  static_assert(BackendOps<Backend>, "model: ops<Backend> must provide the whole op set (core/backend_ops.hpp)");
  using layers = typename Net::template bound<policy, Backend>;
  using plan = typename Net::template plan<policy, Backend>;
  static constexpr std::size_t layer_count = Net::layer_count;
  static constexpr std::size_t input_size = Net::input_type::size;
  static constexpr std::size_t output_size = Net::output_type::size;
  static constexpr std::size_t parameter_count = Net::parameter_count;
  static constexpr std::size_t state_count = Net::state_count;
  static_assert(Backend::memory::host_accessible,
                "model: this backend's memory is not host-accessible; a device backend brings its own model");

  explicit model(std::uint64_t seed = 0) : seed_(seed), gen_(seed) {
    reserve(1, 0);
    initialize(seed);
  }

  // Re-draws every parameter from `seed` (as a fresh make_model would) and forgets the optimizer state.
  void initialize(std::uint64_t seed) {
    seed_ = seed;
    rng init_gen(seed);
    for_each_layer([&]<std::size_t I, class L>() { L::init(slot<I>(), init_gen); });
    gen_ = rng::derive(seed, 0x64726f70ull);  // stream for dropout and other run-time randomness
    reset_optimizer();
  }

  std::uint64_t seed() const noexcept { return seed_; }
  rng& generator() noexcept { return gen_; }

  // Ensures the memory holds a batch of `batch` samples and `slots` optimizer
  // values per parameter. Variables and (same slot count) slots survive.
  void reserve(std::size_t batch, std::size_t slots) {
    if (batch <= batch_capacity_ && slots == slots_) return;
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
    mem_ = std::move(nm);
    lay_ = nl;
    batch_capacity_ = new_batch;
    slots_ = slots;
  }

  std::size_t batch_capacity() const noexcept { return batch_capacity_; }
  std::size_t memory_bytes() const noexcept { return mem_.size(); }
  const plan_layout& layout() const noexcept { return lay_; }

  // The regions as flat spans (layers one after another, each block 64-byte
  // aligned; padding between blocks is zero and stays zero).
  std::span<variable_type> parameters() noexcept { return region<variable_type>(role::parameter); }
  std::span<const variable_type> parameters() const noexcept { return region<const variable_type>(role::parameter); }
  std::span<variable_type> gradients() noexcept { return region<variable_type>(role::gradient); }
  std::span<variable_type> state() noexcept { return region<variable_type>(role::state); }
  std::span<const variable_type> state() const noexcept { return region<const variable_type>(role::state); }
  std::span<std::uint8_t> masks() noexcept { return region<std::uint8_t>(role::mask); }
  std::span<variable_type> optimizer_slots() noexcept { return region<variable_type>(role::optimizer_slot); }

  // Parameters of layer I (all its parameter buffers, in declaration order).
  template <std::size_t I>
  std::span<variable_type> layer_parameters() noexcept {
    using L = std::tuple_element_t<I, layers>;
    return {slot<I>().params, L::parameter_count};
  }
  template <std::size_t I>
  std::span<variable_type> layer_gradients() noexcept {
    using L = std::tuple_element_t<I, layers>;
    return {slot<I>().grads, L::parameter_count};
  }

  // Calls f(variable_ref) for every declared parameter, state, mask and
  // metadata buffer, layer by layer in declaration order.
  template <class F>
  void for_each_variable(F&& f) const {
    detail::for_each_variable_in<layers, policy, plan>(mem_.data(), lay_, batch_capacity_, f);
  }

  // Runs every layer on x[batch, input_size]; returns the output rows.
  const value_type* forward(const value_type* x, std::size_t batch, bool training) {
    if (batch == 0) throw std::invalid_argument("model::forward: the batch is empty");
    reserve(batch, slots_);
    return run_layers(x, batch, training);
  }
  const value_type* output() noexcept { return activation<layer_count - 1>(); }

  // Where the loss writes dL/d(output) for the last forward's batch.
  value_type* output_gradient() noexcept { return delta<value_type>(0); }

  // Back-propagates output_gradient() through every layer.
  void backward() {
    const run_info r{batch_, true, &gen_};
    std::size_t cur = 0;  // which delta buffer holds this layer's dL/d(output)
    for_each_layer_reverse([&]<std::size_t I, class L>() {
      using In = std::remove_cv_t<std::remove_pointer_t<decltype(input_of<I>())>>;
      using Out = std::remove_pointer_t<decltype(activation<I>())>;
      In* dx = I == 0 ? nullptr : delta<In>(1 - cur);
      L::backward(slot<I>(), input_of<I>(), activation<I>(), delta<Out>(cur), dx, r);
      cur = 1 - cur;
    });
  }

  // Sum of the layers' regularization penalties.
  double penalty() {
    double p = 0;
    for_each_layer([&]<std::size_t I, class L>() {
      if constexpr (requires { L::penalty(slot<I>()); }) p += double(L::penalty(slot<I>()));
    });
    return p;
  }
  void add_penalty_gradients() {
    for_each_layer([&]<std::size_t I, class L>() {
      if constexpr (requires { L::add_penalty_gradient(slot<I>()); }) L::add_penalty_gradient(slot<I>());
    });
  }

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
      const value_type* y = run_layers(x + i * input_size, b, false);
      std::copy(y, y + b * output_size, out.data() + i * output_size);
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

 private:
  friend struct detail::training_access;

  template <class F>
  static void for_each_layer(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f.template operator()<I, std::tuple_element_t<I, layers>>(), ...);
    }(std::make_index_sequence<layer_count>{});
  }
  template <class F>
  static void for_each_layer_reverse(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f.template operator()<layer_count - 1 - I, std::tuple_element_t<layer_count - 1 - I, layers>>(), ...);
    }(std::make_index_sequence<layer_count>{});
  }

  template <class U>
  std::span<U> region(role r) const noexcept {
    return {reinterpret_cast<U*>(mem_.data() + lay_.at(r)), lay_.bytes(r) / sizeof(U)};
  }
  // predict's memory for a chunk above the batch capacity: the activation and cache regions of the
  // plan at that batch (all a forward pass without training writes), one after the other.
  struct predict_scratch {
    std::size_t batch;
    plan_layout lay;
    plan_memory<Backend> mem;
    explicit predict_scratch(std::size_t b)
        : batch(b), lay(plan::layout(b, 0)), mem(lay.bytes(role::activation) + lay.bytes(role::cache)) {}
    std::byte* region(role r) const noexcept {
      return mem.data() + (r == role::cache ? lay.bytes(role::activation) : 0);
    }
  };

  // The runs every forward pass shares (forward reserves the memory first, predict does not).
  const value_type* run_layers(const value_type* x, std::size_t batch, bool training) {
    x_ = x;
    batch_ = batch;
    const run_info r{batch, training, &gen_};
    for_each_layer([&]<std::size_t I, class L>() { L::forward(slot<I>(), input_of<I>(), activation<I>(), r); });
    return activation<layer_count - 1>();
  }

  // Layer i's block of role r: in the model's memory, or (activations and caches during a predict
  // above the capacity) in predict's scratch.
  template <class U>
  U* block(role r, std::size_t i) const noexcept {
    if (scratch_ && plan::per_sample(r)) return reinterpret_cast<U*>(scratch_->region(r) + plan::offset(i, r, scratch_->batch));
    return reinterpret_cast<U*>(mem_.data() + lay_.at(r) + plan::offset(i, r, batch_capacity_));
  }

  template <std::size_t I>
  layer_slot<variable_type, compute_type> slot() const noexcept {
    return {block<variable_type>(role::parameter, I), block<variable_type>(role::gradient, I),
            block<variable_type>(role::state, I),     block<compute_type>(role::cache, I),
            block<std::uint8_t>(role::mask, I),       block<std::byte>(role::metadata, I)};
  }
  // Layer I's output: compute_type, the last layer's value_type.
  template <std::size_t I>
  auto* activation() const noexcept {
    using U = std::conditional_t<I + 1 == layer_count, value_type, compute_type>;
    return block<U>(role::activation, I);
  }
  template <class U = compute_type>
  U* delta(std::size_t k) const noexcept {
    return reinterpret_cast<U*>(mem_.data() + lay_.at(role::delta) + k * plan::delta_bytes(batch_capacity_));
  }
  template <std::size_t I>
  auto input_of() const noexcept {
    if constexpr (I == 0) {
      return x_;
    } else {
      return activation<I - 1>();
    }
  }

  std::uint64_t seed_;
  rng gen_;
  plan_memory<Backend> mem_;
  plan_layout lay_{};
  std::size_t batch_capacity_ = 0;
  std::size_t slots_ = 0;
  std::size_t batch_ = 0;
  const value_type* x_ = nullptr;
  ctnn::optimizer_state opt_{};
  const predict_scratch* scratch_ = nullptr;  // set only while predict runs above the capacity
};

namespace detail {
// What fit's training step may change in a model besides its variables.
struct training_access {
  template <class M>
  static ctnn::optimizer_state& optimizer_state(M& m) noexcept {
    return m.opt_;
  }
  // Makes m's slots fit optimizer O: on a first fit, or after another kind of
  // optimizer, the slots are zeroed and O::init_slots runs, the update count
  // and the learning-rate scale restart.
  template <class M, class O>
  static void prepare_optimizer(M& m, const O& opt) {
    m.reserve(1, O::slots_per_parameter);
    const void* kind = &optimizer_kind_tag<O>;
    if (m.opt_.kind == kind) return;
    auto slots = m.optimizer_slots();
    std::fill(slots.begin(), slots.end(), typename M::variable_type(0));
    opt.init_slots(slots.data(), m.parameters().size());
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
