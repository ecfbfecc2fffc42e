// The batched loss ops of ops<cuda<90>> into a step's scalars (core/backend_ops.hpp's
// has_loss_ops: sparse_crossentropy_loss, categorical_crossentropy_loss of logits and of
// probabilities, squared_error_loss, pointwise_loss) against ops<cpu<>>'s on the same rounded values: the
// loss sum added to step_scalars::loss_sum (within 1e-5 relative), dL/dy times the scale and
// the scalars' loss_scale (within tolerance<T>()), the non-finite flag.
#include "cuda_test.hpp"

#include <ctnn/backends/cpu/ops.hpp>
#include <ctnn/backends/cuda/ops.cuh>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using namespace ctnn_test;

namespace {
using G = ctnn::ops<ctnn::cuda<90>>;
using C = ctnn::ops<ctnn::cpu<>>;

struct device_scalars {
  ctnn::device_buffer<ctnn::step_scalars> buf{1};
  explicit device_scalars(const ctnn::step_scalars& s) { buf.upload(&s, 1); }
  ctnn::step_scalars get() const {
    ctnn::step_scalars s;
    buf.download(&s, 1);
    return s;
  }
};
}  // namespace

TEST_CASE_TEMPLATE("the batched loss ops into step_scalars match the CPU's", T, float, __half, __nv_bfloat16) {
  CTNN_REQUIRE_DEVICE();
  constexpr std::size_t rows = 37, cols = 10;
  for (const bool logits : {true, false}) {
    INFO("from_logits = " << logits);
    const auto y = rounded<T>(logits ? random_values(rows * cols, 21, -6.0f, 6.0f)
                                     : random_values(rows * cols, 21, 0.01f, 1.0f));
    const auto t = rounded<T>(random_values(rows * cols, 22, 0.0f, 1.0f));
    std::vector<std::int32_t> labels(rows);
    for (std::size_t i = 0; i < rows; ++i) labels[i] = std::int32_t((i * 3) % cols);
    auto dy = to_device<T>(y), dt = to_device<T>(t);
    ctnn::device_buffer<std::int32_t> dl(rows);
    dl.upload(labels.data(), rows);
    ctnn::device_buffer<T> dd(rows * cols);
    const double scale = 1.0 / rows;
    ctnn::step_scalars start;
    start.loss_sum = 0.5;
    start.loss_scale = 64.0;
    {  // sparse
      ctnn::step_scalars want = start;
      std::vector<float> want_d(rows * cols);
      C::sparse_crossentropy_loss(y.data(), labels.data(), rows, cols, want_d.data(), scale, logits, &want);
      device_scalars s(start);
      G::sparse_crossentropy_loss(dy.data(), dl.data(), rows, cols, dd.data(), scale, logits, s.buf.data());
      const ctnn::step_scalars got = s.get();
      CHECK(std::abs(got.loss_sum - want.loss_sum) <= 1e-5 * std::abs(want.loss_sum));
      CHECK(got.non_finite == 0);
      CHECK_CLOSE(T, to_host(dd, rows * cols), want_d);
    }
    {  // categorical
      ctnn::step_scalars want = start;
      std::vector<float> want_d(rows * cols);
      C::categorical_crossentropy_loss(y.data(), t.data(), rows, cols, want_d.data(), scale, logits, &want);
      device_scalars s(start);
      G::categorical_crossentropy_loss(dy.data(), dt.data(), rows, cols, dd.data(), scale, logits, s.buf.data());
      const ctnn::step_scalars got = s.get();
      CHECK(std::abs(got.loss_sum - want.loss_sum) <= 1e-5 * std::abs(want.loss_sum));
      CHECK_CLOSE(T, to_host(dd, rows * cols), want_d);
    }
  }
  {  // squared error, and a non-finite value sets the flag
    const std::size_t n = 5000;
    const auto y = rounded<T>(random_values(n, 31)), t = rounded<T>(random_values(n, 32));
    auto dy = to_device<T>(y), dt = to_device<T>(t);
    ctnn::device_buffer<T> dd(n);
    ctnn::step_scalars start;
    start.loss_scale = 4.0;
    ctnn::step_scalars want = start;
    std::vector<float> want_d(n);
    C::squared_error_loss(y.data(), t.data(), n, want_d.data(), 0.01, 10.0, &want);
    device_scalars s(start);
    G::squared_error_loss(dy.data(), dt.data(), n, dd.data(), 0.01, 10.0, s.buf.data());
    CHECK(std::abs(s.get().loss_sum - want.loss_sum) <= 1e-5 * std::abs(want.loss_sum));
    CHECK_CLOSE(T, to_host(dd, n), want_d);
    std::vector<float> bad = y;
    bad[1234] = std::numeric_limits<float>::infinity();
    auto db = to_device<T>(bad);
    device_scalars f(ctnn::step_scalars{});
    G::squared_error_loss(db.data(), dt.data(), n, dd.data(), 0.01, 10.0, f.buf.data());
    CHECK(f.get().non_finite != 0);
  }
  {  // the pointwise rules (binary cross-entropy of logits and of probabilities, Huber, KL divergence)
    const std::size_t n = 3000;
    const auto z = rounded<T>(random_values(n, 41)), u = rounded<T>(random_values(n, 42));
    std::vector<float> p(n), q(n);
    for (std::size_t i = 0; i < n; ++i) p[i] = 0.5f + 0.45f * z[i], q[i] = 0.5f + 0.5f * u[i];  // in (0, 1)
    const auto pr = rounded<T>(p), qr = rounded<T>(q);
    auto run = [&](const auto& rule, const std::vector<float>& y, const std::vector<float>& t) {
      auto dy = to_device<T>(y), dt = to_device<T>(t);
      ctnn::device_buffer<T> dd(n);
      ctnn::step_scalars start;
      start.loss_scale = 2.0;
      ctnn::step_scalars want = start;
      std::vector<float> want_d(n);
      C::pointwise_loss(rule, y.data(), t.data(), n, want_d.data(), 0.01, 7.0, &want);
      device_scalars s(start);
      G::pointwise_loss(rule, dy.data(), dt.data(), n, dd.data(), 0.01, 7.0, s.buf.data());
      CHECK(std::abs(s.get().loss_sum - want.loss_sum) <= 1e-5 * std::abs(want.loss_sum));
      CHECK_CLOSE(T, to_host(dd, n), want_d);
    };
    run(ctnn::fn::binary_crossentropy_rule{true}, z, qr);
    run(ctnn::fn::binary_crossentropy_rule{false}, pr, qr);
    run(ctnn::fn::huber_rule{0.3}, z, u);
    run(ctnn::fn::kl_divergence_rule{}, pr, qr);
  }
}
