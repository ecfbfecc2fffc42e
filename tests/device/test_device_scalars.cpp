// The step's scalars region (core/plan.hpp's step_scalars) on the simulated
// device (simulated_device.hpp): the loss and the regularizers' penalty run
// through ops<B> into it, and train_step reads it exactly once per step, after the runner's phases 1-3
// (no read from the device inside the runner), with cpu<>'s bits; loss
// scaling, a non-finite loss and a bad label take the same paths as on cpu<>.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "device/simulated_device.hpp"

namespace {
using namespace ctnn;

using net = sequential<input<12>, dense<16, relu>, dense<4>>;

struct batch_data {
  std::vector<float> x;
  std::vector<std::int32_t> y;
};
batch_data make_batch(std::size_t n, std::uint64_t seed) {
  batch_data b{std::vector<float>(n * 12), std::vector<std::int32_t>(n)};
  rng g(seed);
  for (auto& v : b.x) v = float(g.uniform(-1, 1));
  for (auto& v : b.y) v = std::int32_t(g.below(4));
  return b;
}
}  // namespace

TEST_CASE("train_step reads the scalars once per step, after backward, with cpu<>'s loss") {
  auto d = make_model<net, float, sim::device>(3);
  auto c = make_model<net>(3);
  adam o1{1e-2}, o2{1e-2};
  const sparse_categorical_crossentropy loss{.from_logits = true};
  train_step sd(d, loss, o1);
  train_step sc(c, loss, o2);
  for (std::size_t step = 0; step < 5; ++step) {
    const batch_data b = make_batch(16, step + 1);
    const std::size_t reads = sim::arena::reads, bytes = sim::arena::bytes_read, inside = sim::arena::reads_in_runner;
    const step_result rd = sd.run(b.x.data(), b.y.data(), 16, 0, step);
    CHECK(sim::arena::reads - reads == 1);                     // the scalars, nothing else
    CHECK(sim::arena::bytes_read - bytes == sizeof(step_scalars));
    CHECK(sim::arena::reads_in_runner == inside);              // never while phases 1-3 run
    const step_result rc = sc.run(b.x.data(), b.y.data(), 16, 0, step);
    CHECK(rd.loss_sum == rc.loss_sum);
    CHECK(rd.updated);
  }
  CHECK(d.host_region(role::parameter).size() == c.host_region(role::parameter).size());
  const auto pd = d.host_region(role::parameter);
  const auto pc = c.host_region(role::parameter);
  CHECK(std::memcmp(pd.data(), pc.data(), pd.size()) == 0);
}

TEST_CASE("the loss scale reaches the loss op through the scalars (loss_scale hook) on the simulated device") {
  auto d = make_model<net, float, sim::device>(4);
  auto c = make_model<net>(4);
  sgd o1{0.1}, o2{0.1};
  loss_scale h1 = loss_scale::fixed(256.0), h2 = loss_scale::fixed(256.0);
  const mean_squared_error loss{};
  train_step<decltype(d), mean_squared_error, decltype(o1), loss_scale> sd(d, loss, o1, std::tie(h1));
  train_step<decltype(c), mean_squared_error, decltype(o2), loss_scale> sc(c, loss, o2, std::tie(h2));
  std::vector<float> x(8 * 12), y(8 * 4);
  rng g(5);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (auto& v : y) v = float(g.uniform(-1, 1));
  const std::size_t reads = sim::arena::reads;
  for (std::size_t step = 0; step < 3; ++step) {
    const step_result rd = sd.run(x.data(), y.data(), 8, 0, step);
    const step_result rc = sc.run(x.data(), y.data(), 8, 0, step);
    CHECK(rd.loss_sum == rc.loss_sum);
    CHECK(rd.updated == rc.updated);
  }
  CHECK(sim::arena::reads - reads == 3);
  // the scalars hold the last step's loss sum and the scale it ran under
  const step_scalars s = d.read_scalars();
  CHECK(s.loss_scale == 256.0);
  CHECK(s.non_finite == 0);
  const auto pd = d.host_region(role::parameter);
  const auto pc = c.host_region(role::parameter);
  CHECK(std::memcmp(pd.data(), pc.data(), pd.size()) == 0);
}

TEST_CASE("a non-finite loss is flagged in the scalars and stops the step before the update (simulated device)") {
  auto d = make_model<net, float, sim::device>(6);
  adam o{1e-2};
  train_step s(d, mean_squared_error{}, o);
  const batch_data b = make_batch(4, 9);
  std::vector<float> y(4 * 4, 0.5f);
  y[5] = std::numeric_limits<float>::quiet_NaN();  // a NaN target: the loss is NaN
  const auto before = d.host_region(role::parameter);
  const std::vector<std::byte> p0(before.data(), before.data() + before.size());
  const step_result r = s.run(b.x.data(), y.data(), 4, 0, 0);
  CHECK(std::isnan(r.loss_sum));
  CHECK_FALSE(r.updated);
  CHECK(d.read_scalars().non_finite != 0);
  const auto after = d.host_region(role::parameter);
  CHECK(std::memcmp(after.data(), p0.data(), p0.size()) == 0);
  CHECK(d.optimizer_iterations() == 0);
}

TEST_CASE("a label outside the classes throws on the host before the step runs (simulated device)") {
  auto d = make_model<net, float, sim::device>(7);
  adam o{1e-2};
  train_step s(d, sparse_categorical_crossentropy{.from_logits = true}, o);
  batch_data b = make_batch(4, 2);
  b.y[2] = 4;
  CHECK_THROWS_WITH_AS(s.run(b.x.data(), b.y.data(), 4, 0, 0),
                       "sparse_categorical_crossentropy: label 4 of sample 2 in the batch is outside [0, 4)",
                       std::out_of_range);
  CHECK(d.optimizer_iterations() == 0);
}

TEST_CASE("evaluate reads each batch's loss from the scalars on the simulated device, as cpu<>") {
  auto d = make_model<net, float, sim::device>(8);
  auto c = make_model<net>(8);
  const batch_data b = make_batch(40, 3);
  const data::in_memory<shape<12>, sparse_labels> ds(b.x, b.y);
  const auto batched = ds.batch(16);
  const std::size_t reads = sim::arena::reads;
  const logs ld = evaluate(d, sparse_categorical_crossentropy{.from_logits = true}, batched);
  CHECK(sim::arena::reads - reads == 3 + 1);  // one per batch, and the first batch's check of the variables
  const logs lc = evaluate(c, sparse_categorical_crossentropy{.from_logits = true}, batched);
  CHECK(ld["loss"] == lc["loss"]);
}

TEST_CASE("with_options' clipnorm clips per variable on the device: no host copy of the variables per step") {
  auto d = make_model<net, float, sim::device>(5);
  auto c = make_model<net>(5);
  optimizer_options oo;
  oo.clipnorm = 0.05;
  with_options o1{adam{1e-2}, oo}, o2{adam{1e-2}, oo};
  const sparse_categorical_crossentropy loss{.from_logits = true};
  train_step sd(d, loss, o1);
  train_step sc(c, loss, o2);
  for (std::size_t step = 0; step < 3; ++step) {
    const batch_data b = make_batch(16, step + 7);
    const std::size_t reads = sim::arena::reads, bytes = sim::arena::bytes_read;
    sd.run(b.x.data(), b.y.data(), 16, 0, step);
    CHECK(sim::arena::reads - reads == 1);  // the scalars only: the clip's offsets come from the plan
    CHECK(sim::arena::bytes_read - bytes == sizeof(step_scalars));
    sc.run(b.x.data(), b.y.data(), 16, 0, step);
  }
  const auto pd = d.host_region(role::parameter);
  const auto pc = c.host_region(role::parameter);
  REQUIRE(pd.size() == pc.size());
  CHECK(std::memcmp(pd.data(), pc.data(), pd.size()) == 0);
}

TEST_CASE("the regularizers' penalty goes into the scalars: still one read per step, with cpu<>'s bits (l2, dynamic_l1)") {
  using reg_net = sequential<input<12>, dense<16, relu, l2<0.01f>>, dense<4, identity, dynamic_l1>>;
  auto d = make_model<reg_net, float, sim::device>(11);
  auto c = make_model<reg_net>(11);
  CHECK(set_regularization(d, "l1", 0.02) == 1);
  CHECK(set_regularization(c, "l1", 0.02) == 1);
  adam o1{1e-2}, o2{1e-2};
  const sparse_categorical_crossentropy loss{.from_logits = true};
  train_step sd(d, loss, o1);
  train_step sc(c, loss, o2);
  for (std::size_t step = 0; step < 4; ++step) {
    const batch_data b = make_batch(16, step + 21);
    const std::size_t reads = sim::arena::reads, bytes = sim::arena::bytes_read, inside = sim::arena::reads_in_runner,
                      waits = sim::arena::waits;
    const step_result rd = sd.run(b.x.data(), b.y.data(), 16, 0, step);
    CHECK(sim::arena::reads - reads == 1);  // the scalars, the penalty in them
    CHECK(sim::arena::bytes_read - bytes == sizeof(step_scalars));
    CHECK(sim::arena::reads_in_runner == inside);
    CHECK(sim::arena::waits == waits);  // no sum_squares / sum_abs waited for
    const step_result rc = sc.run(b.x.data(), b.y.data(), 16, 0, step);
    CHECK(rd.loss_sum == rc.loss_sum);
    CHECK(rd.penalty == rc.penalty);
    CHECK(rd.penalty > 0.0);
    CHECK(rd.updated);
  }
  // model::penalty (fit's and evaluate's) is the same op and one read of the scalars
  const std::size_t reads = sim::arena::reads;
  CHECK(d.penalty() == c.penalty());
  CHECK(sim::arena::reads - reads == 1);
  const auto pd = d.host_region(role::parameter);
  const auto pc = c.host_region(role::parameter);
  REQUIRE(pd.size() == pc.size());
  CHECK(std::memcmp(pd.data(), pc.data(), pd.size()) == 0);
}
