// ctnn/train/runtime_factors.hpp — set the run-time factors of a model's layers.
//
// set_dropout_rate(model, r) writes r into every dynamic_dropout layer's
// "rate" metadata buffer; set_regularization(model, "l2" | "l1", f) into every
// dynamic_l2 / dynamic_l1 factor (layers/dropout.hpp,
// regularizers/regularizers.hpp). Both return how many layers they set (0 when
// the network has none) and throw std::invalid_argument for a value out of
// range (a rate outside [0, 1), a factor that is negative or not finite; the
// ops read a factor where they run and turn one made bad behind these setters'
// back, by set_metadata_value, into a NaN penalty). Nothing is instantiated
// per value: the factors are data in the plan.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "../core/format.hpp"
#include "../core/plan.hpp"

namespace ctnn {

// Sets every f32 metadata buffer named `name` to v; returns how many it set.
template <class M>
std::size_t set_metadata_value(M& m, std::string_view name, float v) {
  std::size_t n = 0;
  m.for_each_variable([&](const variable_ref& r) {
    if (r.kind != role::metadata || r.name != name || r.type != elem::f32) return;
    for (std::size_t i = 0; i < r.extent; ++i) std::memcpy(r.data + i * sizeof v, &v, sizeof v);
    ++n;
  });
  return n;
}

template <class M>
std::size_t set_dropout_rate(M& m, double rate) {
  if (!(rate >= 0 && rate < 1))
    throw std::invalid_argument("set_dropout_rate: the dropout rate must be in [0, 1), got " + detail::format_number(rate));
  return set_metadata_value(m, "rate", float(rate));
}

template <class M>
std::size_t set_regularization(M& m, std::string_view kind, double factor) {
  if (kind != "l2" && kind != "l1")
    throw std::invalid_argument("set_regularization: the kind must be \"l2\" or \"l1\", got \"" + std::string(kind) + "\"");
  if (!(factor >= 0) || !std::isfinite(factor))
    throw std::invalid_argument("set_regularization: the " + std::string(kind) + " factor must be finite and >= 0, got " +
                                detail::format_number(factor));
  return set_metadata_value(m, kind, float(factor));
}

}  // namespace ctnn
