// core/mixed_layer.hpp: a float32 layer run under a 16-bit policy. The inputs
// are widened from float16 exactly, the variables rounded to float16 (Round,
// the default) or used as they are (keep_float32's Round = false), the float32
// layer computes, and its outputs are rounded to float16 (or stay float for the
// last layer). Checked bit for bit against the float32 layer run by hand on the
// rounded values; caches are declared float32; under precision::float16 the
// variables are stored in float16 from init on.
#include <ctnn/core/mixed_layer.hpp>

#include <doctest/doctest.h>

#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/dropout.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

using namespace ctnn;

namespace {

using L32 = dense<3, sigmoid>::bind<shape<5>, precision::float32, cpu<>>;
using M = mixed_layer<L32, precision::mixed_float16, cpu<>, true>;   // rounds its variables
using K = mixed_layer<L32, precision::mixed_float16, cpu<>, false>;  // keep_float32
using H = mixed_layer<L32, precision::float16, cpu<>, true>;         // variables stored in float16

static_assert(std::is_same_v<M::variable_type, float> && std::is_same_v<M::compute_type, float16_t>);
static_assert(std::is_same_v<H::variable_type, float16_t> && std::is_same_v<H::compute_type, float16_t>);
static_assert(std::is_same_v<M::float32_layer, L32> && std::is_same_v<M::in_shape, shape<5>> &&
              std::is_same_v<M::out_shape, shape<3>>);
static_assert(M::parameter_count == 18 && M::state_count == 0);
static_assert(M::rounds_variables && !K::rounds_variables);
static_assert(mixed_layer<L32, precision::float16, cpu<>, false>::rounds_variables);  // float16 storage rounds anyway
static_assert(BoundLayer<M> && BoundLayer<H>);

// Caches are declared float32, so the float32 code runs on them unchanged.
using D32 = dropout<0.5f>::bind<shape<6>, precision::float32, cpu<>>;
using D16 = mixed_layer<D32, precision::mixed_float16, cpu<>, true>;
static_assert(D32::buffers[0].type == elem::compute && D16::buffers[0].type == elem::f32);
static_assert(D16::buffers[0].kind == role::cache && D16::buffers[0].extent == 6 && D16::buffers[0].name == "mask");
static_assert(D16::cache_per_sample == D32::cache_per_sample);

constexpr std::size_t batch = 2, nin = batch * 5, nout = batch * 3;

std::vector<float> uniform(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  rng g(seed);
  for (auto& x : v) x = float(g.uniform(-1.5, 1.5));
  return v;
}
std::vector<float16_t> to_half(const std::vector<float>& v) {
  std::vector<float16_t> h;
  for (float x : v) h.push_back(float16_t(x));
  return h;
}
std::vector<float> round_trip(const std::vector<float>& v) {
  std::vector<float> r;
  for (float x : v) r.push_back(float(float16_t(x)));
  return r;
}
// dense 5 -> 3 in float32 on the given (already rounded) values.
std::vector<float> reference_forward(std::vector<float> params, const std::vector<float>& x) {
  std::vector<float> y(nout);
  L32::forward(layer_slot<float>{params.data()}, x.data(), y.data(), run_info{batch});
  return y;
}

}  // namespace

TEST_CASE("mixed_layer forward: float16 in, variables rounded to float16, float32 arithmetic, float16 out") {
  const std::vector<float> p = uniform(M::parameter_count, 1), x = uniform(nin, 2);
  const std::vector<float16_t> x16 = to_half(x);
  std::vector<float> params = p;
  std::vector<float16_t> y16(nout);
  M::forward(layer_slot<float, float16_t>{params.data()}, x16.data(), y16.data(), run_info{batch});
  const std::vector<float> want = reference_forward(round_trip(p), round_trip(x));
  for (std::size_t i = 0; i < nout; ++i) CHECK(y16[i].bits == float16_t(want[i]).bits);
  CHECK(params == p);  // the stored variables stay float32, unrounded

  // The last layer writes float (P::io_type): the float32 result, not rounded.
  std::vector<float> y(nout);
  M::forward(layer_slot<float, float16_t>{params.data()}, x16.data(), y.data(), run_info{batch});
  CHECK(y == want);

  // keep_float32 (Round = false) computes with the variables as they are.
  K::forward(layer_slot<float, float16_t>{params.data()}, x16.data(), y.data(), run_info{batch});
  const std::vector<float> unrounded = reference_forward(p, round_trip(x));
  CHECK(y == unrounded);
  CHECK(unrounded != want);  // these variables are not all float16 values
  CHECK(M::name() == "dense<3, sigmoid>");
}

TEST_CASE("mixed_layer backward: float32 gradients from the float16 tensors, dx rounded to float16") {
  const std::vector<float> p = uniform(M::parameter_count, 3), x = uniform(nin, 4), dy = uniform(nout, 5);
  const std::vector<float16_t> x16 = to_half(x), dy16 = to_half(dy);
  std::vector<float> params = p, grads(M::parameter_count, 0.0f);
  std::vector<float16_t> y16(nout), dx16(nin);
  const layer_slot<float, float16_t> s{params.data(), grads.data()};
  M::forward(s, x16.data(), y16.data(), run_info{batch, true});
  M::backward(s, x16.data(), y16.data(), std::vector<float16_t>(dy16).data(), dx16.data(), run_info{batch, true});

  // The float32 layer's backward on the widened float16 values and the rounded variables.
  std::vector<float> rp = round_trip(p), rgrads(M::parameter_count, 0.0f), dyf = round_trip(dy), dxf(nin);
  std::vector<float> yf;
  for (float16_t v : y16) yf.push_back(float(v));
  L32::backward(layer_slot<float>{rp.data(), rgrads.data()}, round_trip(x).data(), yf.data(), dyf.data(), dxf.data(),
                run_info{batch, true});
  CHECK(grads == rgrads);
  for (std::size_t i = 0; i < nin; ++i) CHECK(dx16[i].bits == float16_t(dxf[i]).bits);
  CHECK(params == p);

  // The first layer has no dx.
  std::vector<float> g2(M::parameter_count, 0.0f);
  M::backward(layer_slot<float, float16_t>{params.data(), g2.data()}, x16.data(), y16.data(),
              std::vector<float16_t>(dy16).data(), static_cast<float16_t*>(nullptr), run_info{batch, true});
  CHECK(g2 == rgrads);
}

TEST_CASE("mixed_layer under float16: init stores the float32 initial values rounded, forward widens them") {
  std::vector<float> p32(L32::parameter_count);
  rng g32(7), g16(7);
  L32::init(layer_slot<float>{p32.data()}, g32);
  std::vector<float16_t> p16(H::parameter_count);
  H::init(layer_slot<float16_t, float16_t>{p16.data()}, g16);
  for (std::size_t i = 0; i < p16.size(); ++i) CHECK(p16[i].bits == float16_t(p32[i]).bits);
  CHECK(g16.next() == g32.next());  // the same draws

  const std::vector<float> x = uniform(nin, 8);
  std::vector<float16_t> y16(nout);
  H::forward(layer_slot<float16_t, float16_t>{p16.data()}, to_half(x).data(), y16.data(), run_info{batch});
  const std::vector<float> want = reference_forward(round_trip(p32), round_trip(x));
  for (std::size_t i = 0; i < nout; ++i) CHECK(y16[i].bits == float16_t(want[i]).bits);
}
