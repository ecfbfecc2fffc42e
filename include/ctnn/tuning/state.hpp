// ctnn/tuning/state.hpp — reading a saved search back: typed, range-checked JSON access.
//
// A project's files (oracle.json, trial_<id>/trial.json) come back through
// these readers. Each takes a JSON value and its key path (e.g.
// "state.brackets[0].rounds") and returns the value as the type asked for, or
// throws state_error "<key path>: <what is wrong>": a missing key, another
// JSON type, a number out of its range or not an integer, an id that is not a
// trial id (1 to 20 decimal digits, so never a path). A number is taken only as
// the JSON type it has: a float is never converted to an integer and an
// integer never wraps. The tuner reports a state_error as ctnn::io_error
// naming the file.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace ctnn::tuning {

class state_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace state {

using json = nlohmann::json;

// "null", "an object", "the string \"x\"", "the number 1.5": what a value is, for messages.
inline std::string describe(const json& j) {
  if (j.is_object()) return "an object";
  if (j.is_array()) return "an array";
  std::string s = j.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  if (j.is_null()) return "null";
  if (j.is_string()) return "the string " + s;
  if (j.is_boolean()) return "the boolean " + s;
  return "the number " + s;
}
inline std::string key(const std::string& where, const std::string& k) { return where.empty() ? k : where + "." + k; }
inline std::string index(const std::string& where, std::size_t i) { return where + "[" + std::to_string(i) + "]"; }

[[noreturn]] inline void fail(const std::string& where, const std::string& what) { throw state_error(where + ": " + what); }

inline const json& object(const json& j, const std::string& where) {
  if (!j.is_object()) fail(where, "expected an object, got " + describe(j));
  return j;
}
// Member k of the object j at `where` (state_error "<where>.<k>: missing" when absent).
inline const json& at(const json& j, const std::string& where, const std::string& k) {
  object(j, where);
  const auto it = j.find(k);
  if (it == j.end()) fail(key(where, k), "missing");
  return *it;
}
inline const json& array(const json& j, const std::string& where,
                         std::size_t max_size = std::numeric_limits<std::size_t>::max()) {
  if (!j.is_array()) fail(where, "expected an array, got " + describe(j));
  if (j.size() > max_size)
    fail(where, "has " + std::to_string(j.size()) + " entries, more than the " + std::to_string(max_size) + " possible");
  return j;
}
inline const std::string& string(const json& j, const std::string& where) {
  if (!j.is_string()) fail(where, "expected a string, got " + describe(j));
  return j.get_ref<const std::string&>();
}
inline bool boolean(const json& j, const std::string& where) {
  if (!j.is_boolean()) fail(where, "expected true or false, got " + describe(j));
  return j.get<bool>();
}
inline std::int64_t integer(const json& j, const std::string& where, std::int64_t lo = std::numeric_limits<std::int64_t>::min(),
                            std::int64_t hi = std::numeric_limits<std::int64_t>::max()) {
  auto range = [&] { return "outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"; };
  if (j.is_number_unsigned()) {
    const auto u = j.get<std::uint64_t>();
    if (hi < 0 || u > std::uint64_t(hi)) fail(where, std::to_string(u) + " is " + range());
    const auto v = std::int64_t(u);
    if (v < lo) fail(where, std::to_string(v) + " is " + range());
    return v;
  }
  if (!j.is_number_integer()) fail(where, "expected an integer, got " + describe(j));
  const auto v = j.get<std::int64_t>();
  if (v < lo || v > hi) fail(where, std::to_string(v) + " is " + range());
  return v;
}
inline std::uint64_t unsigned_integer(const json& j, const std::string& where) {
  if (j.is_number_unsigned()) return j.get<std::uint64_t>();
  if (j.is_number_integer() && j.get<std::int64_t>() >= 0) return std::uint64_t(j.get<std::int64_t>());
  fail(where, "expected an integer >= 0, got " + describe(j));
}
// A finite number (an integer or a float).
inline double number(const json& j, const std::string& where) {
  if (!j.is_number()) fail(where, "expected a number, got " + describe(j));
  const double v = j.get<double>();
  if (!std::isfinite(v)) fail(where, "expected a finite number, got " + describe(j));
  return v;
}

// A trial id: 1 to 20 decimal digits (the tuner numbers its trials), so never a path.
inline bool is_trial_id(const std::string& s) {
  if (s.empty() || s.size() > 20) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}
inline const std::string& trial_id(const json& j, const std::string& where) {
  const std::string& s = string(j, where);
  if (!is_trial_id(s)) fail(where, "\"" + (s.size() > 40 ? s.substr(0, 37) + "..." : s) + "\" is not a trial id (1 to 20 decimal digits)");
  return s;
}

}  // namespace state
}  // namespace ctnn::tuning
