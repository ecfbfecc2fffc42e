// ctnn/train/model.hpp — model<Net, T, Backend>: a network's storage and its passes.
//
// A model owns ONE aligned arena laid out by Net::layout<T>(batch, slots):
// parameters | gradients | state | optimizer slots | activations | deltas | caches.
// make_model<Net>(seed) initialises the parameters deterministically from the
// seed. forward(x, batch, training) runs the layers and returns the output
// rows; the caller keeps x alive until backward(). backward() starts from
// output_gradient() (written by the loss) and leaves the parameter gradients
// in gradients(). The arena grows (one reallocation, parameters kept) when a
// larger batch or more optimizer slots are asked for; it never shrinks.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../core/arena.hpp"
#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/rng.hpp"
#include "../core/sequential.hpp"

namespace ctnn {

template <Network Net, class T = float, class Backend = cpu>
class model {
 public:
  using network = Net;
  using value_type = T;
  using backend = Backend;
  using layers = typename Net::template bound<T, Backend>;
  static constexpr std::size_t layer_count = Net::layer_count;
  static constexpr std::size_t input_size = Net::input_type::size;
  static constexpr std::size_t output_size = Net::output_type::size;
  static constexpr std::size_t parameter_count = Net::parameter_count;
  static constexpr std::size_t state_count = Net::state_count;

  explicit model(std::uint64_t seed = 0) : seed_(seed), gen_(seed) {
    reserve(1, 0);
    initialize(seed);
  }

  // Re-draws every parameter from `seed` (as a fresh make_model would).
  void initialize(std::uint64_t seed) {
    seed_ = seed;
    rng init_gen(seed);
    for_each_layer([&]<std::size_t I, class L>() { L::init(slot<I>(0), init_gen); });
    gen_ = rng::derive(seed, 0x64726f70ull);  // stream for dropout and other run-time randomness
  }

  std::uint64_t seed() const noexcept { return seed_; }
  rng& generator() noexcept { return gen_; }

  // Ensures the arena holds a batch of `batch` samples and `slots` optimizer
  // values per parameter. Parameters, state and (same slot count) slots survive.
  void reserve(std::size_t batch, std::size_t slots) {
    if (batch <= batch_capacity_ && slots == slots_) return;
    const std::size_t new_batch = std::max(batch, batch_capacity_);
    const arena_layout nl = Net::template layout<T>(new_batch, slots);
    arena<T> na(nl.total);
    if (mem_.size()) {
      std::memcpy(na.data() + nl.parameters, mem_.data() + lay_.parameters, lay_.parameters_size * sizeof(T));
      std::memcpy(na.data() + nl.state, mem_.data() + lay_.state, lay_.state_size * sizeof(T));
      if (slots == slots_)
        std::memcpy(na.data() + nl.optimizer, mem_.data() + lay_.optimizer, lay_.optimizer_size * sizeof(T));
    }
    mem_ = std::move(na);
    lay_ = nl;
    batch_capacity_ = new_batch;
    slots_ = slots;
  }

  std::size_t batch_capacity() const noexcept { return batch_capacity_; }
  std::size_t arena_bytes() const noexcept { return mem_.size() * sizeof(T); }

  // The flat parameter vector (layers one after another, each 64-byte aligned;
  // padding between layers is zero and stays zero).
  std::span<T> parameters() noexcept { return {mem_.data() + lay_.parameters, lay_.parameters_size}; }
  std::span<const T> parameters() const noexcept { return {mem_.data() + lay_.parameters, lay_.parameters_size}; }
  std::span<T> gradients() noexcept { return {mem_.data() + lay_.gradients, lay_.parameters_size}; }
  std::span<T> state() noexcept { return {mem_.data() + lay_.state, lay_.state_size}; }
  std::span<const T> state() const noexcept { return {mem_.data() + lay_.state, lay_.state_size}; }
  std::span<T> optimizer_slots() noexcept { return {mem_.data() + lay_.optimizer, lay_.optimizer_size}; }

  // Parameters of layer I: [offset, offset + parameter_count).
  template <std::size_t I>
  std::span<T> layer_parameters() noexcept {
    using L = std::tuple_element_t<I, layers>;
    return {mem_.data() + lay_.parameters + Net::template param_offsets<T>()[I], L::parameter_count};
  }
  template <std::size_t I>
  std::span<T> layer_gradients() noexcept {
    using L = std::tuple_element_t<I, layers>;
    return {mem_.data() + lay_.gradients + Net::template param_offsets<T>()[I], L::parameter_count};
  }

  // Runs every layer on x[batch, input_size]; returns the output rows.
  const T* forward(const T* x, std::size_t batch, bool training) {
    if (batch == 0) throw std::invalid_argument("model::forward: the batch is empty");
    reserve(batch, slots_);
    x_ = x;
    batch_ = batch;
    const run_info r{batch, training, &gen_};
    for_each_layer([&]<std::size_t I, class L>() { L::forward(slot<I>(batch), input_of<I>(), activation<I>(), r); });
    return activation<layer_count - 1>();
  }
  const T* output() const noexcept { return mem_.data() + lay_.activations + Net::template activation_offsets<T>(batch_capacity_)[layer_count - 1]; }

  // Where the loss writes dL/d(output) for the last forward's batch.
  T* output_gradient() noexcept { return mem_.data() + lay_.deltas; }

  // Back-propagates output_gradient() through every layer.
  void backward() {
    const run_info r{batch_, true, &gen_};
    T* cur = mem_.data() + lay_.deltas;
    T* other = cur + lay_.deltas_size / 2;
    for_each_layer_reverse([&]<std::size_t I, class L>() {
      T* dx = I == 0 ? nullptr : other;
      L::backward(slot<I>(batch_), input_of<I>(), activation<I>(), cur, dx, r);
      std::swap(cur, other);
    });
  }

  // Sum of the layers' regularization penalties.
  double penalty() {
    double p = 0;
    for_each_layer([&]<std::size_t I, class L>() {
      if constexpr (requires { L::penalty(slot<I>(0)); }) p += double(L::penalty(slot<I>(0)));
    });
    return p;
  }
  void add_penalty_gradients() {
    for_each_layer([&]<std::size_t I, class L>() {
      if constexpr (requires { L::add_penalty_gradient(slot<I>(0)); }) L::add_penalty_gradient(slot<I>(0));
    });
  }

  // Outputs for n samples, computed in chunks of at most `batch` samples.
  std::vector<T> predict(const T* x, std::size_t n, std::size_t batch = 256) {
    std::vector<T> out(n * output_size);
    for (std::size_t i = 0; i < n; i += batch) {
      const std::size_t b = std::min(batch, n - i);
      const T* y = forward(x + i * input_size, b, false);
      std::copy(y, y + b * output_size, out.data() + i * output_size);
    }
    return out;
  }

  static std::string architecture() { return Net::spec_string(); }

 private:
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

  template <std::size_t I>
  layer_slot<T> slot(std::size_t) noexcept {
    T* base = mem_.data();
    return layer_slot<T>{base + lay_.parameters + Net::template param_offsets<T>()[I],
                         base + lay_.gradients + Net::template param_offsets<T>()[I],
                         base + lay_.state + Net::template state_offsets<T>()[I],
                         base + lay_.cache + Net::template cache_offsets<T>(batch_capacity_)[I]};
  }
  template <std::size_t I>
  T* activation() noexcept {
    return mem_.data() + lay_.activations + Net::template activation_offsets<T>(batch_capacity_)[I];
  }
  template <std::size_t I>
  const T* input_of() noexcept {
    if constexpr (I == 0) {
      return x_;
    } else {
      return activation<I - 1>();
    }
  }

  std::uint64_t seed_;
  rng gen_;
  arena<T> mem_;
  arena_layout lay_{};
  std::size_t batch_capacity_ = 0;
  std::size_t slots_ = 0;
  std::size_t batch_ = 0;
  const T* x_ = nullptr;
};

// The model of network Net, its parameters drawn from `seed`.
template <Network Net, class T = float, class Backend = cpu>
model<Net, T, Backend> make_model(std::uint64_t seed = 0) {
  return model<Net, T, Backend>(seed);
}

template <class M>
inline constexpr bool is_model_v = false;
template <class N, class T, class B>
inline constexpr bool is_model_v<model<N, T, B>> = true;
template <class M>
concept Model = is_model_v<std::remove_cvref_t<M>>;

}  // namespace ctnn
