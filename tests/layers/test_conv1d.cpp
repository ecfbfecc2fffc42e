// layers/conv1d.hpp: output lengths as Keras' Conv1D (valid and same, strides),
// the kernel's [K, C, F] layout, forward against a direct reference written
// here, in a network. (Gradients by finite differences:
// tests/gradcheck/test_gradcheck_conv_layers.cpp.)
#include <doctest/doctest.h>

#include <ctnn/layers/conv1d.hpp>

#include <ctnn/ctnn.hpp>  // sequential, make_model, fit

#include <cmath>
#include <filesystem>
#include <sstream>
#include <vector>

using namespace ctnn;

template <class Spec, class In>
using bound = typename Spec::template bind<In, float, cpu<>>;

static_assert(std::is_same_v<bound<conv1d<4, 3>, shape<10, 2>>::out_shape, shape<8, 4>>);                 // (10 - 3) / 1 + 1
static_assert(std::is_same_v<bound<conv1d<4, 3, 2>, shape<10, 2>>::out_shape, shape<4, 4>>);              // (10 - 3) / 2 + 1
static_assert(std::is_same_v<bound<conv1d<4, 3, 2, padding::same>, shape<10, 2>>::out_shape, shape<5, 4>>);  // ceil(10 / 2)
static_assert(std::is_same_v<bound<conv1d<4, 4, 3, padding::same>, shape<10, 2>>::out_shape, shape<4, 4>>);  // ceil(10 / 3)
static_assert(bound<conv1d<4, 3>, shape<10, 2>>::parameter_count == 3 * 2 * 4 + 4);

namespace {
// y[o, f] = b[f] + sum_k,c x[o S + k - pad, c] W[k, c, f] (positions outside the input are 0)
template <std::size_t L, std::size_t C, std::size_t F, std::size_t K, std::size_t S, std::size_t OL>
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& p, std::size_t pad) {
  std::vector<double> y(OL * F);
  for (std::size_t o = 0; o < OL; ++o)
    for (std::size_t f = 0; f < F; ++f) {
      double s = p[K * C * F + f];
      for (std::size_t k = 0; k < K; ++k) {
        const std::size_t at = o * S + k;
        if (at < pad || at - pad >= L) continue;
        for (std::size_t c = 0; c < C; ++c) s += double(x[(at - pad) * C + c]) * double(p[(k * C + c) * F + f]);
      }
      y[o * F + f] = s;
    }
  return y;
}

template <class Spec, std::size_t L, std::size_t C>
void check_against_reference(std::size_t pad) {
  using Lr = bound<Spec, shape<L, C>>;
  constexpr std::size_t F = Spec::filters, K = Spec::kernel_width, OL = Lr::out_shape::dims[0];
  INFO(Spec::name());
  rng g(7);
  std::vector<float> x(L * C), p(Lr::parameter_count), y(OL * F), cache(Lr::cache_per_sample);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (auto& v : p) v = float(g.uniform(-1, 1));
  layer_slot<float> s;
  s.params = p.data();
  s.cache = cache.data();
  Lr::forward(s, x.data(), y.data(), run_info{1, false, nullptr});
  const auto want = reference<L, C, F, K, Spec::stride, OL>(x, p, pad);
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(double(y[i]) == doctest::Approx(want[i]).epsilon(1e-5));
}
}  // namespace

TEST_CASE("conv1d: forward against a direct reference, valid and same, strides 1 to 3") {
  check_against_reference<conv1d<4, 3>, 10, 2>(0);
  check_against_reference<conv1d<5, 3, 2>, 11, 3>(0);
  check_against_reference<conv1d<3, 3, 1, padding::same>, 7, 2>(1);   // pad_total 2: 1 before
  check_against_reference<conv1d<2, 4, 3, padding::same>, 10, 1>(1);  // out 4, need 3*3+4-10 = 3: 1 before
  CHECK(conv1d<4, 3, 2, padding::same, relu>::name() == "conv1d<4, 3, 2, same, relu>");
}

TEST_CASE("conv1d in a network over sequences: shapes, the kernel's shape in the plan, training") {
  using net = sequential<input<16, 3>, conv1d<8, 3, 2, padding::same, relu>, flatten, dense<2>>;
  static_assert(net::output_shape == shape<2>{});
  static_assert(net::parameter_count == (3 * 3 * 8 + 8) + (8 * 8 * 2 + 2));  // 16 steps, stride 2, same: 8
  auto m = make_model<net>(3);
  std::vector<float> x(32 * 48);
  std::vector<std::int32_t> l(32);
  rng g(4);
  for (std::size_t i = 0; i < l.size(); ++i) {
    l[i] = std::int32_t(i % 2);
    for (std::size_t j = 0; j < 48; ++j) x[i * 48 + j] = float(std::sin(double(j / 3) * (l[i] ? 0.9 : 0.3))) + float(g.uniform(-0.2, 0.2));
  }
  adam opt{0.01};
  const auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt,
                     data::in_memory<shape<16, 3>, sparse_labels>(x, l).batch(8), epochs{10});
  CHECK(h["loss"].back() < h["loss"].front());
  // a weights file round trip: the kernel is written as [3, 3, 8]
  const auto path = std::filesystem::temp_directory_path() / "ctnn_test_conv1d.weights";
  io::save_weights(m, path);
  auto back = make_model<net>(99);
  io::load_weights(back, path);
  std::filesystem::remove(path);
  CHECK(back.predict(x.data(), 32) == m.predict(x.data(), 32));
  std::ostringstream out;
  summary<net>(out);
  CHECK(out.str().find("conv1d<8, 3, 2, same, relu>") != std::string::npos);
  CHECK(out.str().find("(None, 8, 8)") != std::string::npos);
}
