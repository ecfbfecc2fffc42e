// base.hpp (optimizer_base) and the slot counts: an optimizer object says how many slot arrays
// it uses (Adam 3 only with amsgrad, RMSprop 3 only when centered), the model
// reserves exactly that many (plan bytes), with_options adds its two after the
// optimizer's own, and switching to an optimizer with other slots re-initialises
// them; results do not depend on the extra slot's absence.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/optimizers/base.hpp>
#include <ctnn/optimizers/options.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

using namespace ctnn;

namespace {
using net = sequential<input<3>, dense<4, ctnn::tanh>, dense<1>>;
using data_t = data::in_memory<shape<3>, dense_targets<shape<1>>>;
data_t make_data() {
  std::vector<float> x, y;
  for (int i = 0; i < 16; ++i) {
    const float a = float(i % 4) * 0.25f, b = float(i / 4) * 0.25f, c = float(i % 3) * 0.5f;
    x.insert(x.end(), {a, b, c});
    y.push_back(a - 2 * b + c);
  }
  return data_t(std::move(x), std::move(y));
}

// Trains a fresh model for 2 epochs; returns it.
template <class O>
auto trained(O opt) {
  auto m = make_model<net>(3);
  fit(m, mean_squared_error{}, opt, make_data().batch(8), epochs{2});
  return m;
}
}  // namespace

static_assert(adam<>::max_slots_per_parameter == 3 && rmsprop<>::max_slots_per_parameter == 3);
static_assert(sgd<>::max_slots_per_parameter == 1 && adagrad<>::max_slots_per_parameter == 1);
static_assert(with_options<adam<>>::max_slots_per_parameter == 5);
static_assert(Optimizer<adam<>> && Optimizer<rmsprop<>> && Optimizer<sgd<>> && Optimizer<adagrad<>>);

TEST_CASE("slots_per_parameter: Adam reserves v_hat only with amsgrad, RMSprop the average only when centered") {
  CHECK(adam{}.slots_per_parameter() == 2);
  CHECK(adam{1e-3, 0.9, 0.999, 1e-7, true}.slots_per_parameter() == 3);
  CHECK(rmsprop{}.slots_per_parameter() == 2);
  CHECK(rmsprop{1e-3, 0.9, 0.5}.slots_per_parameter() == 2);
  CHECK(rmsprop{1e-3, 0.9, 0.0, 1e-7, true}.slots_per_parameter() == 3);
  CHECK(sgd{}.slots_per_parameter() == 1);
  CHECK(adagrad{}.slots_per_parameter() == 1);
  const with_options w{adam{1e-3, 0.9, 0.999, 1e-7, true}, optimizer_options{.use_ema = true}};
  CHECK(w.inner_slots() == 3);
  CHECK(w.slots_per_parameter() == 5);
  CHECK(with_options{adam{}, optimizer_options{}}.slots_per_parameter() == 4);
}

TEST_CASE("the model's plan holds exactly the optimizer object's slots (bytes with and without amsgrad/centered)") {
  const std::size_t n = net::parameter_count;
  auto bytes = [](const auto& m) { return m.layout().bytes(role::optimizer_slot); };
  auto plain = trained(adam{1e-2});
  auto ams = trained(adam{1e-2, 0.9, 0.999, 1e-7, true});
  auto rms = trained(rmsprop{1e-2});
  auto centered = trained(rmsprop{1e-2, 0.9, 0.0, 1e-7, true});
  CHECK(plain.optimizer_slots().size() >= 2 * n);
  CHECK(plain.layout().total == net::plan<float>::layout(plain.batch_capacity(), 2).total);
  CHECK(ams.layout().total == net::plan<float>::layout(ams.batch_capacity(), 3).total);
  CHECK(rms.layout().total == net::plan<float>::layout(rms.batch_capacity(), 2).total);
  CHECK(centered.layout().total == net::plan<float>::layout(centered.batch_capacity(), 3).total);
  CHECK(bytes(ams) > bytes(plain));
  CHECK(bytes(centered) == bytes(ams));
  CHECK(bytes(rms) == bytes(plain));
  CHECK(plain.memory_bytes() == plain.layout().total);
  CHECK(ams.memory_bytes() - plain.memory_bytes() == bytes(ams) - bytes(plain));
  // memory_plan with the object's count is the model's plan
  CHECK(net::memory_plan(plain.batch_capacity(), adam{}.slots_per_parameter()).total == plain.layout().total);
}

TEST_CASE("the same network trained with amsgrad off gives Adam's result whatever slots another run had") {
  // a model first trained with amsgrad (3 slots), then with plain Adam: the slots are
  // re-made (2, zeroed) and the second fit equals a fresh model's second fit
  auto a = make_model<net>(3);
  auto b = make_model<net>(3);
  adam ams_a{1e-2, 0.9, 0.999, 1e-7, true}, ams_b{1e-2, 0.9, 0.999, 1e-7, true};
  fit(a, mean_squared_error{}, ams_a, make_data().batch(8), epochs{1});
  fit(b, mean_squared_error{}, ams_b, make_data().batch(8), epochs{1});
  CHECK(a.layout().bytes(role::optimizer_slot) > 0);
  const auto slots3 = a.layout().bytes(role::optimizer_slot);
  adam plain{1e-2};
  const auto h = fit(a, mean_squared_error{}, plain, make_data().batch(8), epochs{2});
  CHECK(a.layout().bytes(role::optimizer_slot) < slots3);
  CHECK(a.optimizer_iterations() == 4);  // the count restarted with the new slots
  // b: the same weights, plain Adam from fresh slots through a model that never had 3
  auto c = make_model<net>(3);
  std::vector<float> wb(b.parameters().begin(), b.parameters().end());
  std::copy(wb.begin(), wb.end(), c.parameters().begin());
  adam plain_c{1e-2};
  const auto hc = fit(c, mean_squared_error{}, plain_c, make_data().batch(8), epochs{2});
  CHECK(h["loss"] == hc["loss"]);
  CHECK(std::vector<float>(a.parameters().begin(), a.parameters().end()) ==
        std::vector<float>(c.parameters().begin(), c.parameters().end()));
}
