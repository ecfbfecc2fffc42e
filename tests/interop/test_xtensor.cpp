// xtensor.hpp: predict/evaluate on xtensor expressions, typed one-sample predict,
// datasets from xtensor, variables as shaped views; train/predict.hpp: predict on
// a dataset, predict_proba.
#include <doctest/doctest.h>

#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/reshape.hpp>
#include <ctnn/losses/mean_squared_error.hpp>
#include <ctnn/losses/sparse_categorical_crossentropy.hpp>
#include <ctnn/metrics/sparse_categorical_accuracy.hpp>
#include <ctnn/xtensor.hpp>

#include <xtensor/xmanipulation.hpp>
#include <xtensor/xview.hpp>

#include <cmath>
#include <string>
#include <vector>

using namespace ctnn;

namespace {
using net = sequential<input<2, 2>, flatten, dense<5, ctnn::tanh>, dense<3>>;

xt::xtensor<float, 3> inputs(std::size_t n) {
  xt::xtensor<float, 3> x = xt::xtensor<float, 3>::from_shape({n, 2, 2});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = std::sin(float(i) * 0.7f);
  return x;
}

// Different batch sizes take different GEMM paths (docs/design.md), so outputs of
// one sample computed in batches of different sizes agree to rounding, not to the bit.
bool close(const auto& a, const auto& b) {
  if (a.size() != b.size()) return false;
  auto i = a.begin();
  for (auto j = b.begin(); j != b.end(); ++i, ++j)
    if (std::abs(double(*i) - double(*j)) > 1e-6 * (1 + std::abs(double(*j)))) return false;
  return true;
}

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}
}  // namespace

TEST_CASE("predict on an xt::xtensor returns (n, output...) equal to the model's raw predict") {
  auto m = make_model<net>(5);
  const auto x = inputs(7);
  const auto y = ctnn::predict(m, x);
  static_assert(std::is_same_v<decltype(y), const xt::xtensor<float, 2>>);
  REQUIRE(y.shape()[0] == 7);
  REQUIRE(y.shape()[1] == 3);
  const auto ref = m.predict(x.data(), 7);
  CHECK(std::vector<float>(y.begin(), y.end()) == ref);
  // chunks of 2 give the same rows
  const auto y2 = ctnn::predict(m, x, 2);
  CHECK(close(y2, y));
}

TEST_CASE("predict accepts views, other element types and dynamic ranks") {
  auto m = make_model<net>(5);
  const auto x = inputs(6);
  const auto ref = ctnn::predict(m, x);
  // a strided view: every other sample
  const auto every_other = xt::view(x, xt::range(0, 6, 2), xt::all(), xt::all());
  const auto yv = ctnn::predict(m, every_other);
  REQUIRE(yv.shape()[0] == 3);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) CHECK(yv(i, j) == doctest::Approx(ref(2 * i, j)).epsilon(1e-6));
  // doubles convert to the model's float
  const xt::xtensor<double, 3> xd = xt::cast<double>(x);
  CHECK(ctnn::predict(m, xd) == ref);
  // a dynamic rank (an adaptor with a std::vector shape, as xt::xarray has) is checked at run time
  std::vector<float> values(x.begin(), x.end());
  const auto xa = xt::adapt(values, std::vector<std::size_t>{6, 2, 2});
  CHECK(ctnn::predict(m, xa) == ref);
  std::vector<float> zeros(24);
  const auto wrong = xt::adapt(zeros, std::vector<std::size_t>{6, 4});
  CHECK(message_of([&] { ctnn::predict(m, wrong); }) ==
        "predict: the input has shape (6, 4); this network takes (n, 2, 2)");
  const xt::xtensor<float, 3> wrong_extent = xt::zeros<float>({6, 2, 3});
  CHECK(message_of([&] { ctnn::predict(m, wrong_extent); }) ==
        "predict: the input has shape (6, 2, 3); this network takes (n, 2, 2)");
}

TEST_CASE("predict_sample: one typed sample in, the typed output out") {
  auto m = make_model<net>(9);
  const auto x = inputs(3);
  const auto all = ctnn::predict(m, x);
  input_tensor_t<decltype(m)> s = xt::view(x, 1, xt::all(), xt::all());
  const output_tensor_t<decltype(m)> y = predict_sample(m, s);
  static_assert(std::is_same_v<output_tensor_t<decltype(m)>, xt::xtensor_fixed<float, xt::xshape<3>>>);
  // one sample and a row of a three-sample batch agree to rounding, not to the bit (the batch
  // may take another kernel: on an AVX2-only CPU the last bits differ)
  for (std::size_t j = 0; j < 3; ++j) CHECK(y(j) == doctest::Approx(all(1, j)).epsilon(1e-6));
  // a view of one sample works as well, and a wrong one is refused at run time
  CHECK(predict_sample(m, xt::view(x, 2, xt::all(), xt::all()))(0) == doctest::Approx(all(2, 0)).epsilon(1e-6));
  std::vector<float> four(4);
  const auto bad = xt::adapt(four, std::vector<std::size_t>{4});
  CHECK(message_of([&] { predict_sample(m, bad); }) ==
        "predict_sample: the input has shape (4,); this network takes (2, 2)");
}

TEST_CASE("variable<L, name>: a shaped, writable view of a layer's variable") {
  auto m = make_model<net>(2);
  auto k = variable<1, "kernel">(m);
  auto b = variable<1, "bias">(m);
  static_assert(decltype(k)::rank == 2);
  REQUIRE(k.shape()[0] == 4);
  REQUIRE(k.shape()[1] == 5);
  REQUIRE(b.shape()[0] == 5);
  auto p = m.layer_parameters<1>();
  CHECK(k(1, 2) == p[1 * 5 + 2]);
  CHECK(b(3) == p[20 + 3]);
  // writing through the view changes what the model computes
  k.fill(0.f);
  b = xt::xtensor<float, 1>{1.f, 0.f, 0.f, 0.f, 0.f};
  auto out = variable<2, "kernel">(m);
  out.fill(0.f);
  out(0, 1) = 1.f;
  variable<2, "bias">(m).fill(0.f);
  const auto y = ctnn::predict(m, inputs(2));
  CHECK(y(0, 1) == doctest::Approx(std::tanh(1.0)));
  CHECK(y(1, 0) == 0.f);
  // the run-time spelling sees the same memory
  auto kr = variable(m, 2, "kernel");
  CHECK(kr.dimension() == 2);
  CHECK(kr(0, 1) == 1.f);
  CHECK(message_of([&] { variable(m, 2, "kernal"); }) ==
        "variable: layer 2 has no variable 'kernal'; it has kernel, bias");
  CHECK(message_of([&] { variable(m, 0, "kernel"); }) == "variable: layer 0 has no variable 'kernel'; it has none");
  CHECK(message_of([&] { variable(m, 3, "kernel"); }) ==
        "variable: the network has 3 layers (counted from 0); there is no layer 3");
}

TEST_CASE("from_xtensor and evaluate(x, y) agree with a dataset built from vectors") {
  auto m = make_model<net>(4);
  const auto x = inputs(10);
  const xt::xtensor<int, 1> labels{0, 1, 2, 0, 1, 2, 0, 1, 2, 2};
  const auto ds = data::from_xtensor<shape<2, 2>>(x, labels).batch(4);
  const auto ref_ds = data::from_tensors<shape<2, 2>>(std::vector<float>(x.begin(), x.end()),
                                                      std::vector<std::int32_t>(labels.begin(), labels.end()))
                          .batch(4);
  const auto a = evaluate(m, sparse_categorical_crossentropy{true}, ds, sparse_categorical_accuracy{});
  const auto b = evaluate(m, sparse_categorical_crossentropy{true}, ref_ds, sparse_categorical_accuracy{});
  const auto c = evaluate(m, sparse_categorical_crossentropy{true}, x, labels, sparse_categorical_accuracy{});
  CHECK(a["loss"] == b["loss"]);
  CHECK(a["sparse_categorical_accuracy"] == b["sparse_categorical_accuracy"]);
  CHECK(c["loss"] == doctest::Approx(b["loss"]).epsilon(1e-6));
  CHECK(c["sparse_categorical_accuracy"] == b["sparse_categorical_accuracy"]);
  const xt::xtensor<long, 1> too_few{0, 1};
  CHECK(message_of([&] { data::from_xtensor<shape<2, 2>>(x, too_few); }) ==
        "from_xtensor: 10 samples but targets of shape (2,) (expected 10 values)");
  const xt::xtensor<int, 1> negative{0, 1, 2, 0, -1, 2, 0, 1, 2, 2};
  CHECK(message_of([&] { data::from_xtensor<shape<2, 2>>(x, negative); }) ==
        "from_xtensor: label -1 of sample 4 is not a class index");
}

TEST_CASE("predict on a dataset, predict_proba and as_output_tensor") {
  auto m = make_model<net>(8);
  const auto x = inputs(9);
  const auto ds = data::from_xtensor<shape<2, 2>>(x, xt::xtensor<int, 1>(xt::zeros<int>({9}))).batch(4);
  const auto rows = ctnn::predict(m, ds);
  CHECK(rows == m.predict(x.data(), 9, 4));  // the same batches: the same bits
  CHECK(as_output_tensor<decltype(m)>(rows) == ctnn::predict(m, x, 4));
  const auto proba = predict_proba(m, ds);
  REQUIRE(proba.size() == 27);
  for (std::size_t i = 0; i < 9; ++i) {
    double mx = -1e30, sum = 0, psum = 0;
    for (std::size_t j = 0; j < 3; ++j) mx = std::max(mx, double(rows[i * 3 + j]));
    for (std::size_t j = 0; j < 3; ++j) sum += std::exp(double(rows[i * 3 + j]) - mx);
    for (std::size_t j = 0; j < 3; ++j) {
      CHECK(proba[i * 3 + j] == doctest::Approx(std::exp(double(rows[i * 3 + j]) - mx) / sum).epsilon(1e-6));
      psum += proba[i * 3 + j];
    }
    CHECK(psum == doctest::Approx(1.0).epsilon(1e-6));
  }
  CHECK(message_of([&] { softmax_rows(std::vector<float>(5), 3); }) == "softmax_rows: 5 values are not rows of 3");
}

TEST_CASE("predict, predict_sample, evaluate and from_xtensor read every memory layout by index") {
  // The same values (n, 2, 2) held in every layout an expression can have: each is read by
  // its indices (value (i, j, k) is sample i's (j, k)), never as a row-major buffer.
  auto m = make_model<net>(6);
  const auto x = inputs(6);
  const auto ref = ctnn::predict(m, x);
  const std::array<std::size_t, 3> sh{6, 2, 2};
  // column-major storage of x: (i, j, k) at i + 6 j + 12 k
  std::vector<float> cm(24);
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 2; ++j)
      for (std::size_t k = 0; k < 2; ++k) cm[i + 6 * j + 12 * k] = x(i, j, k);

  const xt::xtensor<float, 3, xt::layout_type::column_major> xc = x;
  REQUIRE(std::vector<float>(xc.data(), xc.data() + 24) == cm);  // really column-major in memory
  CHECK(close(ctnn::predict(m, xc), ref));
  const auto adapted = xt::adapt<xt::layout_type::column_major>(cm.data(), 24, xt::no_ownership(), sh);
  CHECK(close(ctnn::predict(m, adapted), ref));
  const auto dynamic = xt::adapt<xt::layout_type::dynamic>(cm, sh, xt::layout_type::column_major);
  CHECK(close(ctnn::predict(m, dynamic), ref));
  // explicit strides (column-major ones), a dynamic-rank column-major adaptor
  const auto strided = xt::adapt(cm.data(), 24, xt::no_ownership(), sh, std::array<std::size_t, 3>{1, 6, 12});
  CHECK(close(ctnn::predict(m, strided), ref));
  const auto dyn_rank =
      xt::adapt<xt::layout_type::column_major>(cm, std::vector<std::size_t>{6, 2, 2});
  CHECK(close(ctnn::predict(m, dyn_rank), ref));
  // views: a transpose of (2, 2, n) data, a contiguous row-major window at an offset
  xt::xtensor<float, 3> t = xt::xtensor<float, 3>::from_shape({2, 2, 6});
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 2; ++j)
      for (std::size_t k = 0; k < 2; ++k) t(k, j, i) = x(i, j, k);
  CHECK(close(ctnn::predict(m, xt::transpose(t)), ref));
  const auto window = xt::view(x, xt::range(2, 6), xt::all(), xt::all());
  CHECK(close(ctnn::predict(m, window), xt::xtensor<float, 2>(xt::view(ref, xt::range(2, 6), xt::all()))));
  // predict in chunks of 4 from a column-major tensor: each chunk is its samples
  CHECK(close(ctnn::predict(m, xc, 4), ctnn::predict(m, x, 4)));

  // one sample: column-major fixed tensor and adaptor, the transpose of a row-major one
  xt::xtensor_fixed<float, xt::xshape<2, 2>, xt::layout_type::column_major> s;
  for (std::size_t j = 0; j < 2; ++j)
    for (std::size_t k = 0; k < 2; ++k) s(j, k) = x(3, j, k);
  const auto want = predict_sample(m, xt::view(x, 3, xt::all(), xt::all()));
  CHECK(close(predict_sample(m, s), want));
  const std::array<float, 4> s_cm{x(3, 0, 0), x(3, 1, 0), x(3, 0, 1), x(3, 1, 1)};
  CHECK(close(predict_sample(m, xt::adapt<xt::layout_type::column_major>(s_cm.data(), 4, xt::no_ownership(),
                                                                          std::array<std::size_t, 2>{2, 2})),
              want));
  CHECK(close(predict_sample(m, xt::transpose(xt::view(t, xt::all(), xt::all(), 3))), want));

  // evaluate and from_xtensor: column-major inputs, column-major labels (n, 1) and dense targets
  const xt::xtensor<int, 1> labels{0, 1, 2, 2, 1, 0};
  const xt::xtensor<int, 2, xt::layout_type::column_major> labels_cm = xt::reshape_view(labels, {6, 1});
  const auto r = evaluate(m, sparse_categorical_crossentropy{true}, x, labels, sparse_categorical_accuracy{});
  const auto rc = evaluate(m, sparse_categorical_crossentropy{true}, xc, labels_cm, sparse_categorical_accuracy{});
  CHECK(rc["loss"] == doctest::Approx(r["loss"]).epsilon(1e-6));
  CHECK(rc["sparse_categorical_accuracy"] == r["sparse_categorical_accuracy"]);
  const xt::xtensor<double, 3, xt::layout_type::column_major> xcd = x;  // another element type too
  CHECK(evaluate(m, sparse_categorical_crossentropy{true}, xcd, labels)["loss"] == doctest::Approx(r["loss"]).epsilon(1e-6));
  xt::xtensor<float, 2> targets = xt::xtensor<float, 2>::from_shape({6, 3});
  for (std::size_t i = 0; i < targets.size(); ++i) targets.data()[i] = 0.1f * float(i);
  const xt::xtensor<float, 2, xt::layout_type::column_major> targets_cm = targets;
  const auto mse = evaluate(m, mean_squared_error{}, x, targets);
  CHECK(evaluate(m, mean_squared_error{}, xc, targets_cm)["loss"] == doctest::Approx(mse["loss"]).epsilon(1e-6));
  const auto ds = data::from_xtensor<shape<2, 2>, dense_targets<shape<3>>>(xc, targets_cm).batch(6);
  CHECK(evaluate(m, mean_squared_error{}, ds)["loss"] == doctest::Approx(mse["loss"]).epsilon(1e-6));
}
