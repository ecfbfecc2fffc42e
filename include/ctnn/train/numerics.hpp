// ctnn/train/numerics.hpp — finding NaN and infinity in a model and a loss.
//
// first_non_finite(p, n): the index of the first NaN or infinite value of
// p[0..n), or n when all are finite (a branch-free integer scan of the
// exponent bits, so it vectorizes without fast-math). check_model_finite(m,
// where) throws ctnn::numeric_error "<where>: parameter i is NaN (...)" when a
// parameter or a state value (batch_norm's moving statistics) is not finite
// (where() builds "<where>" only then); fit calls it after every update, with
// "fit: after the update of epoch e, step s", so input data holding a NaN that a relu hides from the
// loss still stops training at the step that took it in. check_loss_finite(l,
// where) does the same for a loss value (evaluate, validation).
#pragma once
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "../core/errors.hpp"
#include "../core/plan.hpp"
#include "../core/separate.hpp"

namespace ctnn::detail {

template <class T>
CTNN_OUTLINE std::size_t first_non_finite(const T* p, std::size_t n) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "first_non_finite: float or double values");
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  constexpr U exp = sizeof(T) == 4 ? U(0x7f800000u) : U(0x7ff0000000000000ull);
  constexpr std::size_t block = 256;
  for (std::size_t i = 0; i < n; i += block) {
    const std::size_t e = i + block < n ? i + block : n;
    U any = 0;
    for (std::size_t j = i; j < e; ++j) any |= U((std::bit_cast<U>(p[j]) & exp) == exp);
    if (any)
      for (std::size_t j = i; j < e; ++j)
        if (!std::isfinite(p[j])) return j;
  }
  return n;
}

CTNN_INSTANCE(template std::size_t first_non_finite<float>(const float*, std::size_t);)
CTNN_INSTANCE(template std::size_t first_non_finite<double>(const double*, std::size_t);)

inline std::string non_finite_name(double v) { return std::isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf"; }

// The messages are built here, once, rather than in every model's instance of
// check_model_finite: they are cold, and formatting them inline made each
// instance several kilobytes of code (docs/performance.md, compile memory).
// `variable` is null when the model does not name its variables.
CTNN_LAZY [[noreturn, gnu::cold, gnu::noinline]] CTNN_DECL void throw_non_finite_parameter(const std::string& where, std::size_t i,
                                                                             const variable_ref* variable,
                                                                             std::size_t element, double value)
#if CTNN_DEFINITIONS
{
  std::string which;  // "layer 2 'kernel' [37]" when the model names its variables
  if (variable)
    which = " (layer " + std::to_string(variable->layer + 1) + " '" + std::string(variable->name) + "' [" +
            std::to_string(element) + "])";
  throw numeric_error(where + ": parameter " + std::to_string(i) + which + " is " + non_finite_name(value) +
                      " (a NaN or infinity in the input data, or a learning rate too large;"
                      " data::check_numerics names the sample)");
}
#else
;
#endif
CTNN_LAZY [[noreturn, gnu::cold, gnu::noinline]] CTNN_DECL void throw_non_finite_state(const std::string& where, std::size_t i,
                                                                         double value)
#if CTNN_DEFINITIONS
{
  throw numeric_error(where + ": state value " + std::to_string(i) + " (e.g. a moving statistic) is " +
                      non_finite_name(value));
}
#else
;
#endif

// where() builds the message's start only when something is wrong. With
// parameters_finite (the optimizer's update already found every new
// parameter finite: ops<B>::map of its rule) only the state is scanned.
// A model with host_region (train/model.hpp) is read through host views, so a
// device model's variables are scanned on the host.
template <class M, role R>
auto host_span_of(M& m) {
  if constexpr (requires { m.host_region(R); }) {
    using W = typename std::remove_cvref_t<M>::variable_type;
    struct region {
      decltype(m.host_region(R)) view;
      const W* data() const noexcept { return reinterpret_cast<const W*>(view.data()); }
      std::size_t size() const noexcept { return view.size() / sizeof(W); }
      W operator[](std::size_t i) const noexcept { return data()[i]; }
    };
    return region{m.host_region(R)};
  } else if constexpr (R == role::parameter) {
    return m.parameters();
  } else {
    return m.state();
  }
}

// One parameter buffer of a model, where find_parameter looks: its layer, its name, its bytes'
// offset inside the parameter region and their count, its element size.
struct parameter_entry {
  std::size_t layer = 0;
  std::string_view name{};
  std::size_t offset = 0, bytes = 0, element_bytes = 0;
};
// The parameter buffers of the bound layers Layers (a std::tuple) that Plan lays out under
// Policy, layer by layer in declaration order (for_each_variable's parameters): a constant
// table, so a model's find_parameter is one call of find_parameter_in (no walk of its layers
// instantiated in the program).
template <std::size_t N>
constexpr std::size_t count_of_kind(const std::array<buffer, N>& bs, role r) {
  std::size_t c = 0;
  for (const buffer& b : bs) c += b.kind == r;
  return c;
}
template <class Layers, class Policy, class Plan>
constexpr auto parameter_entries() {
  return []<class... L>(std::tuple<L...>*) {
    // (array expansions, not fold expressions: clang limits a fold to 256 operands, a network to none)
    constexpr std::array<std::size_t, sizeof...(L)> counts{count_of_kind(L::buffers, role::parameter)...};
    constexpr std::size_t n = [](std::array<std::size_t, sizeof...(L)> a) {
      std::size_t s = 0;
      for (const std::size_t c : a) s += c;
      return s;
    }(counts);
    std::array<parameter_entry, n> out{};
    std::size_t i = 0, k = 0;
    auto one = [&]<class Layer>(Layer*) {
      for (std::size_t b = 0; b < Layer::buffers.size(); ++b) {
        const buffer& d = Layer::buffers[b];
        if (d.kind != role::parameter) continue;
        const std::size_t eb = elem_bytes<Policy>(d.type);
        out[i++] = {k, d.name, Plan::offset(k, role::parameter, 1) + buffer_offset<Policy>(Layer::buffers, b),
                    d.extent * eb, eb};
      }
      ++k;
    };
    [[maybe_unused]] const int in_order[] = {0, (one(static_cast<L*>(nullptr)), 0)...};
    return out;
  }(static_cast<Layers*>(nullptr));
}
template <class Layers, class Policy, class Plan>
inline constexpr auto parameter_table = parameter_entries<Layers, Policy, Plan>();

// The entry of table[0..n) holding parameter byte `byte`: its layer and name into found, the
// element's index inside it into element; false when none does.
CTNN_LAZY [[gnu::cold]] CTNN_DECL bool find_parameter_in(const parameter_entry* table, std::size_t n, std::size_t byte,
                                               variable_ref& found, std::size_t& element)
#if CTNN_DEFINITIONS
{
  for (std::size_t j = 0; j < n; ++j) {
    const parameter_entry& v = table[j];
    if (byte >= v.offset && byte < v.offset + v.bytes) {
      found.layer = v.layer;
      found.name = v.name;
      element = (byte - v.offset) / v.element_bytes;
      return true;
    }
  }
  return false;
}
#else
;
#endif

// The variable holding parameter element i (false when none does); one instance per
// model, whatever the caller's where. A model (train/model.hpp) looks in its constant table
// of parameter buffers; another type that walks its variables (for_each_variable) is walked.
template <class M>
[[gnu::cold, gnu::noinline]] bool find_parameter(M& m, std::size_t i, std::size_t element_bytes, variable_ref& found,
                                                 std::size_t& element) {
  using X = std::remove_cvref_t<M>;
  if constexpr (requires {
                  typename X::layers;
                  typename X::policy;
                  typename X::plan;
                  X::plan::offset(std::size_t{}, role::parameter, std::size_t{});
                }) {
    constexpr auto& table = parameter_table<typename X::layers, typename X::policy, typename X::plan>;
    return find_parameter_in(table.data(), table.size(), i * element_bytes, found, element);
  } else {
    bool named = false;
    if constexpr (requires { m.for_each_variable([](const auto&) {}); }) {
      const std::size_t byte = i * element_bytes;
      m.for_each_variable([&](const auto& v) {
        if (v.kind == role::parameter && byte >= v.offset && byte < v.offset + v.extent * v.element_bytes) {
          found.layer = v.layer;
          found.name = v.name;
          named = true;
          element = (byte - v.offset) / v.element_bytes;
        }
      });
    }
    return named;
  }
}

template <class M, class Where>
void check_parameters_finite(M& m, Where&& where) {
  const auto params = host_span_of<M, role::parameter>(m);
  const std::size_t i = first_non_finite(params.data(), params.size());
  if (i != params.size()) {
    variable_ref found{};
    std::size_t element = 0;
    const bool named = find_parameter(m, i, sizeof(params[0]), found, element);
    throw_non_finite_parameter(where(), i, named ? &found : nullptr, element, double(params[i]));
  }
}

template <class M, class Where>
void check_model_finite(M& m, Where&& where, bool parameters_finite = false) {
  if (!parameters_finite) check_parameters_finite(m, where);
  if constexpr (requires { m.state(); }) {
    const auto st = host_span_of<M, role::state>(m);
    if (const std::size_t i = first_non_finite(st.data(), st.size()); i != st.size())
      throw_non_finite_state(where(), i, double(st[i]));
  }
}

// Whether check_model_finite can scan M's variables (float or double: a
// 16-bit model's are not scanned).
template <class M>
inline constexpr bool checks_numerics = std::is_same_v<typename M::variable_type, float> ||
                                        std::is_same_v<typename M::variable_type, double>;

inline void check_loss_finite(double loss, const std::string& where) {
  if (!std::isfinite(loss)) throw numeric_error(where + ": the loss is " + non_finite_name(loss));
}

}  // namespace ctnn::detail
