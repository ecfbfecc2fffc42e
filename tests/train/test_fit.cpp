// fit.hpp, fit_loop.hpp, callbacks.hpp, history.hpp: learning, determinism, hooks, errors.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/train/fit_loop.hpp>

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace ctnn;

namespace {
using xor_net = sequential<input<2>, dense<8, ctnn::tanh>, dense<2>>;
using xor_data = data::in_memory<shape<2>, sparse_labels>;

xor_data make_xor() {
  return xor_data({0, 0, 0, 1, 1, 0, 1, 1}, {0, 1, 1, 0});
}

struct hook_recorder {
  std::vector<std::string> calls;
  template <class C>
  void on_train_begin(C&) { calls.push_back("train_begin"); }
  template <class C>
  void on_epoch_begin(C& c) { calls.push_back("epoch_begin " + std::to_string(c.epoch)); }
  template <class C>
  void on_batch_end(C& c) { calls.push_back("batch_end " + std::to_string(c.step)); }
  template <class C>
  void on_epoch_end(C& c) {
    calls.push_back("epoch_end " + std::to_string(c.epoch) + (c.epoch_logs.contains("loss") ? " loss" : ""));
  }
  template <class C>
  void on_train_end(C&) { calls.push_back("train_end"); }
};

struct stop_after_epoch {
  std::size_t at;
  template <class C>
  void on_epoch_end(C& c) {
    if (c.epoch == at) c.stop_training = true;
  }
};
}  // namespace

TEST_CASE("end to end: a small network learns XOR") {
  auto m = make_model<xor_net>(7);
  adam opt{0.05};
  const auto ds = make_xor().batch(4);
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, ds, epochs{300},
               sparse_categorical_accuracy{});
  CHECK(h["loss"].back() < 0.05);
  CHECK(h["sparse_categorical_accuracy"].back() == 1.0);
  CHECK(h.epochs() == 300);
  const auto r = evaluate(m, sparse_categorical_crossentropy{.from_logits = true}, ds, accuracy{});
  CHECK(r["accuracy"] == 1.0);
  CHECK(m.optimizer_iterations() == 300);
}

TEST_CASE("end to end: regression with mean squared error and l2") {
  using net = sequential<input<1>, dense<16, ctnn::tanh, l2<1e-5f>>, dense<1>>;
  std::vector<float> x, y;
  for (int i = 0; i < 64; ++i) {
    const float v = -1 + 2 * float(i) / 63;
    x.push_back(v);
    y.push_back(v * v);
  }
  const data::in_memory<shape<1>, dense_targets<shape<1>>> ds(x, y);
  auto m = make_model<net>(1);
  rmsprop opt{0.01};
  auto h = fit(m, mean_squared_error{}, opt, ds.batch(16).shuffle(3), epochs{200}, mean_absolute_error{});
  CHECK(h["loss"].back() < 0.01);
  CHECK(h["mean_absolute_error"].back() < 0.08);
}

TEST_CASE("the same seeds give bit-identical weights after training") {
  auto train_once = [] {
    auto m = make_model<xor_net>(11);
    sgd opt{0.1, 0.9, true};
    fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, make_xor().batch(3).shuffle(5), epochs{20});
    return std::vector<float>(m.parameters().begin(), m.parameters().end());
  };
  CHECK(train_once() == train_once());
}

TEST_CASE("shuffling draws a new order every epoch, the same for the same seed") {
  std::vector<float> x(10);
  std::vector<std::int32_t> y(10);
  for (int i = 0; i < 10; ++i) x[i] = float(i), y[i] = i;
  const auto ds = data::in_memory<shape<1>, sparse_labels>(x, y).batch(10).shuffle(1);
  auto order = [&](std::size_t epoch) {
    data::batch_for<decltype(ds)> b;
    auto c = ds.open(epoch);
    c.next(b);
    return b.y;
  };
  CHECK(order(0) == order(0));
  CHECK(order(0) != order(1));
}

TEST_CASE("validation data adds val_ keys, timing and input share are logged") {
  auto m = make_model<xor_net>(7);
  adam opt;
  const auto ds = make_xor().batch(2);
  std::ostringstream out;
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, ds, epochs{2}, accuracy{},
               validation_data(ds), epoch_logger{out});
  for (const char* k : {"loss", "accuracy", "val_loss", "val_accuracy", "learning_rate", "seconds", "data_seconds",
                        "compute_seconds", "input_share"})
    CHECK(h.contains(k));
  CHECK(h["input_share"][0] >= 0.0);
  CHECK(h["input_share"][0] <= 1.0);
  CHECK(out.str().find("epoch 2/2  ") != std::string::npos);
  CHECK(out.str().find("  loss: ") != std::string::npos);
  CHECK_THROWS_WITH_AS(h["nope"], doctest::Contains("history: no key 'nope'"), std::out_of_range);
}

TEST_CASE("a validation batch larger than the training batch moves the arena, training carries on") {
  auto m = make_model<xor_net>(7);
  adam opt{0.05};
  std::vector<float> x;
  std::vector<std::int32_t> y;
  for (int i = 0; i < 64; ++i) {
    x.insert(x.end(), {float(i % 2), float((i / 2) % 2)});
    y.push_back((i % 2) ^ ((i / 2) % 2));
  }
  const data::in_memory<shape<2>, sparse_labels> big(x, y);
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, make_xor().batch(4), epochs{200},
               accuracy{}, validation_data(big.batch(64)));
  CHECK(m.batch_capacity() == 64);
  CHECK(h["val_accuracy"].back() == 1.0);
  CHECK(h["loss"].back() < 0.05);
}

TEST_CASE("callbacks: hooks are called in order, stop_training ends early") {
  auto m = make_model<xor_net>(7);
  adam opt;
  hook_recorder rec;
  stop_after_epoch stop{1};
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, make_xor().batch(2), epochs{5}, rec, stop);
  CHECK(h.epochs() == 2);
  const std::vector<std::string> want{"train_begin", "epoch_begin 0", "batch_end 0", "batch_end 1", "epoch_end 0 loss",
                                      "epoch_begin 1", "batch_end 0", "batch_end 1", "epoch_end 1 loss", "train_end"};
  CHECK(rec.calls == want);
}

// The loop (train/fit_loop.hpp) around the network's code: running_logs during an epoch only, and a
// callback's exception told to the extras' on_failure once, then rethrown.
namespace {
struct fails_at_batch {
  std::size_t at;
  std::vector<std::string> seen;
  template <class C>
  void on_batch_end(C& c) {
    REQUIRE(c.running_logs);
    const logs r = c.running_logs();
    seen.push_back(std::to_string(c.epoch) + ":" + std::to_string(c.step) + (r.contains("loss") ? " loss" : "") +
                   (r.contains("accuracy") ? " accuracy" : ""));
    if (c.epoch * 2 + c.step == at) throw std::runtime_error("callback failed");
  }
  template <class C>
  void on_epoch_end(C& c) {
    seen.push_back(c.running_logs ? "running_logs set" : "epoch_end");
  }
  void on_failure(const std::string& what) { seen.push_back("failure: " + what); }
};
}  // namespace

TEST_CASE("fit's loop: running_logs during an epoch, a callback's exception reaches on_failure and is rethrown") {
  auto m = make_model<xor_net>(7);
  adam opt;
  fails_at_batch cb{3, {}};
  CHECK_THROWS_WITH_AS(fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, make_xor().batch(2), epochs{3},
                           accuracy{}, cb),
                       "callback failed", std::runtime_error);
  const std::vector<std::string> want{"0:0 loss accuracy", "0:1 loss accuracy", "epoch_end", "1:0 loss accuracy",
                                      "1:1 loss accuracy", "failure: callback failed"};
  CHECK(cb.seen == want);
}

TEST_CASE("a NaN loss throws, naming epoch and step") {
  using net = sequential<input<1>, dense<1>>;
  const data::in_memory<shape<1>, dense_targets<shape<1>>> ds({1, std::numeric_limits<float>::quiet_NaN()}, {1, 1});
  auto m = make_model<net>(1);
  sgd opt;
  CHECK_THROWS_WITH_AS(fit(m, mean_squared_error{}, opt, ds.batch(1), epochs{1}),
                       doctest::Contains("fit: the loss became NaN at epoch 1, step 2"), numeric_error);
}

TEST_CASE("bad run-time arguments are refused") {
  CHECK_THROWS_AS(epochs{0}, std::invalid_argument);
  CHECK_THROWS_AS(make_xor().batch(0), std::invalid_argument);
  CHECK_THROWS_WITH_AS((data::in_memory<shape<2>, sparse_labels>({1, 2, 3}, {0})),
                       doctest::Contains("not a whole number of samples of shape 2"), std::invalid_argument);
  CHECK_THROWS_WITH_AS((data::in_memory<shape<2>, sparse_labels>({1, 2, 3, 4}, {0})),
                       "in_memory: 2 samples but 1 target values (expected 2)", std::invalid_argument);
}
