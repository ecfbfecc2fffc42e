// ctnn/cuda/model.cuh — model<Net, P, cuda<SM>>: a network on one CUDA device.
//
// The same typed plan as the CPU model (core/plan.hpp), laid out in ONE
// device allocation (cuda_device_memory): parameters | gradients | state |
// masks | metadata | optimizer slots | activations | deltas | caches. The
// layers are the network's bound layers for cuda<SM> (the generic ones
// through ops<cuda<SM>>, dropout and batch_norm from cuda/layers.cuh).
// make_model<Net, precision::float32, cuda<90>>(seed) draws the parameters
// on the host exactly as the CPU model does (a host mirror of the variable
// regions, then one copy), so a CPU and a device model of one seed start
// from the same bits. forward() takes and returns device pointers;
// predict() takes and returns host values; get_variables()/set_variables()
// copy the variable regions (parameters .. metadata) to and from the host;
// forward_graph() replays inference as one captured CUDA graph.
// Regularizers are not supported on the device yet (a compile error says so).
// Precision: float32 runs today; the kernels take __half / __nv_bfloat16
// storage, the mixed policies are wired by the precision work.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../train/model.hpp"
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

template <class L>
constexpr bool regularized() {
  if constexpr (requires { L::Reg::active; })
    return L::Reg::active;
  else
    return false;
}
}  // namespace cuda_detail

template <Network Net, class Precision, int SM>
class model<Net, Precision, cuda<SM>> {
 public:
  using network = Net;
  using policy = precision::policy_of_t<Precision>;
  using variable_type = typename policy::variable_type;
  using compute_type = typename policy::compute_type;
  using value_type = compute_type;
  using backend = cuda<SM>;
  using layers = typename Net::template bound<policy, backend>;
  using plan = typename Net::template plan<policy, backend>;
  static constexpr std::size_t layer_count = Net::layer_count;
  static constexpr std::size_t input_size = Net::input_type::size;
  static constexpr std::size_t output_size = Net::output_type::size;
  static constexpr std::size_t parameter_count = Net::parameter_count;
  static constexpr std::size_t state_count = Net::state_count;
  static_assert(cuda_storage<compute_type> && cuda_storage<variable_type>,
                "model: the CUDA backend stores float, __half or __nv_bfloat16");
  static_assert([]<std::size_t... I>(std::index_sequence<I...>) {
    return (!cuda_detail::regularized<std::tuple_element_t<I, layers>>() && ...);
  }(std::make_index_sequence<layer_count>{}), "model: regularizers are not supported on the CUDA backend yet");

  explicit model(std::uint64_t seed = 0) : seed_(seed), gen_(seed) {
    reserve(1, 0);
    initialize(seed);
  }

  void initialize(std::uint64_t seed) {
    seed_ = seed;
    rng init_gen(seed);
    std::vector<std::byte> host(lay_.at(role::optimizer_slot));
    for_each_layer([&]<std::size_t I, class L>() { L::init(slot<I>(host.data()), init_gen); });
    cuda_device_memory::copy(mem_.data(), host.data(), host.size());
    gen_ = rng::derive(seed, 0x64726f70ull);
    reset_optimizer();
  }

  std::uint64_t seed() const noexcept { return seed_; }
  rng& generator() noexcept { return gen_; }

  void reserve(std::size_t batch, std::size_t slots) {
    if (batch <= batch_capacity_ && slots == slots_) return;
    const std::size_t new_batch = std::max(batch, batch_capacity_);
    const plan_layout nl = plan::layout(new_batch, slots);
    ops<backend>::synchronize();  // nothing queued may still use the old memory
    plan_memory<backend> nm(nl.total);
    if (mem_.size()) {
      cuda_device_memory::copy(nm.data(), mem_.data(), lay_.at(role::optimizer_slot));
      if (slots == slots_)
        cuda_device_memory::copy(nm.data() + nl.at(role::optimizer_slot), mem_.data() + lay_.at(role::optimizer_slot),
                                 lay_.bytes(role::optimizer_slot));
      else
        opt_.kind = nullptr;
    }
    graphs_.clear();  // they captured the old memory's pointers
    mem_ = std::move(nm);
    lay_ = nl;
    batch_capacity_ = new_batch;
    slots_ = slots;
  }

  std::size_t batch_capacity() const noexcept { return batch_capacity_; }
  std::size_t memory_bytes() const noexcept { return mem_.size(); }
  const plan_layout& layout() const noexcept { return lay_; }

  // Device spans (never dereference them on the host).
  std::span<variable_type> parameters() noexcept { return region<variable_type>(role::parameter); }
  std::span<variable_type> gradients() noexcept { return region<variable_type>(role::gradient); }
  std::span<variable_type> state() noexcept { return region<variable_type>(role::state); }
  std::span<variable_type> optimizer_slots() noexcept { return region<variable_type>(role::optimizer_slot); }

  // The variable regions (parameters, gradients, state, masks, metadata) as bytes, to and from the host.
  std::vector<std::byte> get_variables() const {
    std::vector<std::byte> h(lay_.at(role::optimizer_slot));
    cuda_device_memory::copy(h.data(), mem_.data(), h.size());
    return h;
  }
  void set_variables(std::span<const std::byte> h) {
    if (h.size() != lay_.at(role::optimizer_slot))
      throw std::invalid_argument("model<cuda>::set_variables: " + std::to_string(h.size()) + " bytes given, the plan's "
                                  "variables take " + std::to_string(lay_.at(role::optimizer_slot)));
    ops<backend>::synchronize();
    cuda_device_memory::copy(mem_.data(), h.data(), h.size());
  }
  // One region (role::parameter, gradient, state) as host values.
  std::vector<variable_type> download(role r) const {
    std::vector<variable_type> h(lay_.bytes(r) / sizeof(variable_type));
    ops<backend>::synchronize();
    cuda_device_memory::copy(h.data(), mem_.data() + lay_.at(r), h.size() * sizeof(variable_type));
    return h;
  }

  // Calls f(variable_ref) for every declared parameter, state, mask and
  // metadata buffer, as the CPU model does; data points into device memory.
  template <class F>
  void for_each_variable(F&& f) const {
    for_each_layer([&]<std::size_t I, class L>() {
      for (std::size_t b = 0; b < L::buffers.size(); ++b) {
        const buffer& d = L::buffers[b];
        if (d.kind == role::cache) continue;
        variable_ref v;
        v.layer = I;
        v.name = d.name;
        v.kind = d.kind;
        v.type = d.type;
        v.element_bytes = elem_bytes<policy>(d.type);
        v.dims = d.dims;
        v.rank = d.rank;
        v.extent = d.extent;
        v.offset = plan::offset(I, d.kind, batch_capacity_) + buffer_offset<policy>(L::buffers, b);
        v.data = mem_.data() + lay_.at(d.kind) + v.offset;
        f(v);
      }
    });
  }

  // Runs every layer on the device rows x[batch, input_size]; returns the device output rows.
  const compute_type* forward(const compute_type* x, std::size_t batch, bool training) {
    if (batch == 0) throw std::invalid_argument("model::forward: the batch is empty");
    reserve(batch, slots_);
    x_ = x;
    batch_ = batch;
    const run_info r{batch, training, &gen_};
    for_each_layer([&]<std::size_t I, class L>() { L::forward(slot<I>(mem_.data()), input_of<I>(), activation<I>(), r); });
    return activation<layer_count - 1>();
  }
  const compute_type* output() noexcept { return activation<layer_count - 1>(); }

  // Inference through a CUDA graph: the first call for an (x, batch) pair
  // captures forward(x, batch, false) on the compute stream and instantiates
  // it; every call launches that graph (one launch instead of one per kernel
  // and GEMM; the values in x may change between calls, the pointer may not).
  // Returns the device output rows, ready once the stream is synchronized.
  const compute_type* forward_graph(const compute_type* x, std::size_t batch) {
    if (batch == 0) throw std::invalid_argument("model::forward_graph: the batch is empty");
    reserve(batch, slots_);
    const cudaStream_t s = ops<backend>::stream();
    cudaGraphExec_t e = graphs_.find(x, batch);
    if (!e) {
      CTNN_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      cudaGraph_t g = nullptr;
      try {
        forward(x, batch, false);
      } catch (...) {
        cudaStreamEndCapture(s, &g);
        if (g) cudaGraphDestroy(g);
        throw;
      }
      CTNN_CUDA_CHECK(cudaStreamEndCapture(s, &g));
      const cudaError_t r = cudaGraphInstantiate(&e, g, 0);
      cudaGraphDestroy(g);
      CTNN_CUDA_CHECK(r);
      graphs_.add(x, batch, e);
    }
    x_ = x;
    batch_ = batch;
    CTNN_CUDA_CHECK(cudaGraphLaunch(e, s));
    return output();
  }
  std::size_t captured_graphs() const noexcept { return graphs_.size(); }
  compute_type* output_gradient() noexcept { return delta(0); }

  void backward() {
    const run_info r{batch_, true, &gen_};
    compute_type* cur = delta(0);
    compute_type* other = delta(1);
    for_each_layer_reverse([&]<std::size_t I, class L>() {
      compute_type* dx = I == 0 ? nullptr : other;
      L::backward(slot<I>(mem_.data()), input_of<I>(), activation<I>(), cur, dx, r);
      std::swap(cur, other);
    });
  }

  double penalty() { return 0; }
  void add_penalty_gradients() {}

  // Host in, host out: n samples in chunks of at most `batch`.
  std::vector<compute_type> predict(const compute_type* x, std::size_t n, std::size_t batch = 256) {
    std::vector<compute_type> out(n * output_size);
    if (n == 0) return out;
    device_buffer<compute_type> dx(std::min(batch, n) * input_size);
    for (std::size_t i = 0; i < n; i += batch) {
      const std::size_t b = std::min(batch, n - i);
      ops<backend>::synchronize();
      cuda_device_memory::copy(dx.data(), x + i * input_size, b * input_size * sizeof(compute_type));
      const compute_type* y = forward(dx.data(), b, false);
      ops<backend>::synchronize();
      cuda_device_memory::copy(out.data() + i * output_size, y, b * output_size * sizeof(compute_type));
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
  template <class U>
  U* block(std::byte* base, role r, std::size_t i) const noexcept {
    return reinterpret_cast<U*>(base + lay_.at(r) + plan::offset(i, r, batch_capacity_));
  }
  template <std::size_t I>
  layer_slot<variable_type, compute_type> slot(std::byte* base) const noexcept {
    return {block<variable_type>(base, role::parameter, I), block<variable_type>(base, role::gradient, I),
            block<variable_type>(base, role::state, I),     block<compute_type>(base, role::cache, I),
            block<std::uint8_t>(base, role::mask, I),       block<std::byte>(base, role::metadata, I)};
  }
  template <std::size_t I>
  compute_type* activation() const noexcept {
    return block<compute_type>(mem_.data(), role::activation, I);
  }
  compute_type* delta(std::size_t k) const noexcept {
    return reinterpret_cast<compute_type*>(mem_.data() + lay_.at(role::delta) + k * plan::delta_bytes(batch_capacity_));
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
  std::size_t batch_capacity_ = 0;
  std::size_t slots_ = 0;
  std::size_t batch_ = 0;
  const compute_type* x_ = nullptr;
  ctnn::optimizer_state opt_{};
  cuda_detail::graph_cache graphs_;
};

}  // namespace ctnn
