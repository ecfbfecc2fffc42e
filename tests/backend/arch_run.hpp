// The body both TUs compile (each with its own flags): fit for 3 epochs. It
// has internal linkage (a function of both TUs with one name would itself be
// the ODR violation the backend type avoids); everything of ctnn it
// instantiates carries the TU's architecture in cpu<Arch>.
#pragma once
#include <ctnn/backends/cpu/default_arch.hpp>
#include <ctnn/ctnn.hpp>

#include <type_traits>

#include "two_archs.hpp"

// cpu<> takes its architecture from backends/cpu/default_arch.hpp (xsimd's configuration macros,
// not its register headers): in each TU, with its own -march, it is xsimd's default_arch.
static_assert(std::is_same_v<ctnn::cpu<>::arch, xsimd::default_arch>);
static_assert(std::is_same_v<ctnn::kernels::cpu::default_arch, xsimd::default_arch>);

namespace {
arch_run train_here() {
  using net = ctnn::sequential<ctnn::input<16>, ctnn::dense<32, ctnn::relu>, ctnn::dense<4>>;
  std::vector<float> x(256 * 16);
  std::vector<std::int32_t> y(256);
  ctnn::rng g(11);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::int32_t((x[i * 16] > 0) + 2 * (x[i * 16 + 1] > 0));
  const ctnn::data::in_memory<ctnn::shape<16>, ctnn::sparse_labels> ds(x, y);
  auto m = ctnn::make_model<net>(3);
  ctnn::adam opt{0.01};
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, ds.batch(32), ctnn::epochs{3});
  arch_run r;
  r.backend = decltype(m)::backend::name();
  r.params.assign(m.parameters().begin(), m.parameters().end());
  r.outputs = m.predict(x.data(), 256);
  return r;
}
}  // namespace
