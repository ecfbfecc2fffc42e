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

// The plan's derived buffers follow the path each backend's ops take (layers/sparse_dense.hpp,
// detail::computes_values_gradient): the simulated device forwards cpu<>'s values' gradient
// (SIM_DEVICE_OP_IF), so its n:m plan holds what cpu<>'s holds, the decoded weights alone where
// cpu<> computes that gradient without dW (float on AVX-512 and AVX2), and bitmap keeps dW's
// scratch on both.
namespace {
using nm_plan_net = ctnn::sequential<ctnn::input<16>, ctnn::sparse_dense_nm<16, 24, 2, 4, ctnn::relu>, ctnn::dense<3>>;
using bitmap_plan_net = ctnn::sequential<ctnn::input<16>, ctnn::sparse_dense<16, 24, 100, ctnn::relu>, ctnn::dense<3>>;
template <class Net, class B>
constexpr std::size_t derived_bytes = Net::template plan<float, B>::bytes(ctnn::role::derived, 1);
constexpr bool nm_fused = ctnn::kernels::cpu::fused_weights_gradient_v<ctnn::kernels::nm_index<2, 4>, 16, 24,
                                                                       ctnn::kernels::cpu::default_arch, float>;
static_assert(derived_bytes<nm_plan_net, sim::device> == derived_bytes<nm_plan_net, ctnn::cpu<>> &&
              derived_bytes<nm_plan_net, sim::device> == (nm_fused ? 1 : 2) * 16 * 24 * 4);
static_assert(derived_bytes<bitmap_plan_net, sim::device> == 2 * 16 * 24 * 4 &&
              derived_bytes<bitmap_plan_net, ctnn::cpu<>> == 2 * 16 * 24 * 4);
}  // namespace

template <class P>
inline constexpr bool parity::exact<sim::device, P> = !std::is_same_v<P, ctnn::precision::float64>;
template <>
inline constexpr bool parity::same_dropout_draw<sim::device> = true;

PARITY_SPARSE_CASES(sim::device, "parity on the simulated device")

TEST_CASE("parity on the simulated device: a pruned model stripped to the bitmap, csc and rows layouts") {
  parity::check_stripped<sim::device>();
}
