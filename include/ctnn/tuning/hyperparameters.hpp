// ctnn/tuning/hyperparameters.hpp — a search space of run-time hyperparameters.
//
// Keras Tuner's HyperParameters, declared up front instead of discovered by a
// build function: search_space::integer(name, min, max, step = 1, sampling),
// real(name, min, max, step = 0 (none), sampling), choice(name, {values}),
// boolean(name), fixed(name, value). Each returns the hyperparameter, whose
// when(parent, {values}) makes it conditional (Keras Tuner's
// conditional_scope(parent_name, parent_values)): it is active only when the
// parent is active and takes one of those values; an inactive hyperparameter
// has no value in a trial. Sampling maps a probability p in [0, 1) to a value
// as Keras Tuner 1.4 does (prob_to_value): with a step, index = floor(p * n)
// of n = (max - min) // step + 1 values (Python's floor division: real(0, 0.5,
// 0.1) has the 5 values 0 to 0.4, as in Keras Tuner) (log: min * step^index); without,
// min + p (max - min) (log: exp(log min + p (log max - log min))); a choice
// (and a boolean, the choice {false, true}) takes values[floor(p * n)].
// value_to_prob is the inverse used by Bayesian optimisation ((index + 0.5) / n
// for discrete values). Defaults: min, values[0], false. Invalid definitions
// and unknown or inactive names throw std::invalid_argument naming them.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <charconv>
#include <deque>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/format.hpp"
#include "../core/rng.hpp"

namespace ctnn::tuning {

// One hyperparameter value: a boolean, an integer, a real or a string.
using value = std::variant<bool, std::int64_t, double, std::string>;

// A double as Python's repr prints it (Keras Tuner's summaries): the shortest digits that
// round-trip, fixed notation for exponents in [-4, 16), else d.ddde-XX; "1.0", not "1".
inline std::string python_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string s(buf, r.ptr);
  const std::size_t e = s.find('e');
  const int exp = std::stoi(s.substr(e + 1));
  std::string sign = s[0] == '-' ? "-" : "";
  std::string digits;
  for (char c : s.substr(0, e))
    if (c >= '0' && c <= '9') digits += c;
  if (exp < -4 || exp >= 16) {
    std::string m = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    const std::string ex = std::to_string(exp < 0 ? -exp : exp);
    return sign + m + "e" + (exp < 0 ? "-" : "+") + (ex.size() < 2 ? "0" : "") + ex;
  }
  if (exp < 0) return sign + "0." + std::string(std::size_t(-exp - 1), '0') + digits;
  if (digits.size() <= std::size_t(exp) + 1) return sign + digits + std::string(std::size_t(exp) + 1 - digits.size(), '0') + ".0";
  return sign + digits.substr(0, std::size_t(exp) + 1) + "." + digits.substr(std::size_t(exp) + 1);
}

inline std::string to_string(const value& v) {
  if (auto* b = std::get_if<bool>(&v)) return *b ? "True" : "False";  // Keras Tuner prints Python's repr
  if (auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v)) return python_repr(*d);
  return std::get<std::string>(v);
}
inline nlohmann::json to_json(const value& v) {
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}
inline value value_from_json(const nlohmann::json& j) {
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) return j.get<std::int64_t>();
  if (j.is_number_float()) return j.get<double>();
  if (j.is_string()) return j.get<std::string>();
  throw std::invalid_argument("tuning: a hyperparameter value must be a boolean, number or string, got " + j.dump());
}

enum class sampling { linear, log };

// Python's float a // b for a >= 0, b > 0 (Keras Tuner counts stepped values with it):
// the floor of the exact quotient, so 0.5 // 0.1 is 4 (0.1 is a little above 1/10).
inline double python_floordiv(double a, double b) {
  const double mod = std::fmod(a, b);
  const double div = (a - mod) / b;
  double f = std::floor(div);
  if (div - f > 0.5) f += 1;
  return f;
}

// The values of one trial, in the order of the search space.
class values {
 public:
  bool has(const std::string& name) const { return find(name) != nullptr; }
  const value& at(const std::string& name) const {
    if (auto* v = find(name)) return *v;
    std::string have;
    for (auto& [k, x] : items_) have += (have.empty() ? "" : ", ") + k;
    throw std::invalid_argument("hyperparameters: no value '" + name + "' in this trial (inactive or undefined; it has: " +
                                have + ")");
  }
  // The value as T (bool, std::int64_t, double, std::string); an integer is read as a double too.
  template <class T>
  T get(const std::string& name) const {
    const value& v = at(name);
    if constexpr (std::is_same_v<T, double>) {
      if (auto* i = std::get_if<std::int64_t>(&v)) return double(*i);
    }
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (auto* i = std::get_if<std::int64_t>(&v)) return T(*i);
    } else {
      if (auto* x = std::get_if<T>(&v)) return *x;
    }
    throw std::invalid_argument("hyperparameters: '" + name + "' is " + to_string(v) + ", not of the type asked for");
  }
  template <class T>
  T get_or(const std::string& name, T fallback) const {
    return has(name) ? get<T>(name) : fallback;
  }
  void set(const std::string& name, value v) {
    for (auto& [k, x] : items_)
      if (k == name) {
        x = std::move(v);
        return;
      }
    items_.emplace_back(name, std::move(v));
  }
  void erase(const std::string& name) {
    std::erase_if(items_, [&](auto& kv) { return kv.first == name; });
  }
  const std::vector<std::pair<std::string, value>>& items() const noexcept { return items_; }
  bool operator==(const values&) const = default;

  nlohmann::json to_json() const {
    nlohmann::json j = nlohmann::json::object();
    for (auto& [k, v] : items_) j[k] = tuning::to_json(v);
    return j;
  }
  // Keys come back in the order given by `order` (the space), then the rest sorted.
  static values from_json(const nlohmann::json& j, const std::vector<std::string>& order = {}) {
    values r;
    for (auto& k : order)
      if (j.contains(k)) r.set(k, value_from_json(j.at(k)));
    for (auto& [k, v] : j.items())
      if (!r.has(k)) r.set(k, value_from_json(v));
    return r;
  }

 private:
  const value* find(const std::string& name) const {
    for (auto& [k, x] : items_)
      if (k == name) return &x;
    return nullptr;
  }
  std::vector<std::pair<std::string, value>> items_;
};

struct hyperparameter {
  enum class kind { integer, real, choice, boolean, fixed };
  std::string name;
  kind type = kind::fixed;
  double min = 0, max = 0, step = 0;  // integer, real (step 0: continuous)
  tuning::sampling scale = sampling::linear;
  std::vector<value> choices;  // choice; boolean: {false, true}; fixed: {the value}
  std::string parent;          // conditional: active when parent's value is one of parent_values
  std::vector<value> parent_values;

  // Makes this hyperparameter conditional on `parent_name` taking one of `vals`.
  hyperparameter& when(std::string parent_name, std::vector<value> vals) {
    if (vals.empty()) throw std::invalid_argument("hyperparameters: '" + name + "': when() needs at least one parent value");
    parent = std::move(parent_name);
    parent_values = std::move(vals);
    return *this;
  }

  bool discrete() const { return type != kind::real || step > 0; }
  // Number of distinct values (discrete kinds).
  std::size_t count() const {
    if (type == kind::choice || type == kind::boolean || type == kind::fixed) return choices.size();
    const double s = step > 0 ? step : 1;
    if (scale == sampling::log) return std::size_t(std::log(max / min) / std::log(s) + 1e-8) + 1;
    return std::size_t(python_floordiv(max - min, s)) + 1;
  }
  value default_value() const {
    if (type == kind::integer) return std::int64_t(min);
    if (type == kind::real) return min;
    return choices.front();
  }

  // Whether v is a value this hyperparameter takes: of its type, one of its choices, or in [min, max]
  // (a real within a relative 1e-12 of the bounds, which a stepped value may round past).
  bool admits(const value& v) const {
    if (type == kind::integer) {
      const auto* i = std::get_if<std::int64_t>(&v);
      return i && double(*i) >= min && double(*i) <= max;
    }
    if (type == kind::real) {
      const auto* d = std::get_if<double>(&v);
      const double tol = 1e-12 * std::max({1.0, std::abs(min), std::abs(max)});
      return d && std::isfinite(*d) && *d >= min - tol && *d <= max + tol;
    }
    return std::find(choices.begin(), choices.end(), v) != choices.end();
  }
  // Keras Tuner's prob_to_value, p in [0, 1].
  value from_prob(double p) const {
    p = std::clamp(p, 0.0, 1.0);
    auto index = [&](std::size_t n) { return std::min(std::size_t(p * double(n)), n - 1); };
    switch (type) {
      case kind::choice:
      case kind::boolean:
      case kind::fixed: return choices[index(choices.size())];
      case kind::integer: {
        if (scale == sampling::log && step <= 1)
          return std::clamp(std::int64_t(std::exp(std::log(min) + p * std::log(max / min))), std::int64_t(min), std::int64_t(max));
        const std::size_t i = index(count());
        const double s = step > 0 ? step : 1;
        return std::int64_t(std::llround(scale == sampling::log ? min * std::pow(s, double(i)) : min + double(i) * s));
      }
      case kind::real: {
        if (step > 0) {
          const std::size_t i = index(count());
          return scale == sampling::log ? min * std::pow(step, double(i)) : min + double(i) * step;
        }
        // clamped: exp(log(max)) may round above max
        return std::clamp(scale == sampling::log ? std::exp(std::log(min) + p * (std::log(max) - std::log(min)))
                                                 : min + p * (max - min),
                          min, max);
      }
    }
    return choices.front();
  }
  // Keras Tuner's value_to_prob: where a value lies in [0, 1].
  double to_prob(const value& v) const {
    auto num = [&] { return std::holds_alternative<double>(v) ? std::get<double>(v) : double(std::get<std::int64_t>(v)); };
    if (type == kind::choice || type == kind::boolean || type == kind::fixed) {
      const auto it = std::find(choices.begin(), choices.end(), v);
      if (it == choices.end()) throw std::invalid_argument("hyperparameters: '" + name + "' has no choice " + to_string(v));
      return (double(it - choices.begin()) + 0.5) / double(choices.size());
    }
    const double x = num();
    if (type == kind::integer && scale == sampling::log && step <= 1) return std::log(x / min) / std::log(max / min);
    if (discrete()) {
      const double s = step > 0 ? step : 1;
      const double i = scale == sampling::log ? std::round(std::log(x / min) / std::log(s)) : std::round((x - min) / s);
      return (i + 0.5) / double(count());
    }
    return scale == sampling::log ? std::log(x / min) / std::log(max / min) : (x - min) / (max - min);
  }

  nlohmann::json to_json() const {
    static const char* kinds[] = {"integer", "real", "choice", "boolean", "fixed"};
    nlohmann::json j{{"name", name}, {"type", kinds[int(type)]}};
    if (type == kind::integer || type == kind::real) {
      j["min"] = min;
      j["max"] = max;
      j["step"] = step;
      j["sampling"] = scale == sampling::log ? "log" : "linear";
    } else {
      nlohmann::json c = nlohmann::json::array();
      for (auto& v : choices) c.push_back(tuning::to_json(v));
      j["values"] = c;
    }
    if (!parent.empty()) {
      nlohmann::json c = nlohmann::json::array();
      for (auto& v : parent_values) c.push_back(tuning::to_json(v));
      j["conditions"] = {{"parent", parent}, {"values", c}};
    }
    return j;
  }
};

class search_space {
 public:
  using hp = hyperparameter;

  hp& integer(std::string name, std::int64_t min, std::int64_t max, std::int64_t step = 1, sampling s = sampling::linear) {
    const std::string where = "hyperparameters: integer '" + name + "'";
    if (min > max) throw std::invalid_argument(where + ": min " + std::to_string(min) + " > max " + std::to_string(max));
    if (step < 1) throw std::invalid_argument(where + ": step must be >= 1, got " + std::to_string(step));
    if (s == sampling::log && min <= 0) throw std::invalid_argument(where + ": log sampling needs min > 0");
    hp h{std::move(name), hp::kind::integer, double(min), double(max), double(step), s};
    return add(std::move(h));
  }
  // step 0: continuous. With log sampling a step is a factor (> 1).
  hp& real(std::string name, double min, double max, double step = 0, sampling s = sampling::linear) {
    const std::string where = "hyperparameters: real '" + name + "'";
    if (!(std::isfinite(min) && std::isfinite(max) && min < max))
      throw std::invalid_argument(where + ": needs finite min < max, got " + ctnn::detail::format_number(min) + ", " +
                                  ctnn::detail::format_number(max));
    if (!(step >= 0) || !std::isfinite(step)) throw std::invalid_argument(where + ": step must be >= 0");
    if (s == sampling::log && min <= 0) throw std::invalid_argument(where + ": log sampling needs min > 0");
    if (s == sampling::log && step != 0 && step <= 1) throw std::invalid_argument(where + ": a log step is a factor > 1");
    hp h{std::move(name), hp::kind::real, min, max, step, s};
    return add(std::move(h));
  }
  hp& choice(std::string name, std::vector<value> vals) {
    const std::string where = "hyperparameters: choice '" + name + "'";
    if (vals.empty()) throw std::invalid_argument(where + ": no values");
    for (std::size_t i = 0; i < vals.size(); ++i) {
      if (vals[i].index() != vals[0].index()) throw std::invalid_argument(where + ": values of different types");
      for (std::size_t k = 0; k < i; ++k)
        if (vals[k] == vals[i]) throw std::invalid_argument(where + ": value " + to_string(vals[i]) + " appears twice");
    }
    hp h{std::move(name), hp::kind::choice};
    h.choices = std::move(vals);
    return add(std::move(h));
  }
  hp& boolean(std::string name) {
    hp h{std::move(name), hp::kind::boolean};
    h.choices = {value(false), value(true)};
    return add(std::move(h));
  }
  hp& fixed(std::string name, value v) {
    hp h{std::move(name), hp::kind::fixed};
    h.choices = {std::move(v)};
    return add(std::move(h));
  }

  const std::deque<hp>& items() const noexcept { return hps_; }
  std::size_t size() const noexcept { return hps_.size(); }
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  const hp& operator[](const std::string& name) const {
    if (auto* h = find(name)) return *h;
    throw std::invalid_argument("hyperparameters: no hyperparameter '" + name + "' in the search space");
  }
  std::vector<std::string> names() const {
    std::vector<std::string> r;
    for (auto& h : hps_) r.push_back(h.name);
    return r;
  }

  // Whether h is active given the values chosen so far (its parent's value).
  bool is_active(const hp& h, const values& v) const {
    if (h.parent.empty()) return true;
    if (!v.has(h.parent)) return false;
    return std::find(h.parent_values.begin(), h.parent_values.end(), v.at(h.parent)) != h.parent_values.end();
  }

  // One value per active hyperparameter, each drawn from draw() (a probability in [0, 1)).
  template <class Draw>
  values sample(Draw&& draw) const {
    check();
    values v;
    for (auto& h : hps_)
      if (is_active(h, v)) v.set(h.name, h.from_prob(draw()));
    return v;
  }
  // Values from one probability per hyperparameter (Bayesian optimisation's vector).
  values from_probs(const std::vector<double>& p) const {
    values v;
    for (std::size_t i = 0; i < hps_.size(); ++i)
      if (is_active(hps_[i], v)) v.set(hps_[i].name, hps_[i].from_prob(p[i]));
    return v;
  }
  // The vector of a trial's values (inactive ones at their default, as Keras Tuner).
  std::vector<double> to_probs(const values& v) const {
    std::vector<double> p;
    for (auto& h : hps_) p.push_back(h.to_prob(is_active(h, v) && v.has(h.name) ? v.at(h.name) : h.default_value()));
    return p;
  }
  values defaults() const {
    values v;
    for (auto& h : hps_)
      if (is_active(h, v)) v.set(h.name, h.default_value());
    return v;
  }

  // A parent must be defined before its children and one of its values must be possible.
  void check() const {
    for (std::size_t i = 0; i < hps_.size(); ++i) {
      if (hps_[i].parent.empty()) continue;
      bool found = false;
      for (std::size_t k = 0; k < i; ++k) found = found || hps_[k].name == hps_[i].parent;
      if (!found)
        throw std::invalid_argument("hyperparameters: '" + hps_[i].name + "' is conditional on '" + hps_[i].parent +
                                    "', which is not defined before it");
    }
  }

  nlohmann::json to_json() const {
    nlohmann::json j = nlohmann::json::array();
    for (auto& h : hps_) j.push_back(h.to_json());
    return j;
  }

 private:
  hp& add(hp h) {
    if (h.name.empty()) throw std::invalid_argument("hyperparameters: a name must not be empty");
    if (find(h.name)) throw std::invalid_argument("hyperparameters: '" + h.name + "' is defined twice");
    hps_.push_back(std::move(h));
    return hps_.back();
  }
  const hp* find(const std::string& name) const {
    for (auto& h : hps_)
      if (h.name == name) return &h;
    return nullptr;
  }
  std::deque<hp> hps_;  // a deque: the reference add() returns stays valid
};

}  // namespace ctnn::tuning
