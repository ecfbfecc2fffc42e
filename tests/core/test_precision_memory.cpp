// core/precision_memory.hpp: memory_saved<Net, P>(batch, slots) is float32's
// memory plan minus P's, role by role, in signed bytes. The values below are
// computed by hand from the plan's rules (core/plan.hpp, core/sequential.hpp):
// each layer's block of a role 64-byte aligned; activations are each layer's
// output in its compute type, the converted copies (the model's float input
// in the first layer's type, the last output widened to float), two delta
// buffers of the widest tensor and the caches; a mixed policy adds the
// compute-type copy of the parameters and their compute-type gradients.
#include <ctnn/core/precision_memory.hpp>

#include <doctest/doctest.h>

#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/dropout.hpp>

using namespace ctnn;

namespace {

// dense 8 -> 16 (144 parameters), dynamic_dropout (a 16-value cache, one f32 of
// metadata), dense 16 -> 4 (68 parameters).
using net = sequential<input<8>, dense<16, relu>, dynamic_dropout, dense<4>>;

// float32, batch 2, 2 optimizer slots:
//   parameters 144*4 = 576 | 0 | 68*4 = 272 -> 320: 896; gradients 896; slots 2 * 896
//   metadata 4 -> 64; activations 16*4*2 = 128 | 128 | 4*4*2 = 32 -> 64: 320
//   deltas 2 * (16*4*2 = 128); caches 16*4*2 = 128
constexpr auto f32 = net::memory_plan<precision::float32>(2, 2);
static_assert(f32.parameters == 896 && f32.gradients == 896 && f32.optimizer == 1792 && f32.metadata == 64);
static_assert(f32.activations == 320 + 256 + 128 && f32.total == 4352);

// mixed_float16, batch 2, 2 slots: variables, gradients and slots as float32;
// activations 16*2*2 = 64 | 64 | 4*2*2 = 16 -> 64: 192; converted: the input
// 8*2*2 = 32 -> 64, the logits widened 4*4*2 = 32 -> 64: 128; deltas 2 * 64;
// the cache 16*2*2 = 64: 512 in all. The compute-type copies of the parameters
// and of their gradients: 2 * (144*2 = 288 -> 320 | 0 | 68*2 = 136 -> 192) = 1024.
constexpr auto m16 = memory_saved<net, precision::mixed_float16>(2, 2);
static_assert(m16.parameters == 0 && m16.gradients == 0 && m16.optimizer == 0 && m16.state == 0 && m16.masks == 0 &&
              m16.metadata == 0);
static_assert(m16.activations == 704 - 512 && m16.compute_copies == -1024 && m16.total == 4352 - 5184);
// at batch 64 no block needs padding: 64 samples x (two 16-value outputs, two
// 16-value deltas, the 16-value cache, the 4 logits) x 2 bytes saved, less the
// converted 8-value input (2 bytes) and the widened logits (4 bytes)
static_assert(memory_saved<net, precision::mixed_float16>(64, 2).activations == 64 * ((5 * 16 + 4) * 2 - 8 * 2 - 4 * 4));
static_assert(memory_saved<net, precision::mixed_float16>(64, 2).total == 64 * ((5 * 16 + 4) * 2 - 8 * 2 - 4 * 4) - 1024);

// mixed_bfloat16 stores the same widths as mixed_float16.
constexpr auto mb16 = memory_saved<net, precision::mixed_bfloat16>(2, 2);
static_assert(mb16.activations == m16.activations && mb16.total == m16.total && mb16.parameters == 0);

// float16 (inference), batch 1, no slots: the parameters (and the gradient
// region the plan sizes like them) in half: 144*2 = 288 -> 320 | 136 -> 192:
// 512 instead of 896, and no copies (the variables are the compute type). At
// batch 1 every block rounds up to 64 bytes either way, so the activations
// cost the two converted blocks (64 + 64).
constexpr auto h16 = memory_saved<net, precision::float16>(1, 0);
static_assert(h16.parameters == 896 - 512 && h16.gradients == 896 - 512 && h16.optimizer == 0);
static_assert(h16.activations == -128 && h16.compute_copies == 0 && h16.metadata == 0 && h16.total == 768 - 128);

// Against itself nothing is saved.
constexpr auto none = memory_saved<net, precision::float32>(32, 2);
static_assert(none.total == 0 && none.activations == 0 && none.parameters == 0);

}  // namespace

TEST_CASE("memory_saved: the same values at run time as at compile time") {
  std::size_t batch = 64;  // not a constant expression here
  const auto saved = memory_saved<net, precision::mixed_float16>(batch, 2);
  CHECK(saved.activations == 8704);
  CHECK(saved.total == std::ptrdiff_t(net::memory_plan<precision::float32>(batch, 2).total) -
                           std::ptrdiff_t(net::memory_plan<precision::mixed_float16>(batch, 2).total));
}
