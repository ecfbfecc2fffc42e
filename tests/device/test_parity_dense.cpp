// cpu<> against the simulated device (simulated_device.hpp) over every policy,
// the dense group of layer types of tests/parity/parity.hpp: the simulated
// device runs cpu<>'s kernels, so every comparison asks for the same bits
// except under float64 (there predict after a step differs from cpu<>'s in the
// last bits for the activation-layer network at batch 7: compared within
// 1e-10), and the pruned network trains without update_pruning_step, which
// still reads the weights from the host directly (pruning/update_pruning_step.hpp:
// a SIGSEGV on this backend until it goes through a host view).
#include "device/simulated_device.hpp"
#include "parity/parity.hpp"

template <class P>
inline constexpr bool parity::exact<sim::device, P> = !std::is_same_v<P, ctnn::precision::float64>;
template <>
inline constexpr bool parity::same_dropout_draw<sim::device> = true;
template <>
inline constexpr bool parity::pruning_step<sim::device> = false;

PARITY_DENSE_CASES(sim::device, "parity on the simulated device")
