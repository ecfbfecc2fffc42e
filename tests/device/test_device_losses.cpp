// Dense targets, every loss, a regularizer and with_options' clipping on the
// simulated device (simulated_device.hpp): targets one value per output reach
// the model through the feeder, the penalties run in the runner, and the
// results are cpu<>'s bits.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

#include <string>
#include <vector>

#include "device/simulated_device.hpp"

namespace {
using namespace ctnn;

template <class M>
std::string variable_bytes(const M& m) {
  std::string v;
  m.for_each_variable([&](const variable_ref& r) { v.append(reinterpret_cast<const char*>(r.data), r.extent * r.element_bytes); });
  return v;
}

// n samples of 12 inputs, N dense targets (one-hot for a classifier when one_hot)
template <std::size_t N>
data::in_memory<shape<12>, dense_targets<shape<N>>> samples(std::size_t n, std::uint64_t seed, bool one_hot) {
  std::vector<float> x(n * 12), y(n * N, 0.0f);
  rng g(seed);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < 12; ++j) x[i * 12 + j] = float(g.uniform(-1, 1));
    if (one_hot) {
      y[i * N + std::size_t(x[i * 12] > 0) + (N > 2 && x[i * 12 + 1] > 0 ? 1 : 0)] = 1.0f;
    } else {
      for (std::size_t k = 0; k < N; ++k) y[i * N + k] = x[i * 12 + k] * 0.5f - x[i * 12 + k + 1];
    }
  }
  return {x, y};
}

template <class Net, class Loss, class MakeOpt, class D>
void same_on_both(const Loss& loss, MakeOpt make_opt, const D& train) {
  auto d = make_model<Net, float, sim::device>(21);
  auto c = make_model<Net>(21);
  auto o1 = make_opt(), o2 = make_opt();
  const auto hd = fit(d, loss, o1, train, epochs{3}, validation_data(train));
  const auto hc = fit(c, loss, o2, train, epochs{3}, validation_data(train));
  CHECK(hd["loss"] == hc["loss"]);
  CHECK(hd["val_loss"] == hc["val_loss"]);
  CHECK(hd["loss"].back() < hd["loss"].front());
  CHECK(variable_bytes(d) == variable_bytes(c));
  CHECK(evaluate(d, loss, train)["loss"] == evaluate(c, loss, train)["loss"]);
  CHECK(predict(d, train) == predict(c, train));
}
}  // namespace

TEST_CASE("mean_squared_error with an l2 regularizer and sgd (nesterov) on the simulated device") {
  using reg = sequential<input<12>, dense<16, ctnn::tanh, l2<0.01f>>, dense<3>>;
  same_on_both<reg>(mean_squared_error{}, [] { return sgd{0.05, 0.9, true}; }, samples<3>(64, 1, false).batch(16));
}

TEST_CASE("categorical_crossentropy from logits with with_options' clipnorm on the simulated device") {
  using cls = sequential<input<12>, dense<16, relu, l1<0.001f>>, dense<3>>;
  optimizer_options o;
  o.clipnorm = 0.5;
  same_on_both<cls>(categorical_crossentropy{.from_logits = true}, [&] { return with_options(adam{1e-2}, o); },
                    samples<3>(64, 2, true).batch(16));
}

TEST_CASE("categorical_crossentropy on softmax probabilities (rmsprop) on the simulated device") {
  using probs = sequential<input<12>, dense<8, sigmoid>, dense<3, softmax>>;
  same_on_both<probs>(categorical_crossentropy{}, [] { return rmsprop{1e-2}; }, samples<3>(64, 3, true).batch(16));
}

// issue 29: the pointwise losses (ops<B>::pointwise_loss) run on a backend whose memory the host cannot touch
TEST_CASE("binary_crossentropy from logits, huber and kl_divergence on the simulated device") {
  using two = sequential<input<12>, dense<16, ctnn::tanh>, dense<2>>;
  same_on_both<two>(binary_crossentropy{.from_logits = true}, [] { return adam{1e-2}; }, samples<2>(64, 4, true).batch(16));
  using sig = sequential<input<12>, dense<16, ctnn::tanh>, dense<2, sigmoid>>;
  same_on_both<sig>(binary_crossentropy{}, [] { return adam{1e-2}; }, samples<2>(64, 5, true).batch(16));
  using reg = sequential<input<12>, dense<16, ctnn::tanh>, dense<3>>;
  same_on_both<reg>(huber{.delta = 0.5}, [] { return sgd{0.05}; }, samples<3>(64, 6, false).batch(16));
  using probs = sequential<input<12>, dense<8, sigmoid>, dense<3, softmax>>;
  same_on_both<probs>(kl_divergence{}, [] { return rmsprop{1e-2}; }, samples<3>(64, 7, true).batch(16));
}
