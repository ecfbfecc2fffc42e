// cpu<> against the simulated device (simulated_device.hpp) over every policy,
// the sparse group of layer types of tests/parity/parity.hpp: the simulated
// device runs cpu<>'s kernels, so every comparison asks for the same bits
// except under float64 (there predict after a step differs from cpu<>'s in the
// last bits for the activation-layer network at batch 7: compared within
// 1e-10); the pruned network trains with update_pruning_step (through host views).
// Then the pruned model stripped to three layouts (parity::check_stripped), which reads
// and writes both models through host views held while it works.
#include <ctnn/core/sparse_product_ops.hpp>
#include "device/simulated_device.hpp"
#include "parity/parity.hpp"

// the sparse products of every layout (core/sparse_product_ops.hpp), with their kernels parsed
static_assert(ctnn::has_sparse_product_ops<ctnn::cpu<>> && ctnn::has_sparse_product_ops<sim::device>);

template <class P>
inline constexpr bool parity::exact<sim::device, P> = !std::is_same_v<P, ctnn::precision::float64>;
template <>
inline constexpr bool parity::same_dropout_draw<sim::device> = true;

PARITY_SPARSE_CASES(sim::device, "parity on the simulated device")

TEST_CASE("parity on the simulated device: a pruned model stripped to the bitmap, csc and rows layouts") {
  parity::check_stripped<sim::device>();
}
