// ctnn/distributed/nccl.hpp on cuda<90>: a communicator of one rank (what one GPU can check):
// its collectives on device spans and on host spans (staged) leave the values as they are, a bad
// root is an exception, and fit with data_parallel<nccl> of one rank gives the same weights, bit for
// bit, as fit without it (a communicator of size 1 behaves as distributed::none). Compiled only
// where CMake found NCCL (CTNN_TEST_NCCL, linked with libnccl); more ranks: not tested here.
#include "cuda_test.hpp"

#ifdef CTNN_TEST_NCCL
#include <ctnn/distributed/data_parallel.hpp>
#include <ctnn/distributed/nccl.hpp>

#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

namespace {
using dev = ctnn::cuda<90>;
using net = ctnn::sequential<ctnn::input<6>, ctnn::dense<8, ctnn::tanh>, ctnn::dense<3>>;
static_assert(ctnn::distributed::Communicator<ctnn::distributed::nccl>);
static_assert(ctnn::distributed::handles_device_memory<ctnn::distributed::nccl>);
static_assert(!ctnn::distributed::handles_device_memory<ctnn::distributed::none>);

template <class M>
std::vector<float> parameters_of(const M& m) {
  const auto v = m.host_region(ctnn::role::parameter);
  const float* p = reinterpret_cast<const float*>(v.data());
  return std::vector<float>(p, p + v.size() / sizeof(float));
}
}  // namespace

TEST_CASE("nccl: one rank on the device, collectives on device and host spans leave the values") {
  CTNN_REQUIRE_DEVICE();
  ctnn::distributed::nccl comm;
  CHECK(comm.rank() == 0);
  CHECK(comm.size() == 1);
  const std::vector<float> h{1.5f, -2.0f, 3.25f};
  auto d = ctnn_test::to_device<float>(h);
  comm.all_reduce_average(std::span<float>(d.data(), h.size()));
  comm.broadcast(std::span<float>(d.data(), h.size()), 0);
  CHECK(ctnn_test::to_host(d, h.size()) == h);
  std::vector<double> host{0.5, -1.0};
  comm.all_reduce_average(std::span<double>(host));
  CHECK(host == std::vector<double>{0.5, -1.0});
  std::vector<std::int64_t> counts{7, 9};
  comm.broadcast(std::span<std::int64_t>(counts), 0);
  CHECK(counts == std::vector<std::int64_t>{7, 9});
  comm.barrier();
  CHECK_THROWS_AS(comm.broadcast(std::span<float>(d.data(), 1), 1), std::invalid_argument);
}

TEST_CASE("nccl: fit with data_parallel<nccl> of one rank gives the weights of fit without it, bit for bit") {
  CTNN_REQUIRE_DEVICE();
  std::vector<float> x(64 * 6);
  std::vector<std::int32_t> y(64);
  ctnn::rng g(3);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::int32_t(i % 3);
  const auto data = ctnn::data::in_memory<ctnn::shape<6>, ctnn::sparse_labels, float>(x, y).batch(16);
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  auto a = ctnn::make_model<net, ctnn::precision::float32, dev>(5);
  auto b = ctnn::make_model<net, ctnn::precision::float32, dev>(5);
  ctnn::adam oa{0.01}, ob{0.01};
  ctnn::fit(a, loss, oa, data, ctnn::epochs{2});
  ctnn::distributed::data_parallel<ctnn::distributed::nccl> dp{ctnn::distributed::nccl{}};
  ctnn::fit(b, loss, ob, data, ctnn::epochs{2}, dp);
  CHECK(dp.reductions() == 0);  // one rank: nothing to average
  CHECK(parameters_of(a) == parameters_of(b));
}
#endif
