// ctnn/pruning/update_pruning_step.hpp — the training-step hook that prunes (TFMOT's UpdatePruningStep).
//
// Pass update_pruning_step{} to fit with a model whose network has
// prune_low_magnitude layers; it is a step hook (train/step.hpp) and a
// callback (train/callbacks.hpp):
//   first phase of the step at update count t: each pruned layer whose
//   schedule says should_prune(t) gets a new mask at sparsity(t)
//   (pruning/masks.hpp; global_magnitude layers together, pruning/global.hpp);
//   transform_gradients: the gradients of pruned weights are set to 0;
//   after_update (after the optimizer's own): pruned weights and every
//   optimizer slot of a pruned weight are set to exactly 0;
//   on_epoch_end: logs "sparsity_layer_<position>" for every pruned layer.
// apply_masks(model) zeroes the masked weights of every pruned layer;
// layer_sparsities(model) returns (position, sparsity) pairs;
// global_sparsities(model) and global_kept(model) report the global group's.
// Weights, gradients, masks and slots are reached through the model's host
// views (train/model.hpp's host_region), so all of it runs on any backend.
// Details: docs/pruning.md, "Retraining: update_pruning_step".
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../train/step.hpp"
#include "global.hpp"
#include "masks.hpp"
#include "prune.hpp"

namespace ctnn {

namespace pruning::detail {

// Which regions for_each_pruned reads into host views and which it writes back.
enum region_bit : unsigned { kernel_bit = 1, gradient_bit = 2, mask_bit = 4, slot_bit = 8 };

// Byte offset of pruned layer L's "kernel_mask" inside its layer's block of the mask region.
template <class Policy, class L>
constexpr std::size_t mask_offset() {
  for (std::size_t b = 0; b < L::buffers.size(); ++b)
    if (L::buffers[b].kind == role::mask) return buffer_offset<Policy>(L::buffers, b);
  return 0;
}

// Calls f.template operator()<I, L>(kernel, grads, mask, offset, slots) for every pruned layer I of
// model m, where offset is the kernel's index in the parameter region and slots the optimizer slot
// region (slot k of parameter j at slots[k * parameters + j]). Every pointer is host memory: the
// model's own on a host backend, else host views (core/backend.hpp) of the regions named in `read`
// (the others hold no values) that write back those named in `write` when f has run for every layer.
template <class M, class F>
void for_each_pruned(M& m, unsigned read, unsigned write, F&& f) {
  using layers = typename M::layers;
  using W = typename M::variable_type;
  const auto region = [&](role r, unsigned bit) { return m.host_region(r, (read & bit) != 0); };
  auto pv = region(role::parameter, kernel_bit);
  auto gv = region(role::gradient, gradient_bit);
  auto mv = region(role::mask, mask_bit);
  auto sv = region(role::optimizer_slot, slot_bit);
  W* w0 = reinterpret_cast<W*>(pv.data());
  const W* first = std::as_const(m).parameters().data();  // device addresses: only their differences are taken
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (void)std::initializer_list<int>{(
        [&] {
          using L = ctnn::detail::type_at_t<I, layers>;
          if constexpr (PrunedLayer<L>) {
            const std::size_t offset = std::size_t(m.template layer_parameters<I>().data() - first);
            std::uint8_t* mask = reinterpret_cast<std::uint8_t*>(
                mv.data() + M::plan::offset(I, role::mask, m.batch_capacity()) + mask_offset<typename M::policy, L>());
            f.template operator()<I, L>(w0 + offset, reinterpret_cast<W*>(gv.data()) + offset, mask, offset,
                                        reinterpret_cast<W*>(sv.data()));
          }
        }(),
        0)...};  // a list, not a fold: clang nests a fold of N terms N deep (limit 256)
  }(std::make_index_sequence<std::tuple_size_v<layers>>{});
#if defined(__GNUC__) && !defined(__clang__)
  // g++ 12.2 at -O1 (modref + dead-store elimination; later g++ not checked) summarised the
  // index lambda above as storing nothing and deleted whole calls of this function (apply_masks
  // after prune_at_step left the pruned weights in place). A compiler barrier keeps its stores
  // visible; it costs nothing at run time. tests/pruning/test_channels.cpp's same-padded case
  // found it at -O1.
  asm volatile("" ::: "memory");
#endif
  if (write & kernel_bit) pv.commit();
  if (write & gradient_bit) gv.commit();
  if (write & mask_bit) mv.commit();
  if (write & slot_bit) sv.commit();
}

}  // namespace pruning::detail

// Zeroes the weights every pruned layer's mask removes.
template <class M>
void apply_masks(M& m) {
  using namespace pruning::detail;
  for_each_pruned(m, kernel_bit | mask_bit, kernel_bit,
                  [&]<std::size_t I, class L>(auto* w, auto*, const std::uint8_t* mask, std::size_t, auto*) {
                    for (std::size_t i = 0; i < L::masked_count; ++i)
                      if (!mask[i]) w[i] = 0;
                  });
}

// (position from 1, fraction of the kernel masked) for every pruned layer.
template <class M>
std::vector<std::pair<std::size_t, double>> layer_sparsities(M& m) {
  std::vector<std::pair<std::size_t, double>> r;
  using namespace pruning::detail;
  for_each_pruned(m, mask_bit, 0, [&]<std::size_t I, class L>(auto*, auto*, const std::uint8_t* mask, std::size_t, auto*) {
    r.emplace_back(I + 1, pruning::mask_sparsity(mask, L::masked_count));
  });
  return r;
}

namespace pruning::detail {
// The masks of the global_magnitude group at sparsity s: its kernels ranked together by |w|.
template <class M>
void global_masks(M& m, double s) {
  using group = global_group<typename M::layers>;
  std::vector<double> score;
  score.reserve(group::weights);
  for_each_pruned(m, kernel_bit, 0, [&]<std::size_t I, class L>(auto* w, auto*, std::uint8_t*, std::size_t, auto*) {
    if constexpr (is_global<L>())
      for (std::size_t i = 0; i < L::masked_count; ++i) score.push_back(std::abs(double(w[i])));
  });
  std::vector<std::uint8_t> kept;
  keep_largest(score, ctnn::detail::keep_count(group::weights, s), kept);
  std::size_t at = 0;
  for_each_pruned(m, mask_bit, mask_bit, [&]<std::size_t I, class L>(auto*, auto*, std::uint8_t* mask, std::size_t, auto*) {
    if constexpr (is_global<L>()) {
      std::copy(kept.begin() + std::ptrdiff_t(at), kept.begin() + std::ptrdiff_t(at + L::masked_count), mask);
      at += L::masked_count;
    }
  });
}
}  // namespace pruning::detail

// Recomputes the mask of every pruned layer whose schedule prunes at `step`
// (the global_magnitude group's together), and applies every mask.
template <class M>
void prune_at_step(M& m, std::int64_t step) {
  using namespace pruning::detail;
  for_each_pruned(m, kernel_bit | mask_bit, mask_bit,
                  [&]<std::size_t I, class L>(auto* w, auto*, std::uint8_t* mask, std::size_t, auto*) {
    if constexpr (!pruning::detail::is_global<L>()) {
      using S = typename L::schedule;
      if (S::should_prune(step))  // each pruned weight on its own (a recurrent layer's kernel, then recurrent_kernel)
        for (const auto& p : L::pruned)
          pruning::compute_mask<typename L::pattern>(w + p.at, p.rows, p.cols, S::sparsity(step), mask + p.at);
    }
  });
  using group = pruning::detail::global_group<typename M::layers>;
  if constexpr (group::layers > 0) {
    using S = typename group::schedule;
    if (S::should_prune(step)) pruning::detail::global_masks(m, S::sparsity(step));
  }
  apply_masks(m);
}

// (position from 1, fraction of the kernel masked) for every layer pruned with global_magnitude.
template <class M>
std::vector<std::pair<std::size_t, double>> global_sparsities(M& m) {
  std::vector<std::pair<std::size_t, double>> r;
  using namespace pruning::detail;
  for_each_pruned(m, mask_bit, 0, [&]<std::size_t I, class L>(auto*, auto*, const std::uint8_t* mask, std::size_t, auto*) {
    if constexpr (pruning::detail::is_global<L>()) r.emplace_back(I + 1, pruning::mask_sparsity(mask, L::masked_count));
  });
  return r;
}

// (position from 1, kernel weights its mask keeps) for every layer pruned with global_magnitude.
template <class M>
std::vector<std::pair<std::size_t, std::size_t>> global_kept(M& m) {
  std::vector<std::pair<std::size_t, std::size_t>> r;
  using namespace pruning::detail;
  for_each_pruned(m, mask_bit, 0, [&]<std::size_t I, class L>(auto*, auto*, const std::uint8_t* mask, std::size_t, auto*) {
    if constexpr (pruning::detail::is_global<L>()) {
      std::size_t n = 0;
      for (std::size_t i = 0; i < L::masked_count; ++i) n += mask[i] != 0;
      r.emplace_back(I + 1, n);
    }
  });
  return r;
}

struct update_pruning_step {
  // Phase 1 (before the forward pass): the masks of step t.
  template <class M>
  void scale_loss(step_state<M>& s) {
    if (s.iteration == last_step_) return;  // gradient accumulation: one mask update per update count
    last_step_ = s.iteration;
    prune_at_step(s.model, s.iteration);
  }
  // Phase 4: pruned weights get no gradient.
  template <class M>
  void transform_gradients(step_state<M>& s) {
    using namespace pruning::detail;
    for_each_pruned(s.model, gradient_bit | mask_bit, gradient_bit,
                    [&]<std::size_t I, class L>(auto*, auto* g, const std::uint8_t* mask, std::size_t, auto*) {
                      for (std::size_t i = 0; i < L::masked_count; ++i)
                        if (!mask[i]) g[i] = 0;
                    });
  }
  // Phase 6: pruned weights and their optimizer slots are exactly 0.
  template <class M>
  void after_update(step_state<M>& s) {
    const std::size_t n = s.parameters.size();
    const std::size_t slots = n ? s.slots.size() / n : 0;
    using namespace pruning::detail;
    for_each_pruned(s.model, kernel_bit | mask_bit | slot_bit, kernel_bit | slot_bit,
                    [&]<std::size_t I, class L>(auto* w, auto*, const std::uint8_t* mask, std::size_t off, auto* sl) {
                      for (std::size_t i = 0; i < L::masked_count; ++i)
                        if (!mask[i]) {
                          w[i] = 0;
                          for (std::size_t k = 0; k < slots; ++k) sl[k * n + off + i] = 0;
                        }
                    });
  }
  template <class Ctx>
  void on_train_begin(Ctx&) {
    last_step_ = -1;
  }
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    for (auto [pos, sp] : layer_sparsities(ctx.model)) ctx.epoch_logs.set("sparsity_layer_" + std::to_string(pos), sp);
  }

 private:
  std::int64_t last_step_ = -1;
};

}  // namespace ctnn
