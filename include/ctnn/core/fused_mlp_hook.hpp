// ctnn/core/fused_mlp_hook.hpp — the optional fused small-MLP hook of a backend.
//
// A backend MAY run a whole network as one fused pass. The generic model
// (train/model.hpp) finds it with these concepts and otherwise runs the
// layers one by one; no backend has to provide it (cpu<> and the simulated
// device do not; ops<cuda<SM>> does, backends/cuda/fused_mlp.cuh, and so does
// ops<cpu<Arch>> for its own layers, backends/cpu/fused_mlp.hpp). For the
// bound layers Layers (a std::tuple) computing in T:
//   ops<B>::fused_mlp_ready<Layers>() -> bool: the hook can run now;
//   ops<B>::fused_mlp_forward<Layers>(x, y, batch, params): y = the network
//     on x (inference), params[i] layer i's parameter block (compute type);
//   ops<B>::fused_mlp_backward_ready<Layers>() / fused_mlp_backward<Layers>(
//     dy, batch, io): every layer's parameter gradients from dL/dy (training's
//     backward after the training forward); io[i]: fused_layer_io; optionally
//     also (dy, batch, io, done): done (fused_layer_done) told as each layer's
//     gradients are final (the step's per-layer update);
//   ops<B>::fused_mlp_training_forward<Layers>(x, batch, params, outs) (optional,
//     with the backward hook): training's forward, layer i's output rows into
//     outs[i] (its activation, which the backward reads; null for a layer
//     without parameters); the model runs it from fused_mlp_min_batch samples on.
// Each is declared only for the layer lists it takes (a requires clause), so
// has_fused_mlp_forward<B, Layers, T> is false for any other network.
// fused_mlp_options says whether the model uses them (model::fused_mlp()); a
// model starts from fused_mlp_defaults<B, Layers>(): the backend's
// ops<B>::fused_mlp_defaults<Layers>() where it declares one, else fused_mlp_options{};
// and it runs the fused forward from fused_mlp_min_batch<B, Layers>() samples on, the fused
// training passes where fused_mlp_train_batch<B, Layers>(batch) (the training forward also from
// fused_mlp_min_batch on).
#pragma once
#include <concepts>
#include <cstddef>

#include "backend_ops.hpp"

namespace ctnn {

// Layer i's buffers as the fused backward reads and writes them.
template <class T>
struct fused_layer_io {
  const T* params;  // its parameters (kernel, then bias)
  T* grads;         // its gradients (written)
  const T* in;      // its input rows from the training forward
  const T* out;     // its output rows from the training forward
  // Where set (the step's per-layer update, model::fused_backward), a fused backward that takes a
  // fused_layer_done calls rows(rows_context, lo, hi) as soon as the values [lo, hi) of grads (whole
  // rows of dW) are final, on the thread that computed them (concurrently: disjoint ranges), and
  // then no longer reads the kernel's rows [lo, hi) (the update may write them).
  void (*rows)(void* context, std::size_t lo, std::size_t hi) = nullptr;
  void* rows_context = nullptr;
};

// Told by a fused backward when layer `layer`'s gradients are final (the step's per-layer
// update, train/step.hpp): done(context, layer) right after that layer's last tile, on the
// calling thread.
struct fused_layer_done {
  void* context = nullptr;
  void (*done)(void* context, std::size_t layer) = nullptr;
};

// Whether the model runs the hook where the backend has it: inference as one
// fused pass (forward, on by default), training's backward fused (backward,
// off by default: CUDA's fused backward has not yet run on a GPU), and
// training's forward fused (training_forward, off: where the backend has that
// hook; either training pass runs without the other). A backend's
// fused_mlp_defaults may start them otherwise (cpu<Arch>: backends/cpu/fused_mlp.hpp).
struct fused_mlp_options {
  bool forward = true;
  bool backward = false;
  bool training_forward = false;
};

template <class B, class Layers, class T>
concept has_fused_mlp_forward = requires(const T* x, T* y, std::size_t n, const T* const* params) {
  { ops<B>::template fused_mlp_ready<Layers>() } -> std::convertible_to<bool>;
  ops<B>::template fused_mlp_forward<Layers>(x, y, n, params);
};
template <class B, class Layers, class T>
concept has_fused_mlp_backward = requires(const T* dy, std::size_t n, const fused_layer_io<T>* io) {
  { ops<B>::template fused_mlp_backward_ready<Layers>() } -> std::convertible_to<bool>;
  ops<B>::template fused_mlp_backward<Layers>(dy, n, io);
};

template <class B, class Layers, class T>
concept has_fused_mlp_training_forward =
    has_fused_mlp_backward<B, Layers, T> && requires(const T* x, std::size_t n, const T* const* params, T* const* outs) {
      ops<B>::template fused_mlp_training_forward<Layers>(x, n, params, outs);
    };

// The smallest batch a model of backend B runs through the fused forward (inference below it
// runs the layers): the backend's ops<B>::fused_mlp_min_batch<Layers>() where it declares one, else 1.
template <class B, class Layers>
constexpr std::size_t fused_mlp_min_batch() {
  if constexpr (requires { ops<B>::template fused_mlp_min_batch<Layers>(); })
    return ops<B>::template fused_mlp_min_batch<Layers>();
  else
    return 1;
}

// Whether a training step of `batch` samples runs the fused training passes (where the options
// and the backend allow): the backend's ops<B>::fused_mlp_train_batch<Layers>(batch) where it
// declares one, else every batch.
template <class B, class Layers>
constexpr bool fused_mlp_train_batch(std::size_t batch) {
  if constexpr (requires { ops<B>::template fused_mlp_train_batch<Layers>(batch); })
    return ops<B>::template fused_mlp_train_batch<Layers>(batch);
  else
    return true;
}

// The options a model of backend B and bound layers Layers starts with.
template <class B, class Layers>
constexpr fused_mlp_options fused_mlp_defaults() {
  if constexpr (requires { ops<B>::template fused_mlp_defaults<Layers>(); })
    return ops<B>::template fused_mlp_defaults<Layers>();
  else
    return {};
}

}  // namespace ctnn
