// layers/residual.hpp, layers/branch.hpp, layers/add.hpp's sum_layer: y = f(x) + x as one layer
// of a sequential network: the output against f computed by a plain network with the same
// parameters, the projection's choice, the constexpr plan, the variables' names in weights
// files, the summary's nesting, penalties and a short training run.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/layers/residual.hpp>
#include <ctnn/train/summary.hpp>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

using namespace ctnn;

namespace {
using block_net = sequential<input<4>, residual<dense<4, relu>, dense<4>>, dense<2>>;
using plain_f = sequential<input<4>, dense<4, relu>, dense<4>>;
}  // namespace

// cache per sample: the branch's output of its first dense, two scratch rows (3 x 4 floats),
// then the residual's own: the block's output, dy's copy, a dx row (3 x 4 floats): 96 bytes;
// the dense after it has none. At batch 8: 768 bytes (a multiple of 64).
static_assert(block_net::plan<>::bytes(role::cache, 8) == 768);
static_assert(block_net::parameter_count == 2 * (4 * 4 + 4) + 4 * 2 + 2);
static_assert(sequential<input<6>, residual<dense<3, relu>>>::parameter_count == (6 * 3 + 3) + (6 * 3 + 3));  // + projection
static_assert(sequential<input<8, 8, 2>, residual<conv2d<4, 3, 3, 2, padding::same>>>::output_shape == shape<4, 4, 4>{});
static_assert(std::is_same_v<detail::projection_t<shape<8, 8, 2>, shape<4, 4, 4>>, conv2d<4, 1, 1, 2>>);
static_assert(std::is_same_v<detail::projection_t<shape<7, 7, 2>, shape<4, 4, 4>>, conv2d<4, 1, 1, 2>>);
static_assert(std::is_same_v<detail::projection_t<shape<6>, shape<3>>, dense<3>>);
static_assert(std::is_same_v<detail::projection_t<shape<8, 8, 2>, shape<3, 3, 4>>, conv2d<4, 1, 1, 3>>);
static_assert(std::is_same_v<detail::projection_t<shape<6>, shape<6>>, branch<>>);
static_assert(std::is_same_v<detail::projection_t<shape<8, 8, 2>, shape<6, 8, 4>>, detail::no_projection>);

TEST_CASE("residual: y = f(x) + x, f with the same parameters as a plain network") {
  auto m = make_model<block_net>(3);
  auto f = make_model<plain_f>(9);
  std::vector<float> res_params;
  m.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 0) res_params.insert(res_params.end(), (float*)v.data, (float*)v.data + v.extent);
  });
  std::size_t at = 0;
  f.for_each_variable([&](const variable_ref& v) {
    std::copy(res_params.begin() + at, res_params.begin() + at + v.extent, (float*)v.data);
    at += v.extent;
  });
  REQUIRE(at == res_params.size());
  std::vector<float> x(4 * 3);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i)) * 2;
  std::vector<float> fx(f.forward(x.data(), 3, false), f.forward(x.data(), 3, false) + 12);
  m.forward(x.data(), 3, false);
  // the final outputs: dense<2>(f(x) + x), that dense with m's parameters
  using head = sequential<input<4>, dense<2>>;
  auto h = make_model<head>(0);
  std::copy(m.template layer_parameters<1>().begin(), m.template layer_parameters<1>().end(), h.parameters().begin());
  std::vector<float> sum(12);
  for (std::size_t i = 0; i < 12; ++i) sum[i] = fx[i] + x[i];
  const float* want = h.forward(sum.data(), 3, false);
  const float* got = m.forward(x.data(), 3, false);
  for (std::size_t i = 0; i < 6; ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
}

TEST_CASE("residual: the block's variables are named by position, saved and loaded") {
  using net = sequential<input<6>, residual<dense<3, relu>>>;
  auto m = make_model<net>(1);
  std::vector<std::string> names;
  m.for_each_variable([&](const variable_ref& v) { names.push_back(std::string(v.name)); });
  CHECK(names == std::vector<std::string>{"0.0.kernel", "0.0.bias", "1.kernel", "1.bias"});
  const auto path = std::filesystem::temp_directory_path() / "ctnn_test_residual.weights";
  io::save_weights(m, path);
  auto n = make_model<net>(2);
  CHECK(n.parameters()[0] != m.parameters()[0]);
  io::load_weights(n, path);
  CHECK(std::equal(m.parameters().begin(), m.parameters().end(), n.parameters().begin()));
  std::filesystem::remove(path);
}

TEST_CASE("residual: summary shows the block and the projection under it") {
  using net = sequential<input<8, 8, 2>, residual<conv2d<4, 3, 3, 2, padding::same, relu>, conv2d<4, 3, 3, 1, padding::same>>,
                         global_average_pool, dense<3>>;
  std::ostringstream out;
  summary<net>(out);
  const std::string s = out.str();
  CHECK(s.find("\nresidual ") != std::string::npos);
  CHECK(s.find("\n  branch ") != std::string::npos);
  CHECK(s.find("\n    conv2d<4, 3, 3, 2, same, relu> ") != std::string::npos);
  CHECK(s.find("\n  conv2d<4, 1, 1, 2, valid> ") != std::string::npos);  // the projection
  CHECK(s.find("Total params: " + std::to_string(net::parameter_count)) != std::string::npos);
}

TEST_CASE("residual: a block's regularizer adds its penalty, nested residuals train") {
  using reg = sequential<input<3>, residual<dense<3, ctnn::tanh, l2<0.5f>>>>;
  auto m = make_model<reg>(1);
  double sq = 0;
  m.for_each_variable([&](const variable_ref& v) {
    if (v.name == "0.0.kernel")
      for (std::size_t i = 0; i < v.extent; ++i) sq += double(((float*)v.data)[i]) * ((float*)v.data)[i];
  });
  using L = detail::type_at_t<0, decltype(m)::layers>;
  layer_slot<float> s{m.parameters().data(), nullptr, nullptr, nullptr, nullptr, nullptr};
  CHECK(double(L::penalty(s)) == doctest::Approx(0.5 * sq).epsilon(1e-5));

  using net = sequential<input<2>, dense<8, ctnn::tanh>, residual<dense<8, ctnn::tanh>, residual<dense<8, ctnn::tanh>>>, dense<2>>;
  const data::in_memory<shape<2>, sparse_labels> ds({0, 0, 0, 1, 1, 0, 1, 1}, {0, 1, 1, 0});
  auto x = make_model<net>(7);
  adam opt{0.05};
  auto h = fit(x, sparse_categorical_crossentropy{.from_logits = true}, opt, ds.batch(4), epochs{150});
  CHECK(h["loss"].back() < 0.05);
}
