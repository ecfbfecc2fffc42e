// Finite-difference gradient checks of every layer, activation, loss and
// regularizer, in double precision.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

#include "gradcheck.hpp"

using namespace ctnn;

constexpr double tol = 1e-6;

TEST_CASE("gradcheck: dense with every activation") {
  CHECK(gradcheck::check_layer<dense<5>, shape<7>>() < tol);
  CHECK(gradcheck::check_layer<dense<5, relu>, shape<7>>() < tol);
  CHECK(gradcheck::check_layer<dense<5, leaky_relu<>>, shape<7>>() < tol);
  CHECK(gradcheck::check_layer<dense<5, sigmoid>, shape<7>>() < tol);
  CHECK(gradcheck::check_layer<dense<5, ctnn::tanh>, shape<7>>() < tol);
  CHECK(gradcheck::check_layer<dense<5, softmax>, shape<7>>() < tol);
  CHECK(gradcheck::check_layer<dense<1, sigmoid>, shape<3>>() < tol);
  CHECK(gradcheck::check_layer<dense<17, relu>, shape<33>>({.batch = 5}) < tol);
}

TEST_CASE("gradcheck: activations as layers, on rank-1 and rank-2 inputs") {
  CHECK(gradcheck::check_layer<relu, shape<9>>() < tol);
  CHECK(gradcheck::check_layer<leaky_relu<0.1f>, shape<9>>() < tol);
  CHECK(gradcheck::check_layer<sigmoid, shape<9>>() < tol);
  CHECK(gradcheck::check_layer<ctnn::tanh, shape<9>>() < tol);
  CHECK(gradcheck::check_layer<identity, shape<9>>() < tol);
  CHECK(gradcheck::check_layer<softmax, shape<9>>() < tol);
  CHECK(gradcheck::check_layer<softmax, shape<3, 4>>() < tol);  // over the last axis
}

TEST_CASE("gradcheck: flatten and reshape") {
  CHECK(gradcheck::check_layer<flatten, shape<3, 4>>() < tol);
  CHECK(gradcheck::check_layer<reshape<2, 6>, shape<3, 4>>() < tol);
}

TEST_CASE("gradcheck: losses") {
  rng g(5);
  constexpr std::size_t N = 4, B = 3;
  std::vector<double> logits(N * B), probs(N * B), targets(N * B);
  for (auto& v : logits) v = g.uniform(-3, 3);
  for (std::size_t i = 0; i < B; ++i) {
    double s = 0;
    for (std::size_t j = 0; j < N; ++j) s += probs[i * N + j] = g.uniform(0.05, 1.0);
    for (std::size_t j = 0; j < N; ++j) probs[i * N + j] /= s * 1.1;  // not normalised on purpose
    double ts = 0;
    for (std::size_t j = 0; j < N; ++j) ts += targets[i * N + j] = g.uniform(0, 1);
    for (std::size_t j = 0; j < N; ++j) targets[i * N + j] /= ts;
  }
  const std::vector<std::int32_t> labels{2, 0, 3};
  CHECK(gradcheck::check_loss<N>(sparse_categorical_crossentropy{.from_logits = true}, logits, labels, B) < tol);
  CHECK(gradcheck::check_loss<N>(sparse_categorical_crossentropy{.from_logits = false}, probs, labels, B) < tol);
  CHECK(gradcheck::check_loss<N>(categorical_crossentropy{.from_logits = true}, logits, targets, B) < tol);
  CHECK(gradcheck::check_loss<N>(categorical_crossentropy{.from_logits = false}, probs, targets, B) < tol);
  CHECK(gradcheck::check_loss<N>(mean_squared_error{}, logits, targets, B) < tol);
}

TEST_CASE("gradcheck: binary_crossentropy, huber and kl_divergence (issue 29)") {
  rng g(9);
  constexpr std::size_t N = 5, B = 3;
  std::vector<double> logits(N * B), probs(N * B), targets(N * B), soft(N * B), wide(N * B);
  for (auto& v : logits) v = g.uniform(-4, 4);
  for (auto& v : probs) v = g.uniform(0.02, 0.98);  // inside the clip range: a smooth loss
  for (auto& v : targets) v = g.uniform(0, 1);
  for (auto& v : wide) v = g.uniform(-3, 3);
  for (std::size_t i = 0; i < B; ++i) {
    double s = 0;
    for (std::size_t j = 0; j < N; ++j) s += soft[i * N + j] = g.uniform(0.05, 1);
    for (std::size_t j = 0; j < N; ++j) soft[i * N + j] /= s;
  }
  CHECK(gradcheck::check_loss<N>(binary_crossentropy{.from_logits = true}, logits, targets, B) < tol);
  CHECK(gradcheck::check_loss<N>(binary_crossentropy{.from_logits = false}, probs, targets, B) < tol);
  // Huber on both sides of delta (|e| up to 7 against delta 0.5, 1 and 2; none at the kink)
  for (const double delta : {0.5, 1.0, 2.0}) {
    std::vector<double> y = wide;
    for (std::size_t i = 0; i < y.size(); ++i)
      if (std::abs(std::abs(y[i] - targets[i]) - delta) < 1e-3) y[i] += 0.01;
    CHECK(gradcheck::check_loss<N>(huber{.delta = delta}, y, targets, B) < tol);
  }
  CHECK(gradcheck::check_loss<N>(kl_divergence{}, probs, soft, B) < tol);
}

TEST_CASE("gradcheck: layer_normalization (issue 29)") {
  CHECK(gradcheck::check_layer<layer_normalization<>, shape<6>>() < tol);
  CHECK(gradcheck::check_layer<layer_normalization<1e-5>, shape<3, 4>>() < tol);
  CHECK(gradcheck::check_layer<layer_normalization<>, shape<2, 2, 3>>({.batch = 4}) < tol);
}

TEST_CASE("gradcheck: the l2 penalty") {
  CHECK(gradcheck::check_penalty<dense<4, identity, l2<0.01f>>, shape<3>>() < tol);
}
