// model.hpp: one arena, deterministic init, growth keeps parameters, passes;
// predict (and predict over a dataset, train/predict.hpp) never moves the arena.
#include <doctest/doctest.h>

#include <ctnn/data/in_memory.hpp>
#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/reshape.hpp>
#include <ctnn/train/model.hpp>
#include <ctnn/train/predict.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

using namespace ctnn;

using net = sequential<input<2, 2>, flatten, dense<5, ctnn::tanh>, dense<3>>;

TEST_CASE("make_model: the same seed gives the same parameters, another seed others") {
  auto a = make_model<net>(1), b = make_model<net>(1), c = make_model<net>(2);
  CHECK(std::vector<float>(a.parameters().begin(), a.parameters().end()) ==
        std::vector<float>(b.parameters().begin(), b.parameters().end()));
  CHECK(std::vector<float>(a.parameters().begin(), a.parameters().end()) !=
        std::vector<float>(c.parameters().begin(), c.parameters().end()));
  CHECK(a.parameters().size() >= net::parameter_count);
}

TEST_CASE("the arena is laid out by the constexpr plan and grows keeping parameters") {
  auto m = make_model<net>(3);
  const std::vector<float> before(m.parameters().begin(), m.parameters().end());
  m.reserve(100, 3);
  CHECK(m.batch_capacity() == 100);
  CHECK(m.memory_bytes() == net::memory_plan<float>(100, 3).total);
  CHECK(std::vector<float>(m.parameters().begin(), m.parameters().end()) == before);
  CHECK(reinterpret_cast<std::uintptr_t>(m.parameters().data()) % 64 == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(m.layer_parameters<2>().data()) % 64 == 0);
}

TEST_CASE("forward matches a hand computation through the layer parameters") {
  using lin = sequential<input<2>, dense<1>>;
  auto m = make_model<lin>(0);
  auto p = m.layer_parameters<0>();
  p[0] = 2;
  p[1] = -1;
  p[2] = 0.5f;
  const float x[4] = {1, 1, 3, 2};
  const float* y = m.forward(x, 2, false);
  CHECK(y[0] == 1.5f);
  CHECK(y[1] == 4.5f);
  CHECK(m.predict(x, 2, 1) == std::vector<float>{1.5f, 4.5f});
}

TEST_CASE("backward leaves the gradient of the output gradient's dot product") {
  using lin = sequential<input<2>, dense<1>>;
  auto m = make_model<lin>(0);
  const float x[2] = {3, -2};
  m.forward(x, 1, true);
  m.output_gradient()[0] = 1;
  m.backward();
  auto g = m.layer_gradients<0>();
  CHECK(g[0] == 3);
  CHECK(g[1] == -2);
  CHECK(g[2] == 1);
}

TEST_CASE("an empty batch is refused") {
  auto m = make_model<net>(0);
  CHECK_THROWS_AS(m.forward(nullptr, 0, false), std::invalid_argument);
}

TEST_CASE("predict above the batch capacity keeps the memory in place: spans taken before stay valid") {
  auto m = make_model<net>(4);
  const auto span = m.layer_parameters<1>();  // the first dense layer's kernel and bias
  const float* const where = span.data();
  const std::size_t capacity = m.batch_capacity(), bytes = m.memory_bytes();
  REQUIRE(capacity < 64);
  std::vector<float> xs(100 * 4);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = float(i % 7) / 7 - 0.5f;
  const auto y = m.predict(xs.data(), 100, 64);  // chunks of 64 and 36: above the capacity
  CHECK(m.layer_parameters<1>().data() == where);
  CHECK(m.batch_capacity() == capacity);
  CHECK(m.memory_bytes() == bytes);
  // Reading and writing through the span reaches the model (a stale span would be freed memory: ASan).
  const float w0 = span[0];
  CHECK(w0 == m.parameters()[0]);
  span[0] = w0 + 1.0f;
  CHECK(m.parameters()[0] == w0 + 1.0f);
  span[0] = w0;
  // The outputs are those of a model whose memory holds the batch.
  auto grown = m;
  grown.reserve(64, 0);
  CHECK(y == grown.predict(xs.data(), 100, 64));
  // and within the capacity, predict runs in the model's memory as before
  CHECK(m.predict(xs.data(), 3, 1).size() == 3 * 3);
  CHECK_THROWS_AS(m.predict(xs.data(), 3, 0), std::invalid_argument);
  // predict over a dataset of batches of 50 neither
  const data::in_memory<shape<2, 2>, sparse_labels> ds(xs, std::vector<std::int32_t>(100, 0));
  CHECK(predict(m, ds.batch(50)) == grown.predict(xs.data(), 100, 50));
  CHECK(m.layer_parameters<1>().data() == where);
  CHECK(m.batch_capacity() == capacity);
}

TEST_CASE("flatten and reshape pass their input's memory on: first, chained, between layers and last") {
  // aliases_input (core/plan.hpp): no activation block of their own and no copy; the same
  // network without them computes the same outputs and gradients.
  using plain = sequential<input<6>, dense<4, ctnn::tanh>, dense<4>>;
  using shaped = sequential<input<2, 3>, reshape<3, 2>, flatten, dense<4, ctnn::tanh>, reshape<2, 2>, flatten, dense<4>,
                            reshape<2, 2>>;
  static_assert(shaped::memory_plan<float>(8).activations == plain::memory_plan<float>(8).activations);
  auto a = make_model<plain>(1);
  auto b = make_model<shaped>(2);
  std::copy(a.layer_parameters<0>().begin(), a.layer_parameters<0>().end(), b.layer_parameters<2>().begin());
  std::copy(a.layer_parameters<1>().begin(), a.layer_parameters<1>().end(), b.layer_parameters<5>().begin());
  std::vector<float> x(8 * 6), dy(8 * 4);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7) * 0.25f - 0.7f;
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = float(i % 5) * 0.5f - 1.0f;
  const float* ya = a.forward(x.data(), 8, true);
  const std::vector<float> out_a(ya, ya + 8 * 4);
  const float* yb = b.forward(x.data(), 8, true);
  CHECK(std::vector<float>(yb, yb + 8 * 4) == out_a);
  std::copy(dy.begin(), dy.end(), a.output_gradient());
  std::copy(dy.begin(), dy.end(), b.output_gradient());
  a.backward();
  b.backward();
  const auto same = [](auto p, auto q) { return std::vector<float>(p.begin(), p.end()) == std::vector<float>(q.begin(), q.end()); };
  CHECK(same(a.layer_gradients<0>(), b.layer_gradients<2>()));
  CHECK(same(a.layer_gradients<1>(), b.layer_gradients<5>()));
  // predict above the capacity runs in its scratch memory: the aliases follow it
  CHECK(b.predict(x.data(), 8, 8) == a.predict(x.data(), 8, 8));
  auto c = make_model<shaped>(2);
  std::copy(b.parameters().begin(), b.parameters().end(), c.parameters().begin());
  CHECK(c.predict(x.data(), 8, 8) == out_a);
}
