// simple_rnn, lstm and gru (with masking and dropout), embedding (mask_zero), bidirectional and time_distributed, on the simulated device (simulated_device.hpp): every
// access of the recurrent layers to the model's memory goes through ops<B> (the
// arena faults on a host access), and training, evaluation and prediction give
// cpu<>'s bits.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/layers/bidirectional.hpp>
#include <ctnn/layers/embedding.hpp>
#include <ctnn/layers/gru.hpp>
#include <ctnn/layers/lstm.hpp>
#include <ctnn/layers/simple_rnn.hpp>
#include <ctnn/layers/time_distributed.hpp>

#include <stdexcept>
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
}  // namespace

TEST_CASE("masking, simple_rnn, lstm and gru (with dropout) train on the simulated device with cpu<>'s bits") {
  using net = sequential<input<5, 3>, masking<>,
                         simple_rnn<6, ctnn::tanh, recurrent_options{.return_sequences = true, .dropout = 0.2}>,
                         lstm<7, recurrent_options{.return_sequences = true, .go_backwards = true, .recurrent_dropout = 0.3}>,
                         gru<4>, dense<2>>;
  std::vector<float> x(48 * 15);
  std::vector<std::int32_t> y(48);
  rng g(4);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < 48; i += 3)  // padded (masked) steps: the last one or two
    for (std::size_t j = i % 2 ? 9 : 12; j < 15; ++j) x[i * 15 + j] = 0.0f;
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[i * 15 + 14] > 0 ? 1 : 0;
  const data::in_memory<shape<5, 3>, sparse_labels> train{x, y};
  const sparse_categorical_crossentropy loss{.from_logits = true};
  auto d = make_model<net, float, sim::device>(21);
  auto c = make_model<net>(21);
  rmsprop o1{1e-2}, o2{1e-2};
  const auto hd = fit(d, loss, o1, train.batch(16), epochs{3});
  const auto hc = fit(c, loss, o2, train.batch(16), epochs{3});
  CHECK(hd["loss"] == hc["loss"]);
  CHECK(hd["loss"].back() < hd["loss"].front());
  CHECK(variable_bytes(d) == variable_bytes(c));
  CHECK(evaluate(d, loss, train.batch(16))["loss"] == evaluate(c, loss, train.batch(16))["loss"]);
  CHECK(predict(d, train.batch(16)) == predict(c, train.batch(16)));
}

TEST_CASE("embedding<..., mask_zero> into lstm trains on the simulated device with cpu<>'s bits") {
  using net = sequential<input<6>, embedding<7, 3, true>, lstm<4>, dense<2>>;
  std::vector<float> x(32 * 6);
  std::vector<std::int32_t> y(32);
  rng g(6);
  for (std::size_t i = 0; i < 32; ++i) {
    const std::size_t len = 2 + i % 5;  // then id 0: padding, masked
    for (std::size_t t = 0; t < len; ++t) x[i * 6 + t] = float(1 + std::size_t(g.uniform() * 6));
    y[i] = x[i * 6] > 3 ? 1 : 0;
  }
  const data::in_memory<shape<6>, sparse_labels> train{x, y};
  const sparse_categorical_crossentropy loss{.from_logits = true};
  auto d = make_model<net, float, sim::device>(8);
  auto c = make_model<net>(8);
  adam o1{1e-2}, o2{1e-2};
  const auto hd = fit(d, loss, o1, train.batch(8), epochs{2});
  const auto hc = fit(c, loss, o2, train.batch(8), epochs{2});
  CHECK(hd["loss"] == hc["loss"]);
  CHECK(variable_bytes(d) == variable_bytes(c));
  CHECK(predict(d, train.batch(8)) == predict(c, train.batch(8)));
}

TEST_CASE("bidirectional and time_distributed<dense> train on the simulated device with cpu<>'s bits") {
  using net = sequential<input<5, 3>, masking<>, time_distributed<dense<4, ctnn::tanh>>,
                         bidirectional<lstm<3, recurrent_options{.return_sequences = true, .dropout = 0.2}>, merge::sum>,
                         bidirectional<gru<3>>, dense<2>>;
  std::vector<float> x(32 * 15);
  std::vector<std::int32_t> y(32);
  rng g(9);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < 32; i += 2)  // padded (masked) last steps
    for (std::size_t j = 12; j < 15; ++j) x[i * 15 + j] = 0.0f;
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[i * 15] > 0 ? 1 : 0;
  const data::in_memory<shape<5, 3>, sparse_labels> train{x, y};
  const sparse_categorical_crossentropy loss{.from_logits = true};
  auto d = make_model<net, float, sim::device>(5);
  auto c = make_model<net>(5);
  rmsprop o1{1e-2}, o2{1e-2};
  const auto hd = fit(d, loss, o1, train.batch(8), epochs{2});
  const auto hc = fit(c, loss, o2, train.batch(8), epochs{2});
  CHECK(hd["loss"] == hc["loss"]);
  CHECK(variable_bytes(d) == variable_bytes(c));
  CHECK(predict(d, train.batch(8)) == predict(c, train.batch(8)));
  // a per-step class loss reads its rows on the host: on a device backend it says so
  using tagger = sequential<input<5, 3>, lstm<3, return_sequences>, time_distributed<dense<2>>>;
  auto t = make_model<tagger, float, sim::device>(5);
  const data::in_memory<shape<5, 3>, step_labels<5>> steps{x, std::vector<std::int32_t>(32 * 5, 1)};
  rmsprop o3{1e-2};
  CHECK_THROWS_AS(fit(t, loss, o3, steps.batch(8), epochs{1}), std::logic_error);
}
