// named_schedule.hpp: a callable of the step, named, is a Schedule an optimizer and warmup take; a
// callable without name() is not one (an optimizer refuses it at compile time:
// tests/compile_fail/optimizer_schedule_without_name.cpp).
#include <doctest/doctest.h>

#include <ctnn/core/concepts.hpp>
#include <ctnn/optimizers/adam.hpp>
#include <ctnn/optimizers/sgd.hpp>
#include <ctnn/schedules/named_schedule.hpp>
#include <ctnn/schedules/warmup.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

using namespace ctnn;

namespace {
auto halving = [](std::int64_t step) { return 0.01 / double(std::int64_t(1) << (step / 10)); };
using halving_t = decltype(halving);
}  // namespace

static_assert(!Schedule<halving_t> && !has_schedule_name<halving_t>);
static_assert(Schedule<named_schedule<halving_t>> && Optimizer<adam<named_schedule<halving_t>>>);
static_assert(std::is_same_v<decltype(adam{named_schedule{"halving", halving}}), adam<named_schedule<halving_t>>>);

TEST_CASE("named_schedule: the callable's rate at every step, the given name, an empty name refused") {
  const named_schedule s{"halving every 10 steps", halving};
  CHECK(s(0) == 0.01);
  CHECK(s(9) == 0.01);
  CHECK(s(10) == 0.005);
  CHECK(s(35) == 0.00125);
  CHECK(s.name() == "halving every 10 steps");
  CHECK_THROWS_WITH_AS(named_schedule("", halving), "named_schedule: the name must not be empty", std::invalid_argument);
  // a callable returning float, captured state
  const float base = 0.5f;
  const named_schedule f{std::string("captured"), [base](std::int64_t step) { return base / float(step + 1); }};
  CHECK(f(1) == 0.25);
  CHECK(f.name() == "captured");
}

TEST_CASE("named_schedule: an optimizer's learning rate and warmup's name read it") {
  const adam opt{named_schedule{"halving", halving}};
  CHECK(opt.learning_rate(0) == 0.01);
  CHECK(opt.learning_rate(20) == 0.0025);
  CHECK(opt.schedule.name() == "halving");
  const sgd plain{named_schedule{"constant", [](std::int64_t) { return 0.1; }}};
  CHECK(plain.learning_rate(1000) == 0.1);
  const warmup w{0.0, 10, named_schedule{"halving", halving}};
  CHECK(w(5) == doctest::Approx(0.005));
  CHECK(w(20) == 0.005);
  CHECK(w.name() == "warmup(0 over 10 steps, then halving)");
}
