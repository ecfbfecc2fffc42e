// ctnn/cuda/model.cuh — model<Net, P, cuda<SM>>: a network on one CUDA device.
//
// The same typed plan as the CPU model (core/plan.hpp), laid out in ONE
// device allocation (cuda_device_memory): parameters | gradients | state |
// masks | metadata | optimizer slots | activations | deltas | caches. The
// layers are the network's bound layers for cuda<SM> (the generic ones
// through ops<cuda<SM>>, dropout and batch_norm from cuda/layers.cuh).
// make_model<Net, P, cuda<90>>(seed) draws the parameters on the host
// exactly as the CPU model does (a host mirror of the variable regions, then
// one copy), so a CPU and a device model of one seed start from the same
// bits. forward() takes and returns device rows of compute_type; predict()
// takes and returns host rows of value_type; get_variables()/set_variables()
// copy the variable regions (parameters .. metadata) to and from the host;
// forward_graph() replays inference as one captured CUDA graph;
// variables_to_host() / variables_from_host() give the variables in host
// memory with the CPU model's interface (cuda/host_variables.cuh), through
// which io::save_weights(m, path) and io::load_weights(m, path) write and
// read the CPU model's weights files.
// Precision (P): float32, a uniform policy<__half> / policy<__nv_bfloat16>,
// precision::float16 (inference: everything __half), and the mixed policies
// mixed_float16 / mixed_bfloat16 (as Keras): the layers compute in __half /
// __nv_bfloat16 (activations, deltas, their copy of the weights, their
// weight gradients, caches; batch_norm's moving statistics stay float32 as
// in Keras: cuda_detail::mixed_layer_policy, cuda/layers.cuh), and the model
// keeps the float32 variables in front of the layers' plan in the same
// allocation ("master" weights laid out by the float32 plan: parameters,
// gradients, state, masks, metadata, optimizer slots). parameters(),
// gradients(), state(), optimizer_slots(), for_each_variable(),
// get_variables() and download() are the float32 ones; the layers' 16-bit
// weights are refreshed from them after every update and set_variables
// (push_parameters), their gradients widened into the float32 gradients
// (with the loss scale undone) by cuda/fit.cuh, their moving statistics
// copied into the float32 state on every read (pull_state). value_type (inputs, outputs of
// predict, the datasets of fit) is float under the 16-bit policies.
// Regularizers (l1, l2, l1_l2, dynamic_l1, dynamic_l2) run on the device:
// penalty() (waits) and add_penalty_gradients() on the float32 variables.
// Inference of a small MLP (cuda/fused_mlp.cuh: dense layers of width <=
// 128, flatten) runs as one fused kernel unless options().fused_mlp is false;
// its training backward runs fused when options().fused_mlp_backward is set
// (off by default: not yet run on a GPU).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../regularizers/l1.hpp"
#include "../../regularizers/l1_l2.hpp"
#include "../../regularizers/regularizers.hpp"
#include "../../train/model.hpp"
#include "fused_mlp.cuh"
#include "host_variables.cuh"
#include "layers.cuh"
#include "memory.cuh"
#include "ops.cuh"

namespace ctnn {

namespace cuda_detail {
// Instantiated CUDA graphs keyed by (input pointer, batch). A copy starts
// empty: a graph holds the pointers of the model that captured it.
class graph_cache {
 public:
  graph_cache() = default;
  graph_cache(const graph_cache&) {}
  graph_cache& operator=(const graph_cache&) {
    clear();
    return *this;
  }
  ~graph_cache() { clear(); }
  cudaGraphExec_t find(const void* x, std::size_t batch) const {
    const auto it = execs_.find({x, batch});
    return it == execs_.end() ? nullptr : it->second;
  }
  void add(const void* x, std::size_t batch, cudaGraphExec_t e) { execs_[{x, batch}] = e; }
  void clear() noexcept {
    for (auto& [k, e] : execs_) cudaGraphExecDestroy(e);
    execs_.clear();
  }
  std::size_t size() const noexcept { return execs_.size(); }

 private:
  std::map<std::pair<const void*, std::size_t>, cudaGraphExec_t> execs_;
};

// Captures what queue() puts on stream s as a graph, instantiates it, adds it
// to cache under (x, batch) and launches it. False, with nothing queued and
// the CUDA error cleared, when any of it fails (the caller then runs queue()
// itself): a graph is an optimisation, never a requirement.
template <class F>
bool capture_and_launch(graph_cache& cache, const void* x, std::size_t batch, cudaStream_t s, F&& queue) {
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  bool queued = true;
  try {
    queue();
  } catch (...) {
    queued = false;
  }
  cudaGraph_t g = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(s, &g);
  cudaGraphExec_t e = nullptr;
  const bool ok = queued && ended == cudaSuccess && g && cudaGraphInstantiate(&e, g, 0) == cudaSuccess;
  if (g) cudaGraphDestroy(g);
  if (!ok) {
    if (e) cudaGraphExecDestroy(e);
    cudaGetLastError();
    return false;
  }
  cache.add(x, batch, e);
  CTNN_CUDA_CHECK(cudaGraphLaunch(e, s));
  return true;
}

template <class L>
constexpr bool regularized() {
  if constexpr (requires { L::Reg::active; })
    return L::Reg::active;
  else
    return false;
}
template <class L>
constexpr bool draws_random() {
  if constexpr (requires { L::draws_random; })
    return L::draws_random;
  else
    return false;
}

// The factors (l1, l2) of penalty l1 sum|w| + l2 sum w^2 of regularizer R;
// metadata: the layer's metadata block on the host (dynamic factors).
template <class R>
inline constexpr bool is_l1 = false;
template <auto L>
inline constexpr bool is_l1<l1<L>> = true;
template <class R>
inline constexpr bool is_l2 = false;
template <auto L>
inline constexpr bool is_l2<l2<L>> = true;
template <class R>
inline constexpr bool is_l1_l2 = false;
template <auto A, auto B>
inline constexpr bool is_l1_l2<l1_l2<A, B>> = true;
template <class R>
std::pair<double, double> penalty_factors(const std::byte* metadata) {
  if constexpr (is_l1<R>) return {R::lambda, 0.0};
  else if constexpr (is_l2<R>) return {0.0, R::lambda};
  else if constexpr (is_l1_l2<R>) return {R::lambda1, R::lambda2};
  else if constexpr (std::is_same_v<R, dynamic_l2>) return {0.0, detail::regularization_factor(metadata, "dynamic_l2")};
  else if constexpr (std::is_same_v<R, dynamic_l1>) return {detail::regularization_factor(metadata, "dynamic_l1"), 0.0};
  else static_assert(sizeof(R) == 0, "model<cuda>: this regularizer has no device form (l1, l2, l1_l2, dynamic_l1, dynamic_l2 have)");
}

// The device storage type of a host element type (float16_t -> __half, bfloat16_t -> __nv_bfloat16).
template <class T>
struct device_type {
  using type = T;
};
template <>
struct device_type<float16_t> {
  using type = __half;
};
template <>
struct device_type<bfloat16_t> {
  using type = __nv_bfloat16;
};
template <class T>
using device_type_t = typename device_type<T>::type;

// How precision policy P runs on the device: the layers are bound under the
// uniform policy of the compute type (mixed_layer_policy when the variables
// are wider: batch_norm's statistics stay float32, cuda/layers.cuh).
template <class P>
struct device_policy {
  using variable_type = device_type_t<typename P::variable_type>;
  using compute_type = device_type_t<typename P::compute_type>;
  static constexpr bool mixed = !std::is_same_v<variable_type, compute_type>;
  using layer_policy =
      std::conditional_t<mixed, mixed_layer_policy<compute_type>, precision::policy<compute_type>>;
  using io_type = std::conditional_t<P::half, float, compute_type>;
};

inline constexpr std::size_t align256(std::size_t n) { return (n + 255) / 256 * 256; }

// Whether bound layer L keeps its state in float32 in the layers' plan under
// policy P (batch_norm under mixed_layer_policy) rather than in compute_type.
template <class L, class P>
constexpr bool float32_state() {
  constexpr std::size_t bytes = layer_role_bytes<P>(L::buffers, role::state);
  static_assert(bytes == L::state_count * sizeof(float) ||
                    bytes == L::state_count * sizeof(typename P::compute_type),
                "model<cuda>: a layer's state buffers must be all float32 or all compute_type");
  return L::state_count > 0 && bytes == L::state_count * sizeof(float);
}
}  // namespace cuda_detail

// Options of a device model (model.options()).
struct cuda_model_options {
  bool fused_mlp = true;        // inference of a small MLP as one kernel (cuda/fused_mlp.cuh) when the network fits
  bool graph_training = true;   // fit captures the training step as a CUDA graph (cuda/fit.cuh) when it can
  // training's backward of a small MLP as the fused backward kernel (cuda/fused_mlp.cuh); off until a device run checks it
  bool fused_mlp_backward = false;
};

template <Network Net, class Precision, int SM>
class model<Net, Precision, cuda<SM>> {
 public:
  using network = Net;
  using policy = precision::policy_of_t<Precision>;
  using device_policy = cuda_detail::device_policy<policy>;
  using variable_type = typename device_policy::variable_type;
  using compute_type = typename device_policy::compute_type;
  using value_type = typename device_policy::io_type;
  using backend = cuda<SM>;
  using layer_policy = typename device_policy::layer_policy;
  using layers = typename Net::template bound<layer_policy, backend>;
  using plan = typename Net::template plan<layer_policy, backend>;
  // the float32 variables of a mixed model, laid out by the float32 plan
  static constexpr bool mixed = device_policy::mixed;
  using master_layers = typename Net::template bound<precision::float32, backend>;
  using master_plan = typename Net::template plan<precision::float32, backend>;
  // The variables the user sees (the float32 ones under a mixed policy): their bound layers, policy and plan.
  using variable_layers = std::conditional_t<mixed, master_layers, layers>;
  using variable_policy = std::conditional_t<mixed, precision::float32, layer_policy>;
  using variable_plan = std::conditional_t<mixed, master_plan, plan>;
  static constexpr std::size_t layer_count = Net::layer_count;
  static constexpr std::size_t input_size = Net::input_type::size;
  static constexpr std::size_t output_size = Net::output_type::size;
  static constexpr std::size_t parameter_count = Net::parameter_count;
  static constexpr std::size_t state_count = Net::state_count;
  static_assert(cuda_storage<compute_type> && cuda_storage<variable_type>,
                "model: the CUDA backend stores float, __half or __nv_bfloat16");
  static_assert(!mixed || std::is_same_v<variable_type, float>,
                "model: on the CUDA backend a mixed policy keeps its variables in float");
  static constexpr bool fusable = fused_mlp_fits<layers>();

  explicit model(std::uint64_t seed = 0) : seed_(seed), gen_(seed) {
    reserve(1, 0);
    initialize(seed);
  }

  void initialize(std::uint64_t seed) {
    seed_ = seed;
    rng init_gen(seed);
    std::vector<std::byte> host(var_layout().at(role::optimizer_slot));
    if constexpr (mixed)
      for_each_layer_of<master_layers>([&]<std::size_t I, class L>() {
        L::init(make_slot<master_plan, float, float, I>(host.data(), mlay_, 1), init_gen);
      });
    else
      for_each_layer([&]<std::size_t I, class L>() { L::init(slot<I>(host.data()), init_gen); });
    ops<backend>::synchronize();
    cuda_device_memory::copy(var_base(), host.data(), host.size());
    push_variables();
    gen_ = rng::derive(seed, 0x64726f70ull);
    reset_optimizer();
  }

  std::uint64_t seed() const noexcept { return seed_; }
  rng& generator() noexcept { return gen_; }
  cuda_model_options& options() noexcept { return options_; }
  const cuda_model_options& options() const noexcept { return options_; }

  void reserve(std::size_t batch, std::size_t slots) {
    if (batch <= batch_capacity_ && slots == slots_) return;
    const std::size_t new_batch = std::max(batch, batch_capacity_);
    // mixed: the slots are float32, in the master part; the layers' plan holds none
    const plan_layout nl = plan::layout(new_batch, mixed ? 0 : slots);
    const plan_layout nml = mixed ? master_plan::layout(1, slots) : plan_layout{};
    const std::size_t nmb = mixed ? cuda_detail::align256(nml.at(role::activation)) : 0;
    ops<backend>::synchronize();  // nothing queued may still use the old memory
    plan_memory<backend> nm(nmb + nl.total);
    if (mem_.size()) {
      cuda_device_memory::copy(nm.data() + nmb, base(), lay_.at(role::optimizer_slot));
      if constexpr (mixed) cuda_device_memory::copy(nm.data(), mem_.data(), mlay_.at(role::optimizer_slot));
      const plan_layout& old_vars = var_layout();
      const plan_layout& new_vars = mixed ? nml : nl;
      std::byte* new_var_base = mixed ? nm.data() : nm.data() + nmb;
      if (slots == slots_)
        cuda_device_memory::copy(new_var_base + new_vars.at(role::optimizer_slot),
                                 var_base() + old_vars.at(role::optimizer_slot), old_vars.bytes(role::optimizer_slot));
      else
        opt_.kind = nullptr;
    }
    graphs_.clear();  // they captured the old memory's pointers
    mem_ = std::move(nm);
    lay_ = nl;
    mlay_ = nml;
    master_bytes_ = nmb;
    batch_capacity_ = new_batch;
    slots_ = slots;
  }

  std::size_t batch_capacity() const noexcept { return batch_capacity_; }
  std::size_t memory_bytes() const noexcept { return mem_.size(); }
  // The layers' plan (under a mixed policy the float32 variables come before it: master_layout()).
  const plan_layout& layout() const noexcept { return lay_; }
  const plan_layout& master_layout() const noexcept { return mlay_; }
  // Changes whenever the memory moves (a captured graph holds its pointers).
  const void* memory_id() const noexcept { return mem_.data(); }

  // Device spans of the variables (float32 under a mixed policy; never dereference them on the host).
  std::span<variable_type> parameters() noexcept { return region<variable_type>(role::parameter); }
  std::span<variable_type> gradients() noexcept { return region<variable_type>(role::gradient); }
  std::span<variable_type> state() noexcept { return region<variable_type>(role::state); }
  std::span<variable_type> optimizer_slots() noexcept { return region<variable_type>(role::optimizer_slot); }

  // The variable regions (parameters, gradients, state, masks, metadata) as bytes, to and from the host.
  std::vector<std::byte> get_variables() const {
    pull_state();
    std::vector<std::byte> h(var_layout().at(role::optimizer_slot));
    ops<backend>::synchronize();
    cuda_device_memory::copy(h.data(), var_base(), h.size());
    return h;
  }
  void set_variables(std::span<const std::byte> h) {
    if (h.size() != var_layout().at(role::optimizer_slot))
      throw std::invalid_argument("model<cuda>::set_variables: " + std::to_string(h.size()) + " bytes given, the plan's "
                                  "variables take " + std::to_string(var_layout().at(role::optimizer_slot)));
    ops<backend>::synchronize();
    cuda_device_memory::copy(var_base(), h.data(), h.size());
    push_variables();
  }
  // The variables in host memory (cuda/host_variables.cuh: parameters(),
  // state(), for_each_variable, io::save_weights / load_weights) and back.
  host_variables<model> variables_to_host() const { return host_variables<model>(get_variables()); }
  void variables_from_host(const host_variables<model>& h) { set_variables(h.bytes()); }
  // One region (role::parameter, gradient, state) as host values.
  std::vector<variable_type> download(role r) const {
    if (r == role::state) pull_state();
    std::vector<variable_type> h(var_layout().bytes(r) / sizeof(variable_type));
    ops<backend>::synchronize();
    cuda_device_memory::copy(h.data(), var_base() + var_layout().at(r), h.size() * sizeof(variable_type));
    return h;
  }

  // Calls f(variable_ref) for every declared parameter, state, mask and
  // metadata buffer, as the CPU model does (train/model.hpp's walk); data
  // points into device memory (the float32 variables under a mixed policy).
  template <class F>
  void for_each_variable(F&& f) const {
    if constexpr (mixed) {
      pull_state();
      detail::for_each_variable_in<master_layers, precision::float32, master_plan>(mem_.data(), mlay_, 1, f);
    } else {
      detail::for_each_variable_in<layers, layer_policy, plan>(base(), lay_, batch_capacity_, f);
    }
  }

  // Runs every layer on the device rows x[batch, input_size]; returns the
  // device output rows. Inference of a network that fits the fused MLP
  // kernel runs as that one kernel (options().fused_mlp).
  const compute_type* forward(const compute_type* x, std::size_t batch, bool training) {
    if (batch == 0) throw std::invalid_argument("model::forward: the batch is empty");
    reserve(batch, slots_);
    x_ = x;
    batch_ = batch;
    if constexpr (fusable) {
      if (!training && fused_active()) {
        fused_mlp_forward<layers>(x, activation<layer_count - 1>(), batch,
                                  [&]<std::size_t I>() { return slot<I>(base()).params; });
        return activation<layer_count - 1>();
      }
    }
    const run_info r{batch, training, &gen_};
    for_each_layer([&]<std::size_t I, class L>() { L::forward(slot<I>(base()), input_of<I>(), activation<I>(), r); });
    return activation<layer_count - 1>();
  }
  const compute_type* output() noexcept { return activation<layer_count - 1>(); }
  // Whether inference runs as the fused MLP kernel now (the network fits,
  // options().fused_mlp, and the device has the shared memory it needs).
  bool fused_active() const {
    if constexpr (fusable) return options_.fused_mlp && fused_mlp_ready<layers>();
    else return false;
  }
  // Whether backward() runs as the fused backward kernel (options().fused_mlp_backward, off by default).
  bool fused_backward_active() const {
    if constexpr (fusable) return options_.fused_mlp_backward && fused_mlp_backward_ready<layers>();
    else return false;
  }

  // Inference through a CUDA graph: the first call for an (x, batch) pair
  // captures forward(x, batch, false) on the compute stream and instantiates
  // it; every call launches that graph (one launch instead of one per kernel
  // and GEMM; the values in x may change between calls, the pointer may not).
  // Returns the device output rows, ready once the stream is synchronized.
  // When capture fails the forward runs uncaptured (and later calls do not try again).
  const compute_type* forward_graph(const compute_type* x, std::size_t batch) {
    if (batch == 0) throw std::invalid_argument("model::forward_graph: the batch is empty");
    reserve(batch, slots_);
    fused_active();  // its one-time setup (a function attribute) must not run inside a capture
    const cudaStream_t s = ops<backend>::stream();
    x_ = x;
    batch_ = batch;
    if (cudaGraphExec_t e = graphs_.find(x, batch)) {
      CTNN_CUDA_CHECK(cudaGraphLaunch(e, s));
      return output();
    }
    if (graph_failed_ || !cuda_detail::capture_and_launch(graphs_, x, batch, s, [&] { forward(x, batch, false); })) {
      graph_failed_ = true;  // not tried again for this model
      forward(x, batch, false);
    }
    return output();
  }
  std::size_t captured_graphs() const noexcept { return graphs_.size(); }
  compute_type* output_gradient() noexcept { return delta(0); }

  void backward() {
    if constexpr (fusable) {
      if (fused_backward_active()) {
        fused_mlp_backward<layers>(static_cast<const compute_type*>(delta(0)), batch_, [&]<std::size_t I>() {
          const auto s = slot<I>(base());
          return fused_layer_io<compute_type>{s.params, s.grads, input_of<I>(), activation<I>()};
        });
        return;
      }
    }
    const run_info r{batch_, true, &gen_};
    compute_type* cur = delta(0);
    compute_type* other = delta(1);
    for_each_layer_reverse([&]<std::size_t I, class L>() {
      compute_type* dx = I == 0 ? nullptr : other;
      L::backward(slot<I>(base()), input_of<I>(), activation<I>(), cur, dx, r);
      std::swap(cur, other);
    });
  }

  // Under a mixed policy: the layers' (16-bit) weight gradients times *inv
  // into the float32 gradients, *bad = 1 when one is not finite; otherwise
  // the gradients times *inv in place. inv and bad are device pointers;
  // nothing waits (cuda/fit.cuh: loss scaling).
  void unscale_gradients(const float* inv, int* bad) {
    if constexpr (mixed) {
      for_each_layer([&]<std::size_t I, class L>() {
        if constexpr (L::parameter_count > 0)
          ops<backend>::unscale_gradients(static_cast<const compute_type*>(slot<I>(base()).grads),
                                          master_slot<I>().grads, L::parameter_count, inv, bad);
      });
    } else if constexpr (std::is_same_v<variable_type, float>) {
      ops<backend>::unscale_gradients(gradients().data(), gradients().data(), gradients().size(), inv, bad);
    } else {
      static_assert(sizeof(variable_type) == 0, "model<cuda>: a loss scale needs float32 gradients (a mixed policy)");
    }
  }
  // Under a mixed policy: the float32 parameters rounded into the layers'
  // weights (after an update). Nothing waits.
  void push_parameters() {
    if constexpr (mixed)
      for_each_layer([&]<std::size_t I, class L>() {
        if constexpr (L::parameter_count > 0)
          ops<backend>::convert(static_cast<const float*>(master_slot<I>().params), slot<I>(base()).params,
                                L::parameter_count);
      });
  }

  // Whether a layer draws random numbers in training (dropout): such a step is never captured.
  static constexpr bool draws_random = []<std::size_t... I>(std::index_sequence<I...>) {
    return (cuda_detail::draws_random<std::tuple_element_t<I, layers>>() || ...);
  }(std::make_index_sequence<layer_count>{});
  static constexpr bool regularized = []<std::size_t... I>(std::index_sequence<I...>) {
    return (cuda_detail::regularized<std::tuple_element_t<I, layers>>() || ...);
  }(std::make_index_sequence<layer_count>{});

  // Sum of the layers' regularization penalties on the (float32) variables; waits for the device.
  double penalty() {
    double p = 0;
    for_each_layer([&]<std::size_t I, class L>() {
      if constexpr (cuda_detail::regularized<L>()) {
        const auto [l1, l2] = factors<I, L>();
        const variable_type* w = var_slot<I>().params;
        if (l1 != 0) p += l1 * ops<backend>::sum_abs(w, L::kernel_count);
        if (l2 != 0) p += l2 * ops<backend>::sum_squares(w, L::kernel_count);
      }
    });
    return p;
  }
  void add_penalty_gradients() {
    for_each_layer([&]<std::size_t I, class L>() {
      if constexpr (cuda_detail::regularized<L>()) {
        const auto [l1, l2] = factors<I, L>();
        auto s = var_slot<I>();
        ops<backend>::add_penalty_gradient(static_cast<const variable_type*>(s.params), s.grads, L::kernel_count,
                                           float(l1), float(l2));
      }
    });
  }

  // Host in, host out: n samples in chunks of at most `batch`.
  std::vector<value_type> predict(const value_type* x, std::size_t n, std::size_t batch = 256) {
    std::vector<value_type> out(n * output_size);
    if (n == 0) return out;
    if (batch == 0) throw std::invalid_argument("model::predict: the batch is 0");
    const std::size_t most = std::min(batch, n);
    device_buffer<value_type> dio(most * std::max(input_size, output_size));
    device_buffer<compute_type> dx(std::is_same_v<value_type, compute_type> ? 0 : most * input_size);
    for (std::size_t i = 0; i < n; i += batch) {
      const std::size_t b = std::min(batch, n - i);
      ops<backend>::synchronize();
      cuda_device_memory::copy(dio.data(), x + i * input_size, b * input_size * sizeof(value_type));
      const compute_type* in;
      if constexpr (std::is_same_v<value_type, compute_type>) {
        in = dio.data();
      } else {
        ops<backend>::convert(static_cast<const float*>(dio.data()), dx.data(), b * input_size);
        in = dx.data();
      }
      const compute_type* y = forward(in, b, false);
      const value_type* yo;
      if constexpr (std::is_same_v<value_type, compute_type>) {
        yo = y;
      } else {
        ops<backend>::widen(y, dio.data(), b * output_size);
        yo = dio.data();
      }
      ops<backend>::synchronize();
      cuda_device_memory::copy(out.data() + i * output_size, yo, b * output_size * sizeof(value_type));
    }
    return out;
  }

  const ctnn::optimizer_state& optimizer_state() const noexcept { return opt_; }
  std::int64_t optimizer_iterations() const noexcept { return opt_.iterations; }
  void reset_optimizer() noexcept { opt_ = ctnn::optimizer_state{}; }

  // Makes the slots fit optimizer O (as the CPU model's training access does):
  // zeroed, O::init_slots run on a host copy, the update count restarted.
  template <class O>
  void prepare_optimizer(const O& opt) {
    reserve(1, O::slots_per_parameter);
    const void* kind = &detail::optimizer_kind_tag<O>;
    if (opt_.kind == kind) return;
    auto slots = optimizer_slots();
    std::vector<variable_type> h(slots.size(), variable_type(0));
    opt.init_slots(h.data(), parameters().size());
    ops<backend>::synchronize();
    cuda_device_memory::copy(slots.data(), h.data(), h.size() * sizeof(variable_type));
    opt_ = ctnn::optimizer_state{};
    opt_.kind = kind;
  }
  ctnn::optimizer_state& mutable_optimizer_state() noexcept { return opt_; }

  static std::string architecture() { return Net::spec_string(); }

 private:
  friend struct detail::training_access;

  template <class Ls, class F>
  static void for_each_layer_of(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f.template operator()<I, std::tuple_element_t<I, Ls>>(), ...);
    }(std::make_index_sequence<layer_count>{});
  }
  template <class F>
  static void for_each_layer(F&& f) {
    for_each_layer_of<layers>(f);
  }
  template <class F>
  static void for_each_layer_reverse(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f.template operator()<layer_count - 1 - I, std::tuple_element_t<layer_count - 1 - I, layers>>(), ...);
    }(std::make_index_sequence<layer_count>{});
  }
  // The layers' plan starts after the float32 variables of a mixed policy.
  std::byte* base() const noexcept { return mem_.data() + master_bytes_; }
  // Where the variables the user sees live, and their layout.
  std::byte* var_base() const noexcept { return mixed ? mem_.data() : base(); }
  const plan_layout& var_layout() const noexcept { return mixed ? mlay_ : lay_; }
  template <class U>
  std::span<U> region(role r) const noexcept {
    return {reinterpret_cast<U*>(var_base() + var_layout().at(r)), var_layout().bytes(r) / sizeof(U)};
  }
  template <class PL, class V, class C, std::size_t I>
  static layer_slot<V, C> make_slot(std::byte* base, const plan_layout& lay, std::size_t batch) noexcept {
    auto at = [&](role r) { return base + lay.at(r) + PL::offset(I, r, batch); };
    return {reinterpret_cast<V*>(at(role::parameter)), reinterpret_cast<V*>(at(role::gradient)),
            reinterpret_cast<V*>(at(role::state)),     reinterpret_cast<C*>(at(role::cache)),
            reinterpret_cast<std::uint8_t*>(at(role::mask)), at(role::metadata)};
  }
  template <std::size_t I>
  layer_slot<compute_type, compute_type> slot(std::byte* b) const noexcept {
    return make_slot<plan, compute_type, compute_type, I>(b, lay_, batch_capacity_);
  }
  // Layer I's float32 variables of a mixed model (no caches).
  template <std::size_t I>
  layer_slot<float, float> master_slot() const noexcept {
    return make_slot<master_plan, float, float, I>(mem_.data(), mlay_, 1);
  }
  // Layer I's variables as the user sees them.
  template <std::size_t I>
  auto var_slot() const noexcept {
    if constexpr (mixed) return master_slot<I>();
    else return slot<I>(base());
  }
  // The regularizer factors of layer I (a dynamic factor is read from the device).
  template <std::size_t I, class L>
  std::pair<double, double> factors() const {
    using R = typename L::Reg;
    if constexpr (requires { R::factor_buffers; }) {
      std::byte f[4 * R::factor_buffers.size()];
      ops<backend>::synchronize();
      cuda_device_memory::copy(f, var_slot<I>().metadata, sizeof f);
      return cuda_detail::penalty_factors<R>(f);
    } else {
      return cuda_detail::penalty_factors<R>(nullptr);
    }
  }
  // Mixed: the float32 variables (parameters rounded, state, masks, metadata) into the layers' plan.
  void push_variables() {
    if constexpr (mixed) {
      for_each_layer([&]<std::size_t I, class L>() {
        using M = std::tuple_element_t<I, master_layers>;
        static_assert(layer_role_bytes<precision::float32>(M::buffers, role::mask) ==
                              layer_role_bytes<layer_policy>(L::buffers, role::mask) &&
                          layer_role_bytes<precision::float32>(M::buffers, role::metadata) ==
                              layer_role_bytes<layer_policy>(L::buffers, role::metadata),
                      "model<cuda>: under a mixed policy a layer's masks and metadata must not be variable-typed");
        const auto m = master_slot<I>();
        const auto c = slot<I>(base());
        if constexpr (L::parameter_count > 0) ops<backend>::convert(static_cast<const float*>(m.params), c.params, L::parameter_count);
        if constexpr (cuda_detail::float32_state<L, layer_policy>())
          CTNN_CUDA_CHECK(cudaMemcpyAsync(c.state, m.state, L::state_count * sizeof(float), cudaMemcpyDeviceToDevice,
                                          ops<backend>::stream()));
        else if constexpr (L::state_count > 0)
          ops<backend>::convert(static_cast<const float*>(m.state), c.state, L::state_count);
        constexpr std::size_t nm = layer_role_bytes<precision::float32>(M::buffers, role::mask);
        constexpr std::size_t nd = layer_role_bytes<precision::float32>(M::buffers, role::metadata);
        if constexpr (nm > 0) CTNN_CUDA_CHECK(cudaMemcpyAsync(c.mask, m.mask, nm, cudaMemcpyDeviceToDevice, ops<backend>::stream()));
        if constexpr (nd > 0)
          CTNN_CUDA_CHECK(cudaMemcpyAsync(c.metadata, m.metadata, nd, cudaMemcpyDeviceToDevice, ops<backend>::stream()));
      });
    }
  }
  // Mixed: the layers' state (batch_norm's float32 moving statistics; a
  // 16-bit state would be widened) copied into the float32 state.
  void pull_state() const {
    if constexpr (mixed)
      for_each_layer([&]<std::size_t I, class L>() {
        if constexpr (cuda_detail::float32_state<L, layer_policy>())
          CTNN_CUDA_CHECK(cudaMemcpyAsync(master_slot<I>().state, slot<I>(base()).state,
                                          L::state_count * sizeof(float), cudaMemcpyDeviceToDevice,
                                          ops<backend>::stream()));
        else if constexpr (L::state_count > 0)
          ops<backend>::widen(static_cast<const compute_type*>(slot<I>(base()).state), master_slot<I>().state,
                              L::state_count);
      });
  }
  template <std::size_t I>
  compute_type* activation() const noexcept {
    return reinterpret_cast<compute_type*>(base() + lay_.at(role::activation) +
                                           plan::offset(I, role::activation, batch_capacity_));
  }
  compute_type* delta(std::size_t k) const noexcept {
    return reinterpret_cast<compute_type*>(base() + lay_.at(role::delta) + k * plan::delta_bytes(batch_capacity_));
  }
  template <std::size_t I>
  const compute_type* input_of() const noexcept {
    if constexpr (I == 0)
      return x_;
    else
      return activation<I - 1>();
  }

  std::uint64_t seed_;
  rng gen_;
  plan_memory<backend> mem_;
  plan_layout lay_{};
  plan_layout mlay_{};
  std::size_t master_bytes_ = 0;
  std::size_t batch_capacity_ = 0;
  std::size_t slots_ = 0;
  std::size_t batch_ = 0;
  const compute_type* x_ = nullptr;
  ctnn::optimizer_state opt_{};
  cuda_model_options options_{};
  cuda_detail::graph_cache graphs_;
  bool graph_failed_ = false;
};

}  // namespace ctnn
