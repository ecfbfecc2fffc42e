// ctnn/cuda/host_variables.cuh — a device model's variables in host memory.
//
// host_variables<M> (M a model<Net, P, cuda<SM>>, or any type naming the
// same variable_layers / variable_policy / variable_plan) holds a host copy
// of the variable regions (parameters, gradients, state, masks, metadata;
// float32 under the mixed policies), laid out as on the device, with the CPU
// model's interface to them: parameters(), gradients(), state() as host
// spans and for_each_variable (host pointers; the same layers, names, roles,
// element types and shapes as the CPU model's walk, train/model.hpp). So
// io::save_weights and io::load_weights (the logical-tensor format, version
// 2) work on it: a file saved from a device model loads into the CPU model
// and back. variable_type is the host's name of the element (float16_t for
// __half, bfloat16_t for __nv_bfloat16), which the file's dtype follows.
// m.variables_to_host() makes one (it waits for the device);
// m.variables_from_host(h) copies one back (set_variables). The overloads
// io::save_weights(m, path) and io::load_weights(m, path) for a device model
// go through it (load_weights checks the whole file before the device model
// changes). Needs no device: one can also be made from bytes (the size is checked).
#pragma once
#include <cstddef>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../core/half.hpp"
#include "../../core/plan.hpp"
#include "../../io/weights.hpp"
#include "../../train/model.hpp"
#include "types.cuh"

namespace ctnn {

namespace cuda_detail {
// The host's element type of a device storage type (__half -> float16_t, __nv_bfloat16 -> bfloat16_t).
template <class T>
struct host_type {
  using type = T;
};
template <>
struct host_type<__half> {
  using type = float16_t;
};
template <>
struct host_type<__nv_bfloat16> {
  using type = bfloat16_t;
};
template <class T>
using host_type_t = typename host_type<T>::type;
}  // namespace cuda_detail

template <class M>
class host_variables {
 public:
  using network = typename M::network;
  using variable_type = cuda_detail::host_type_t<typename M::variable_type>;
  using layers = typename M::variable_layers;
  using policy = typename M::variable_policy;
  using plan = typename M::variable_plan;
  static_assert(sizeof(variable_type) == sizeof(typename M::variable_type),
                "host_variables: the host element type must have the device type's size");
  // The variable regions' layout (they do not depend on the batch or the optimizer's slots).
  static constexpr plan_layout layout() { return plan::layout(1, 0); }
  static constexpr std::size_t bytes_needed() { return layout().at(role::optimizer_slot); }

  // All zero.
  host_variables() : bytes_(bytes_needed()) {}
  // The variable regions as the device model's get_variables() gives them.
  explicit host_variables(std::vector<std::byte> bytes) : bytes_(std::move(bytes)) {
    if (bytes_.size() != bytes_needed())
      throw std::invalid_argument("host_variables: " + std::to_string(bytes_.size()) + " bytes given, the plan's "
                                  "variables take " + std::to_string(bytes_needed()));
  }

  std::span<variable_type> parameters() noexcept { return region(role::parameter); }
  std::span<variable_type> gradients() noexcept { return region(role::gradient); }
  std::span<variable_type> state() noexcept { return region(role::state); }
  std::span<const variable_type> parameters() const noexcept { return region(role::parameter); }
  std::span<const variable_type> gradients() const noexcept { return region(role::gradient); }
  std::span<const variable_type> state() const noexcept { return region(role::state); }
  const std::vector<std::byte>& bytes() const noexcept { return bytes_; }

  // f(variable_ref) for every parameter, state, mask and metadata buffer, in
  // the CPU model's order; data points into this object's host memory
  // (writable, as the CPU model's walk is: io::load_weights writes through it).
  template <class F>
  void for_each_variable(F&& f) const {
    detail::for_each_variable_in<layers, policy, plan>(bytes_.data(), layout(), 1, f);
  }

 private:
  std::span<variable_type> region(role r) const noexcept {
    return {reinterpret_cast<variable_type*>(bytes_.data() + layout().at(r)), layout().bytes(r) / sizeof(variable_type)};
  }
  // for_each_variable and the spans hand out writable pointers from const
  // methods, as the CPU model does from its allocation.
  mutable std::vector<std::byte> bytes_;
};

}  // namespace ctnn

namespace ctnn::io {
// A device model's weights: the same file as the CPU model's (io/weights.hpp),
// written from a host copy of its variables.
template <Network Net, class P, int SM>
void save_weights(const model<Net, P, cuda<SM>>& m, const std::filesystem::path& path) {
  save_weights(m.variables_to_host(), path);
}
// Loads into a host copy (every tensor checked first, as the CPU model's
// load), then copies it to the device: on an error the device model is unchanged.
template <Network Net, class P, int SM>
void load_weights(model<Net, P, cuda<SM>>& m, const std::filesystem::path& path) {
  auto h = m.variables_to_host();
  load_weights(h, path);
  m.variables_from_host(h);
}
}  // namespace ctnn::io
