// binary_accuracy.hpp, top_k_categorical_accuracy.hpp, precision.hpp,
// recall.hpp and auc.hpp against Keras 3's docstring examples and tests
// (keras/src/metrics/*.py) and against values computed by hand from Keras'
// formulas (metrics_utils.py: thresholds, buckets, interpolation); streaming
// over batches and reset; the metrics inside fit and evaluate.
#include <doctest/doctest.h>

#include <ctnn/metrics/auc.hpp>
#include <ctnn/metrics/binary_accuracy.hpp>
#include <ctnn/metrics/metric.hpp>
#include <ctnn/metrics/precision.hpp>
#include <ctnn/metrics/recall.hpp>
#include <ctnn/metrics/top_k_categorical_accuracy.hpp>

#include <ctnn/ctnn.hpp>  // fit and evaluate

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

using namespace ctnn;

TEST_CASE("binary_accuracy: Keras' example, the threshold, streaming") {
  // keras.metrics.BinaryAccuracy: update_state([[1], [1], [0], [0]], [[0.98], [1], [0], [0.6]]) -> 0.75
  binary_accuracy m;
  const std::vector<float> y{0.98f, 1.0f, 0.0f, 0.6f}, t{1, 1, 0, 0};
  m.update<1>(y.data(), t.data(), 4);
  CHECK(m.result() == doctest::Approx(0.75));
  // every output of every sample counts: 2 samples x 2 outputs, logits with threshold 0
  binary_accuracy logits{.threshold = 0.0};
  const std::vector<float> z{-1.0f, 2.0f, 0.5f, 0.0f}, zt{0, 1, 0, 1};
  logits.update<2>(z.data(), zt.data(), 2);
  CHECK(logits.result() == doctest::Approx(0.5));  // 0 > 0 is false: the last is predicted 0
  logits.update<2>(z.data(), z.data(), 1);         // a target other than 0 or 1 never matches (-1 and 2)
  CHECK(logits.result() == doctest::Approx(2.0 / 6));
  logits.reset();
  CHECK(logits.result() == 0.0);
  static_assert(Metric<binary_accuracy>);
}

TEST_CASE("top_k_categorical_accuracy: Keras' example, sparse labels, ties as in_top_k") {
  // keras.metrics.TopKCategoricalAccuracy(k=1): ([[0, 0, 1], [0, 1, 0]], [[0.1, 0.9, 0.8], [0.05, 0.95, 0]]) -> 0.5
  const std::vector<float> y{0.1f, 0.9f, 0.8f, 0.05f, 0.95f, 0.0f}, t{0, 0, 1, 0, 1, 0};
  top_k_categorical_accuracy<1> k1;
  k1.update<3>(y.data(), t.data(), 2);
  CHECK(k1.result() == doctest::Approx(0.5));
  top_k_categorical_accuracy<2> k2;
  k2.update<3>(y.data(), t.data(), 2);
  CHECK(k2.result() == doctest::Approx(1.0));
  top_k_categorical_accuracy<> k5;  // K = 5 >= 3 classes: always in the top K
  k5.update<3>(y.data(), t.data(), 2);
  CHECK(k5.result() == doctest::Approx(1.0));
  const std::vector<std::int32_t> labels{2, 1};
  top_k_categorical_accuracy<1> s1;
  s1.update<3>(y.data(), labels.data(), 2);
  CHECK(s1.result() == doctest::Approx(0.5));
  // a tie at the boundary: fewer than K scores are strictly higher, so class 1 is in the top 1
  const std::vector<float> tie{0.4f, 0.4f, 0.2f};
  const std::vector<std::int32_t> one{1}, bad{3};
  top_k_categorical_accuracy<1> t1;
  t1.update<3>(tie.data(), one.data(), 1);
  CHECK(t1.result() == 1.0);
  CHECK_THROWS_WITH_AS(t1.update<3>(tie.data(), bad.data(), 1), doctest::Contains("label 3 of sample 0"),
                       std::out_of_range);
  static_assert(Metric<top_k_categorical_accuracy<3>>);
}

TEST_CASE("precision_metric and recall_metric: Keras' examples, strict threshold, divide_no_nan") {
  // keras.metrics.Precision / Recall: update_state([0, 1, 1, 1], [1, 0, 1, 1]) -> 0.6667 both
  const std::vector<float> t{0, 1, 1, 1}, y{1, 0, 1, 1};
  precision_metric p;
  recall_metric r;
  p.update<1>(y.data(), t.data(), 4);
  r.update<1>(y.data(), t.data(), 4);
  CHECK(p.result() == doctest::Approx(2.0 / 3));
  CHECK(r.result() == doctest::Approx(2.0 / 3));
  CHECK(p.name() == "precision");
  CHECK(r.name() == "recall");
  // streams: one more batch of 2 samples x 2 outputs; 0.5 is not above the threshold 0.5
  const std::vector<float> t2{1, 0, 1, 1}, y2{0.5f, 0.7f, 0.9f, 0.1f};
  p.update<2>(y2.data(), t2.data(), 2);
  r.update<2>(y2.data(), t2.data(), 2);
  CHECK(p.result() == doctest::Approx(3.0 / 5));  // tp 2 + 1, fp 1 + 1
  CHECK(r.result() == doctest::Approx(3.0 / 6));  // tp 3, fn 1 + 2
  p.reset();
  r.reset();
  const std::vector<float> zeros{0, 0};
  p.update<1>(zeros.data(), zeros.data(), 2);
  r.update<1>(zeros.data(), zeros.data(), 2);
  CHECK(p.result() == 0.0);  // nothing predicted positive: 0, not NaN
  CHECK(r.result() == 0.0);
  static_assert(Metric<precision_metric> && Metric<recall_metric>);
}

namespace {
// Keras' AUC test data (confusion_metrics_test.py: y_pred [0, 0.5, 0.3, 0.9], y_true [0, 0, 1, 1],
// sample_weight [1, 2, 3, 4]), the weights as repeated samples: tp [7, 4, 0], fp [3, 0, 0].
void weighted(std::vector<float>& y, std::vector<float>& t) {
  const float p[4] = {0.0f, 0.5f, 0.3f, 0.9f}, l[4] = {0, 0, 1, 1};
  for (int i = 0; i < 4; ++i)
    for (int w = 0; w <= i; ++w) y.push_back(p[i]), t.push_back(l[i]);
}
// Keras' rule written directly: thresholds -eps, i / (T - 1), 1 + eps; positive when p > threshold.
double reference_auc(const std::vector<float>& y, const std::vector<float>& t, std::size_t n, bool pr) {
  std::vector<double> th(n), tp(n), fp(n);
  for (std::size_t i = 0; i < n; ++i) th[i] = double(i) / double(n - 1);
  th[0] = -1e-7, th[n - 1] = 1 + 1e-7;
  double pos = 0, neg = 0;
  for (std::size_t k = 0; k < y.size(); ++k) {
    (t[k] != 0 ? pos : neg) += 1;
    for (std::size_t i = 0; i < n; ++i)
      if (double(y[k]) > th[i]) (t[k] != 0 ? tp : fp)[i] += 1;
  }
  double a = 0;
  for (std::size_t i = 0; i + 1 < n; ++i) {
    if (!pr) {
      a += (fp[i] / neg - fp[i + 1] / neg) * (tp[i] / pos + tp[i + 1] / pos) / 2;
    } else {
      const double dtp = tp[i] - tp[i + 1], pa = tp[i] + fp[i], pb = tp[i + 1] + fp[i + 1];
      const double slope = pa - pb > 0 ? dtp / (pa - pb) : 0.0;
      const double ratio = pa > 0 && pb > 0 ? pa / pb : 1.0;
      a += slope * (dtp + (tp[i + 1] - slope * pb) * std::log(ratio)) / pos;
    }
  }
  return a;
}
}  // namespace

TEST_CASE("auc: Keras' examples (ROC 0.75, weighted ROC and PR interpolation as Keras' tests)") {
  // keras.metrics.AUC(num_thresholds=3): update_state([0, 0, 1, 1], [0, 0.5, 0.3, 0.9]) -> 0.75
  const std::vector<float> y{0.0f, 0.5f, 0.3f, 0.9f}, t{0, 0, 1, 1};
  auc roc3{.num_thresholds = 3};
  roc3.update<1>(y.data(), t.data(), 4);
  CHECK(roc3.result() == doctest::Approx(0.75).epsilon(1e-12));
  std::vector<float> wy, wt;
  weighted(wy, wt);
  auc roc{.num_thresholds = 3}, pr{.num_thresholds = 3, .curve = auc::pr};
  roc.update<1>(wy.data(), wt.data(), wy.size());
  pr.update<1>(wy.data(), wt.data(), wy.size());
  // recall [1, 4/7, 0], fp rate [1, 0, 0]: (1 + 4/7) / 2 (Keras' test: 0.7855)
  CHECK(roc.result() == doctest::Approx((1 + 4.0 / 7) / 2).epsilon(1e-12));
  // slope [0.5, 1], intercept [2, 0], P ratio [2.5, 1]: (0.5 (3 + 2 log 2.5) + 4) / 7 (Keras' test: 2.416/7 + 4/7)
  const double want_pr = (0.5 * (3 + 2 * std::log(2.5)) + 4) / 7;
  CHECK(want_pr == doctest::Approx(2.416 / 7 + 4.0 / 7).epsilon(1e-3));
  CHECK(pr.result() == doctest::Approx(want_pr).epsilon(1e-12));
  static_assert(Metric<auc>);
}

TEST_CASE("auc: 200 thresholds against Keras' rule written directly, streaming, reset, from_logits") {
  rng g(3);
  std::vector<float> y(500), t(500), z(500);
  for (std::size_t i = 0; i < y.size(); ++i) {
    t[i] = g.uniform(0, 1) < 0.4 ? 1.0f : 0.0f;
    y[i] = float(std::clamp(g.uniform(-0.3, 0.7) + 0.35 * t[i], 0.001, 0.999));
    z[i] = float(std::log(double(y[i]) / (1 - double(y[i]))));
  }
  for (const auto curve : {auc::roc, auc::pr}) {
    INFO((curve == auc::roc ? "roc" : "pr"));
    const double want = reference_auc(y, t, 200, curve == auc::pr);
    CHECK(want > 0.6);
    auc once{.curve = curve};
    once.update<1>(y.data(), t.data(), y.size());
    CHECK(once.result() == doctest::Approx(want).epsilon(1e-12));
    auc streamed{.curve = curve};
    streamed.update<1>(y.data(), t.data(), 100);  // 100 samples, then 200 samples of 2 outputs
    streamed.update<2>(y.data() + 100, t.data() + 100, 200);
    CHECK(streamed.result() == doctest::Approx(want).epsilon(1e-12));
    streamed.reset();
    CHECK(streamed.result() == 0.0);
    auc logits{.curve = curve, .from_logits = true};
    logits.update<1>(z.data(), t.data(), z.size());
    CHECK(logits.result() == doctest::Approx(want).epsilon(1e-9));
  }
  auc bad{.num_thresholds = 1};
  CHECK_THROWS_WITH_AS(bad.update<1>(y.data(), t.data(), 2), "auc: num_thresholds must be at least 2, not 1",
                       std::invalid_argument);
}

TEST_CASE("the new losses and metrics in fit and evaluate: keys, learning, reset per epoch") {
  // two inputs, one logit: the label is x0 + x1 > 0
  constexpr std::size_t n = 256;
  std::vector<float> x(n * 2), yt(n);
  rng g(11);
  for (std::size_t i = 0; i < n; ++i) {
    x[2 * i] = float(g.uniform(-1, 1)), x[2 * i + 1] = float(g.uniform(-1, 1));
    yt[i] = x[2 * i] + x[2 * i + 1] > 0 ? 1.0f : 0.0f;
  }
  using net = sequential<input<2>, dense<8, ctnn::tanh>, dense<1>>;
  auto m = make_model<net>(5);
  adam opt{0.02};
  const auto ds = data::in_memory<shape<2>, dense_targets<shape<1>>>(x, yt).batch(32);
  auto h = fit(m, binary_crossentropy{.from_logits = true}, opt, ds, epochs{30}, binary_accuracy{.threshold = 0},
               auc{.from_logits = true}, precision_metric{.threshold = 0}, recall_metric{.threshold = 0},
               validation_data(ds));
  for (const char* k : {"loss", "binary_accuracy", "auc", "precision", "recall", "val_auc", "val_precision"}) {
    INFO(k);
    CHECK(h[k].size() == 30);
  }
  CHECK(h["loss"].back() < h["loss"].front());
  CHECK(h["binary_accuracy"].back() > 0.9);
  CHECK(h["val_auc"].back() > 0.95);
  // the last epoch's validation values are those of the trained model over every batch: evaluate and a
  // metric fed the predictions at once agree (each epoch starts from reset counts)
  const auto r = evaluate(m, binary_crossentropy{.from_logits = true}, ds, auc{.from_logits = true},
                          precision_metric{.threshold = 0});
  const std::vector<float> out = m.predict(x.data(), n);
  auc once{.from_logits = true};
  once.update<1>(out.data(), yt.data(), n);
  precision_metric p{.threshold = 0};
  p.update<1>(out.data(), yt.data(), n);
  CHECK(r["auc"] == doctest::Approx(once.result()).epsilon(1e-12));
  CHECK(r["precision"] == doctest::Approx(p.result()).epsilon(1e-12));
  CHECK(h["val_auc"].back() == doctest::Approx(r["auc"]).epsilon(1e-12));
  double bce = 0;
  for (std::size_t i = 0; i < n; ++i) bce += fn::binary_crossentropy_rule{true}.value(double(out[i]), double(yt[i]));
  CHECK(r["loss"] == doctest::Approx(bce / n).epsilon(1e-5));
}
