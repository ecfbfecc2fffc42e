// distributed/communicator.hpp and distributed/data_parallel.hpp without MPI: distributed::none
// changes nothing, and the hook's calls (broadcast before the first step, one all-reduce of the
// whole gradient region in phase 4, before the regularizers and the optimizer) seen through a
// communicator that records them. The MPI runs are tests/distributed/mpi/*.cpp.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/distributed/communicator.hpp>
#include <ctnn/distributed/data_parallel.hpp>

// <ctnn/ctnn.hpp> never includes <mpi.h> (only ctnn/distributed/mpi.hpp does).
#if defined(MPI_VERSION) || defined(OMPI_MPI_H) || defined(MPI_INCLUDED)
#error "ctnn/ctnn.hpp included mpi.h"
#endif

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

using namespace ctnn;

namespace {
using net = sequential<input<4>, dense<8, ctnn::tanh>, dense<3>>;
using l2_net = sequential<input<4>, dense<8, ctnn::tanh, l2<0.01f>>, dense<3>>;
data::in_memory<shape<4>, sparse_labels> toy_data() {
  std::vector<float> x(48 * 4);
  std::vector<std::int32_t> y(48);
  rng g(5);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < 48; ++i) y[i] = std::int32_t(i % 3);
  return {x, y};
}
template <class M>
std::vector<float> params(const M& m) {
  return {m.parameters().begin(), m.parameters().end()};
}
const sparse_categorical_crossentropy xent{.from_logits = true};

// Rank 1 of 2 in a pretend job: a broadcast writes "rank 0's" values (root_value), an
// all-reduce records its span and replaces the gradients by reduced_value.
struct recording_comm {
  float root_value = 0.5f, reduced_value = 0.0f;
  std::vector<std::pair<const void*, std::size_t>>* reduced = nullptr;
  int* broadcasts = nullptr;
  int rank() const { return 1; }
  int size() const { return 2; }
  template <class T>
  void broadcast(std::span<T> s, int) const {
    ++*broadcasts;
    if constexpr (std::is_same_v<T, float>) std::fill(s.begin(), s.end(), root_value);
  }
  template <class T>
  void all_reduce_average(std::span<T> s) const {
    reduced->emplace_back(s.data(), s.size());
    std::fill(s.begin(), s.end(), T(reduced_value));
  }
  void barrier() const {}
};
static_assert(distributed::Communicator<recording_comm>);
}  // namespace

TEST_CASE("distributed::none: rank 0 of 1, collectives leave the data as it is") {
  distributed::none c;
  static_assert(distributed::none::rank() == 0 && distributed::none::size() == 1);
  std::vector<float> v{1.f, 2.f, 3.f};
  c.all_reduce_average(std::span<float>(v));
  c.broadcast(std::span<float>(v), 0);
  c.barrier();
  CHECK(v == std::vector<float>{1.f, 2.f, 3.f});
  CHECK_THROWS_WITH_AS(c.broadcast(std::span<float>(v), 1),
                       "broadcast: root 1 is not a rank of distributed::none (size 1)", std::invalid_argument);
}

TEST_CASE("data_parallel<none> in fit: the same weights, bit for bit, as fit without it") {
  auto a = make_model<net>(3), b = make_model<net>(3);
  adam oa{0.01}, ob{0.01};
  fit(a, xent, oa, toy_data().batch(8), epochs{2});
  distributed::data_parallel<distributed::none> dp;
  const history h = fit(b, xent, ob, toy_data().batch(8), epochs{2}, dp);
  CHECK(params(a) == params(b));
  CHECK(dp.reductions() == 0);  // size 1: nothing to reduce
  CHECK(h["allreduce_seconds"][0] == 0.0);
}

TEST_CASE("data_parallel: rank 0's variables before the first step, one all-reduce of the whole gradient region per step") {
  std::vector<std::pair<const void*, std::size_t>> reduced;
  int broadcasts = 0;
  auto m = make_model<net>(3);
  sgd opt{0.1};
  distributed::data_parallel<recording_comm> dp{recording_comm{0.5f, 0.0f, &reduced, &broadcasts}};
  fit(m, xent, opt, toy_data().batch(8), epochs{1}, dp);
  // parameters, states, masks, slots, counts (int64), learning-rate scale (double)
  CHECK(broadcasts == 6);
  REQUIRE(reduced.size() == 6);  // 48 samples / 8
  CHECK(dp.reductions() == 6);
  for (const auto& [p, n] : reduced) {
    CHECK(p == static_cast<const void*>(m.gradients().data()));
    CHECK(n == m.gradients().size());
  }
  // the broadcast weights (0.5) were never moved: the all-reduce (here: zeros) ran before the update
  const auto w = params(m);
  CHECK(std::all_of(w.begin(), w.end(), [](float v) { return v == 0.5f; }));
}

TEST_CASE("data_parallel: the regularizers' gradients are added after the all-reduce, not averaged away") {
  std::vector<std::pair<const void*, std::size_t>> reduced;
  int broadcasts = 0;
  auto m = make_model<l2_net>(3);
  sgd opt{0.1};
  distributed::data_parallel<recording_comm> dp{recording_comm{0.5f, 0.0f, &reduced, &broadcasts}};
  fit(m, xent, opt, toy_data().batch(48), epochs{1}, dp);
  REQUIRE(reduced.size() == 1);
  // one step: the first layer's kernel moved by the l2 gradient only (w - 0.1 * 2 * 0.01 * w), the rest stayed
  const auto k = m.layer_parameters<0>();
  CHECK(k[0] == doctest::Approx(0.5f * (1 - 0.1f * 2 * 0.01f)).epsilon(1e-6));
  const auto out = m.layer_parameters<1>();
  CHECK(out[0] == 0.5f);
}
