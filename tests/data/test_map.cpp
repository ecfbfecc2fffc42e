// map.hpp, stage.hpp: parallel map order, errors naming the element, and stopping early.
#include <doctest/doctest.h>

#include <ctnn/data/map.hpp>
#include <ctnn/data/pipeline.hpp>
#include <ctnn/data/stage.hpp>
#include <ctnn/ctnn.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace ctnn;
using S1 = data::sample<shape<1>>;

namespace {
// 0, 1, ..., n - 1.
std::vector<int> iota_labels(std::size_t n) {
  std::vector<int> y(n);
  std::iota(y.begin(), y.end(), 0);
  return y;
}
// n samples, sample i with x = i and label i: a source for map stages driven directly.
data::stage_ptr<S1> counting_stage(std::size_t n) {
  std::vector<float> x(n);
  std::iota(x.begin(), x.end(), 0.f);
  return std::make_shared<data::tensors_stage<shape<1>, sparse_labels, float>>(std::move(x), iota_labels(n));
}
data::dataset<S1> numbers(std::size_t n) { return data::dataset<S1>(counting_stage(n)); }
std::vector<int> labels(const data::dataset<S1>& d) {
  std::vector<int> out;
  auto c = d.open(0);
  S1 s;
  while (c.next(s)) out.push_back(s.y[0]);
  return out;
}
// A map whose cost varies per element, so workers finish out of order.
struct jittery {
  std::atomic<int>* in_flight;
  S1 operator()(S1 s) const {
    ++*in_flight;
    volatile double acc = 0;
    for (int i = 0; i < (s.y[0] % 4) * 2000; ++i) acc = acc + i;
    s.x[0] = s.x[0] * 2 + 1;
    --*in_flight;
    return s;
  }
};
}  // namespace

TEST_CASE("map: parallel workers preserve the input order by default") {
  std::atomic<int> in_flight{0};
  const auto serial = labels(numbers(200).map(jittery{&in_flight}));
  CHECK(serial == labels(numbers(200)));
  for (std::size_t p : {2, 3, 8}) CHECK(labels(numbers(200).map(jittery{&in_flight}, p)) == serial);
  auto c = numbers(10).map(jittery{&in_flight}, 3).open(0);
  S1 s;
  for (int i = 0; i < 10; ++i) {
    REQUIRE(c.next(s));
    CHECK(s.x[0] == float(2 * i + 1));
  }
  CHECK_FALSE(c.next(s));
  CHECK_THROWS_WITH_AS(numbers(3).map(jittery{&in_flight}, 0), doctest::Contains("map: parallelism must be >= 1"),
                       std::invalid_argument);
}

TEST_CASE("map: order::any delivers every element exactly once") {
  std::atomic<int> in_flight{0};
  auto got = labels(numbers(300).map(jittery{&in_flight}, 4, data::order::any));
  std::sort(got.begin(), got.end());
  CHECK(got == labels(numbers(300)));
}

TEST_CASE("map: an exception in f reaches the consumer naming the element, after the elements before it") {
  auto f = [](S1 s) {
    if (s.y[0] == 7) throw std::domain_error("bad pixel");
    return s;
  };
  for (std::size_t p : {1, 2, 4}) {
    CAPTURE(p);
    auto c = numbers(20).map(f, p).open(3);
    S1 s;
    for (int i = 0; i < 7; ++i) {
      REQUIRE(c.next(s));
      CHECK(s.y[0] == i);
    }
    try {
      c.next(s);
      FAIL("no exception");
    } catch (const data::pipeline_error& e) {
      CHECK(std::string(e.what()) == "map: the function threw on element 7 of pass 3: bad pixel");
      CHECK_THROWS_AS(std::rethrow_if_nested(e), std::domain_error);  // the original is nested
    }
  }
  // Unordered too names the element.
  CHECK_THROWS_WITH_AS(labels(numbers(50).map(f, 3, data::order::any)), doctest::Contains("element 7 of pass 0: bad pixel"),
                       data::pipeline_error);
}

TEST_CASE("map: an upstream exception is rethrown unchanged through workers and prefetch") {
  auto up = numbers(10).filter([](const S1& s) -> bool {
    if (s.y[0] == 5) throw std::out_of_range("upstream");
    return true;
  });
  for (std::size_t p : {2, 3}) {
    auto c = up.map([](S1 s) { return s; }, p).prefetch(2).open(0);
    S1 s;
    for (int i = 0; i < 5; ++i) REQUIRE(c.next(s));
    CHECK_THROWS_WITH_AS(c.next(s), doctest::Contains("filter: the function threw on element 5"), data::pipeline_error);
  }
}

TEST_CASE("map: stopping early joins every worker (break, destroyed cursor, endless upstream)") {
  std::atomic<int> in_flight{0};
  std::atomic<long> calls{0};
  auto f = [&](S1 s) {
    ++in_flight;
    ++calls;
    std::this_thread::yield();
    --in_flight;
    return s;
  };
  auto endless = numbers(13).repeat().map(f, 3).prefetch(4).map(f, 2, data::order::any).prefetch(2);
  for (int round = 0; round < 50; ++round) {
    auto c = endless.open(std::size_t(round));
    S1 s;
    for (int i = 0; i < round % 7; ++i) REQUIRE(c.next(s));
  }  // each cursor is destroyed with its workers mid-stream
  CHECK(in_flight == 0);
  const long after = calls;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(calls == after);  // no worker outlived its cursor
}

using net = sequential<input<1>, dense<2>>;
struct stop_after {
  std::size_t steps;
  template <class Ctx>
  void on_batch_end(Ctx& ctx) {
    if (ctx.step + 1 == steps) ctx.stop_training = true;
  }
};

TEST_CASE("map: fit stops early or throws with worker threads running, and returns cleanly") {
  auto train = numbers(400).repeat().map([](S1 s) {
    s.y[0] %= 2;
    s.x[0] = float(s.y[0]);
    return s;
  }, 3).batch(4).prefetch(3);
  auto m = make_model<net>(1);
  sgd opt;
  stop_after cb{5};
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, train, epochs{2}, cb);
  CHECK(m.optimizer_iterations() == 5);
  CHECK(h.epochs() == 1);

  auto failing = numbers(400).map([](S1 s) {
    if (s.y[0] == 37) throw std::runtime_error("corrupt image");
    s.y[0] %= 2;
    s.x[0] = float(s.y[0]);
    return s;
  }, 2).batch(4).prefetch(2);
  CHECK_THROWS_WITH_AS(fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, failing, epochs{1}),
                       doctest::Contains("map: the function threw on element 37 of pass 0: corrupt image"),
                       data::pipeline_error);
}

TEST_CASE("map: autotuned to 1 maps in the consumer's thread, on workers when raised, in order across the switches") {
  auto src = counting_stage(40);
  auto f = [](S1 s) {
    s.x[0] = float(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 1000003);
    return s;
  };
  data::map_stage<S1, S1, decltype(f)> m(src, f, data::autotune, data::order::preserved, 2);
  REQUIRE(m.tuned());
  auto it = m.open(data::open_context{0, nullptr});
  const float me = float(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 1000003);
  S1 s;
  std::vector<int> seen;
  for (int i = 0; i < 10; ++i) {  // value 1: here
    REQUIRE(it->next(s));
    CHECK(s.x[0] == me);
    seen.push_back(s.y[0]);
  }
  m.tuned()->value = 2;  // on the workers
  for (int i = 0; i < 10; ++i) {
    REQUIRE(it->next(s));
    CHECK(s.x[0] != me);
    seen.push_back(s.y[0]);
  }
  m.tuned()->value = 1;  // back here once the workers' results (at most 4 ahead) are delivered
  std::size_t here = 0;
  while (it->next(s)) {
    here += s.x[0] == me;
    seen.push_back(s.y[0]);
  }
  CHECK(here >= 20 - 4);
  CHECK(seen == iota_labels(40));
}

TEST_CASE("map: a knob switched between 1 and 2 while elements flow keeps every element, in order") {
  const int n = 3000;
  auto src = counting_stage(n);
  auto f = [](S1 s) { return s; };
  data::map_stage<S1, S1, decltype(f)> m(src, f, data::autotune, data::order::preserved, 2);
  auto it = m.open(data::open_context{0, nullptr});
  std::atomic<bool> done{false};
  std::thread flipper([&] {
    for (std::size_t i = 0; !done; ++i) {
      m.tuned()->value = 1 + i % 2;
      std::this_thread::yield();
    }
  });
  S1 s;
  std::vector<int> seen;
  while (it->next(s)) seen.push_back(s.y[0]);
  done = true;
  flipper.join();
  CHECK(seen == iota_labels(n));
}

TEST_CASE("map: a knob dropped to 1 while the consumer waits for the workers does not stall the pass") {
  const int n = 400;
  auto src = counting_stage(n);
  auto f = [](S1 s) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // the consumer waits on the workers
    return s;
  };
  data::map_stage<S1, S1, decltype(f)> m(src, f, data::autotune, data::order::preserved, 2);
  m.tuned()->value = 2;
  auto it = m.open(data::open_context{0, nullptr});
  S1 s;
  std::vector<int> seen;
  for (int i = 0; i < n; ++i) {
    if (i % 7 == 3) m.tuned()->value = 1 + (i / 7) % 2;  // down and up between two next() calls
    REQUIRE(it->next(s));
    seen.push_back(s.y[0]);
  }
  CHECK(!it->next(s));
  CHECK(seen == iota_labels(n));
}

TEST_CASE("map with a random source: same seed, any number of workers, any order: same output") {
  // "Augmentation": each sample gets noise drawn from its own generator.
  auto augment = [](S1 s, rng& g) {
    s.x[0] += float(g.uniform(-1.0, 1.0));
    return s;
  };
  auto run = [&](std::uint64_t seed, data::parallelism p, data::order o, std::size_t pass) {
    auto d = numbers(200).map(augment, data::random_seed{seed}, p, o);
    std::vector<std::pair<int, float>> out;  // (label, value)
    auto c = d.open(pass);
    S1 s;
    while (c.next(s)) out.emplace_back(s.y[0], s.x[0]);
    if (o == data::order::any) std::sort(out.begin(), out.end());
    return out;
  };
  const auto one = run(7, 1, data::order::preserved, 0);
  REQUIRE(one.size() == 200);
  CHECK(run(7, 2, data::order::preserved, 0) == one);
  CHECK(run(7, 4, data::order::preserved, 0) == one);
  CHECK(run(7, 3, data::order::any, 0) == one);  // sorted by label, which is the input order
  CHECK(run(7, data::autotune, data::order::preserved, 0) == one);
  CHECK(run(8, 1, data::order::preserved, 0) != one);  // another seed
  CHECK(run(7, 2, data::order::preserved, 1) != one);  // another pass
  CHECK(run(7, 4, data::order::preserved, 1) == run(7, 1, data::order::preserved, 1));
  // The noise is really there and within its range.
  for (const auto& [label, value] : one) CHECK(std::abs(value - float(label)) <= 1.0f);
  CHECK(std::any_of(one.begin(), one.end(), [](const auto& p) { return p.second != float(p.first); }));
}

TEST_CASE("map: a knob dropped to 1 by another thread while the consumer waits never strands the consumer") {
  // The consumer checks the knob, wakes the workers and waits; if the knob drops to 1 before a
  // worker reserves an element, no worker will make one: the first worker that sees it wakes the
  // consumer, which maps in its own thread. A flipper thread moves the knob at random moments
  // while the consumer waits on workers (f takes a few microseconds); every pass must end, with
  // every element in order.
  const int n = 2000;
  auto src = counting_stage(n);
  auto f = [](S1 s) {
    volatile double acc = 0;
    for (int i = 0; i < 2000; ++i) acc = acc + i;
    return s;
  };
  data::map_stage<S1, S1, decltype(f)> m(src, f, data::autotune, data::order::preserved, 2);
  std::atomic<bool> done{false};
  std::thread flipper([&] {
    std::uint64_t r = 88172645463325252ull;
    while (!done) {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      m.tuned()->value = 1 + r % 2;
      std::this_thread::sleep_for(std::chrono::microseconds(r % 50));
    }
  });
  const std::vector<int> all = iota_labels(n);
  for (std::size_t pass = 0; pass < 20; ++pass) {
    auto it = m.open(data::open_context{pass, nullptr});
    S1 s;
    std::vector<int> seen;
    while (it->next(s)) seen.push_back(s.y[0]);
    CHECK(seen == all);
  }
  done = true;
  flipper.join();
}
