// ctnn/train/model_file.hpp — the whole model in one file: save_model / load_model (Keras's model.save).
//
// save_model(m, opt, path, config = {}) writes ONE file of four sections, each with its own
// CRC-32: the architecture's description (per layer: name, kind, input and output shapes,
// parameter and state counts; the precision policy; the network's text and fingerprint), the
// training configuration (the optimizer's name and hyperparameters: learning_rate, then its
// config(); config.loss and config.metrics, as Keras's compile_config), the weights (a weights
// file's bytes, io/weights.hpp) and the optimizer's state (an optimizer state file's bytes,
// optimizer_state_file.hpp); to a temporary file renamed over path. save_model(m, path, config)
// leaves the optimizer out (a model never trained). load_model(m, opt, path) checks the whole
// file against m's type and opt before it changes m (which layer differs: its index, kind and
// shapes; the policy; the optimizer's name and hyperparameters; every tensor; the slots), then
// loads the weights and the optimizer's state, so that fit(m, loss, opt, ...) continues the
// saved run; it returns the training configuration. load_model(m, path) loads the weights only
// (Keras's compile=False), load_model<Net, Precision, Backend>(path) returns a new model.
// read_model_file(path) reads any model file without the types (ctnn-inspect). Errors:
// io::weights_error naming the file and the problem. Format: docs/weights-files.md.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <zlib.h>

#include "../core/plan.hpp"
#include "../core/precision.hpp"
#include "../io/atomic_file.hpp"
#include "../io/read_file.hpp"
#include "../io/weights.hpp"
#include "../optimizers/base.hpp"
#include "model.hpp"
#include "optimizer_state_file.hpp"

namespace ctnn::io {

inline constexpr char model_magic[8] = {'C', 'T', 'N', 'N', 'M', 'D', 'L', '\0'};
inline constexpr std::uint32_t model_version = 1;

// What compile() holds in Keras besides the optimizer: the loss's and the metrics' names. A
// model file keeps them; load_model returns them (ctnn's fit takes the loss per call).
struct training_config {
  std::string loss;
  std::vector<std::string> metrics;
  bool operator==(const training_config&) const = default;
};

// One layer of a model file's description.
struct model_file_layer {
  std::string name;  // the spec, as Net::spec_string() spells it: "dense<4, relu>"
  std::string kind;  // the name up to its first '<': "dense"
  std::vector<std::uint64_t> input, output;  // one sample's shapes
  std::uint64_t parameters = 0, states = 0;
  bool operator==(const model_file_layer&) const = default;
};

// A whole model file as read_model_file found it.
struct model_file {
  std::uint32_t version = 0;
  std::uint64_t fingerprint = 0;
  std::string architecture, policy;  // Net::spec_string(), the precision policy's name ("mixed_float16")
  std::vector<model_file_layer> layers;
  std::string optimizer;                // its name(); empty when saved without one
  ctnn::optimizer_config hyperparameters;  // learning_rate, then the optimizer's config()
  training_config training;
  weights_file weights;                 // the weights section, as read_weights_file reads a file
  std::optional<optimizer_state_file> optimizer_state;  // the optimizer section, when there is one
  std::size_t bytes = 0;                // the file's size
};

// The hyperparameters a model file keeps for opt: learning_rate (its schedule's rate at update
// 0), then opt.config() when it has one.
template <class O>
optimizer_config optimizer_config_of(const O& opt) {
  optimizer_config c{{"learning_rate", opt.learning_rate(0)}};
  if constexpr (requires { opt.config(); })
    for (const auto& kv : opt.config()) c.emplace_back(kv.first, kv.second);
  return c;
}

namespace detail {
inline constexpr char model_tags[4][5] = {"DESC", "CONF", "WGHT", "OPTM"};

inline void put_text(std::string& out, const std::string& s) {
  put<std::uint32_t>(out, std::uint32_t(s.size()));
  out += s;
}
inline bool get_text(reader& r, std::string& s) {
  const auto n = r.get<std::uint32_t>();
  const char* p = r.take(n);
  if (!r.ok) return false;
  s.assign(p, n);
  return true;
}
// A section: its tag, u64 length, the bytes, and a CRC-32 of the three.
inline void put_section(std::string& out, const char* tag, const std::string& bytes) {
  const std::size_t at = out.size();
  out.append(tag, 4);
  put<std::uint64_t>(out, std::uint64_t(bytes.size()));
  out += bytes;
  put<std::uint32_t>(out, std::uint32_t(::crc32(0L, reinterpret_cast<const Bytef*>(out.data() + at), uInt(out.size() - at))));
}
inline std::string dims_text(const std::vector<std::uint64_t>& d) {
  std::string s = "(None";
  for (auto v : d) s += ", " + std::to_string(v);
  return s + ")";
}
inline std::string layer_text(const model_file_layer& l) {
  return l.name + ", input " + dims_text(l.input) + ", output " + dims_text(l.output) + ", " +
         std::to_string(l.parameters) + " parameters, " + std::to_string(l.states) + " states";
}
// A tag as text: printable characters, others as '?'.
inline std::string tag_text(const char* p) {
  std::string s(p, 4);
  for (char& c : s)
    if (c < 0x20 || c > 0x7e) c = '?';
  return s;
}

// The description of model type M's layers (its binding under its policy and backend).
template <class M>
std::vector<model_file_layer> describe_layers() {
  std::vector<model_file_layer> out;
  [&]<class... L>(std::tuple<L...>*) {
    (out.push_back({L::name(), L::name().substr(0, L::name().find('<')),
                    std::vector<std::uint64_t>(L::in_shape::dims.begin(), L::in_shape::dims.end()),
                    std::vector<std::uint64_t>(L::out_shape::dims.begin(), L::out_shape::dims.end()),
                    std::uint64_t(ctnn::count_of(L::buffers, role::parameter)),
                    std::uint64_t(ctnn::count_of(L::buffers, role::state))}),
     ...);
  }(static_cast<typename M::layers*>(nullptr));
  return out;
}

template <class M>
std::string description_bytes() {
  using Net = typename M::network;
  std::string out;
  put<std::uint64_t>(out, Net::fingerprint());
  put_text(out, Net::spec_string());
  put_text(out, M::policy::name());
  const auto layers = describe_layers<M>();
  put<std::uint32_t>(out, std::uint32_t(layers.size()));
  for (const model_file_layer& l : layers) {
    put_text(out, l.name);
    for (const auto* dims : {&l.input, &l.output}) {
      put<std::uint8_t>(out, std::uint8_t(dims->size()));
      for (auto d : *dims) put<std::uint64_t>(out, d);
    }
    put<std::uint64_t>(out, l.parameters);
    put<std::uint64_t>(out, l.states);
  }
  return out;
}

inline std::string config_bytes(const std::string& optimizer, const optimizer_config& c, const training_config& t) {
  std::string out;
  put_text(out, optimizer);
  put<std::uint32_t>(out, std::uint32_t(c.size()));
  for (const auto& [key, value] : c) {
    put_text(out, key);
    put<double>(out, value);
  }
  put_text(out, t.loss);
  put<std::uint32_t>(out, std::uint32_t(t.metrics.size()));
  for (const auto& m : t.metrics) put_text(out, m);
  return out;
}

template <class M>
std::string model_bytes(const M& m, const std::string& optimizer, const optimizer_config& c, const training_config& t,
                        const std::string* optimizer_state) {
  std::string out;
  out.append(model_magic, 8);
  put<std::uint32_t>(out, model_version);
  put<std::uint32_t>(out, optimizer_state ? 4 : 3);
  put_section(out, model_tags[0], description_bytes<M>());
  put_section(out, model_tags[1], config_bytes(optimizer, c, t));
  put_section(out, model_tags[2], weights_bytes(m));
  if (optimizer_state) put_section(out, model_tags[3], *optimizer_state);
  return out;
}

// The description section [at, end) of d into f; false where it is malformed.
CTNN_LAZY CTNN_DECL bool read_description(const std::vector<char>& d, std::size_t at, std::size_t end, model_file& f,
                                std::string& why)
#if CTNN_DEFINITIONS
{
  reader r{d, at, end};
  f.fingerprint = r.get<std::uint64_t>();
  if (!get_text(r, f.architecture) || !get_text(r, f.policy)) return (why = "truncated"), false;
  const auto n = r.get<std::uint32_t>();
  if (!r.ok || n > (r.end - r.at) / 22) return (why = "truncated (its layer count " + std::to_string(n) + ")"), false;
  for (std::uint32_t i = 0; i < n; ++i) {
    model_file_layer l;
    if (!get_text(r, l.name)) return (why = "truncated inside layer " + std::to_string(i + 1)), false;
    l.kind = l.name.substr(0, l.name.find('<'));
    for (auto* dims : {&l.input, &l.output}) {
      const auto rank = r.get<std::uint8_t>();
      for (std::size_t k = 0; k < rank && r.ok; ++k) dims->push_back(r.get<std::uint64_t>());
    }
    l.parameters = r.get<std::uint64_t>();
    l.states = r.get<std::uint64_t>();
    if (!r.ok) return (why = "truncated inside layer " + std::to_string(i + 1) + " ('" + l.name + "')"), false;
    f.layers.push_back(std::move(l));
  }
  if (r.at != r.end) return (why = std::to_string(r.end - r.at) + " bytes after the last layer"), false;
  return true;
}
#else
;
#endif

CTNN_LAZY CTNN_DECL bool read_config(const std::vector<char>& d, std::size_t at, std::size_t end, model_file& f, std::string& why)
#if CTNN_DEFINITIONS
{
  reader r{d, at, end};
  if (!get_text(r, f.optimizer)) return (why = "truncated"), false;
  const auto n = r.get<std::uint32_t>();
  if (!r.ok || n > (r.end - r.at) / 12) return (why = "truncated (its hyperparameter count " + std::to_string(n) + ")"), false;
  for (std::uint32_t i = 0; i < n; ++i) {
    std::string key;
    if (!get_text(r, key)) return (why = "truncated inside hyperparameter " + std::to_string(i + 1)), false;
    const auto value = r.get<double>();
    if (!r.ok) return (why = "truncated inside hyperparameter '" + key + "'"), false;
    f.hyperparameters.emplace_back(std::move(key), value);
  }
  const bool loss = get_text(r, f.training.loss);
  const auto metrics = r.get<std::uint32_t>();
  if (!loss || !r.ok || metrics > (r.end - r.at) / 4) return (why = "truncated after the hyperparameters"), false;
  for (std::uint32_t i = 0; i < metrics; ++i) {
    std::string name;
    if (!get_text(r, name)) return (why = "truncated inside metric " + std::to_string(i + 1)), false;
    f.training.metrics.push_back(std::move(name));
  }
  if (r.at != r.end) return (why = std::to_string(r.end - r.at) + " bytes after the metrics"), false;
  return true;
}
#else
;
#endif
}  // namespace detail

// Reads a model file of any network and optimizer: size, magic, version, the sections (order,
// lengths, each CRC-32), the description and configuration, the weights and optimizer sections
// under read_weights_file's and read_optimizer_state_file's checks, and that all sections name
// the same network and optimizer. operation names the caller in errors (weights_error naming
// the file and the problem).
CTNN_LAZY CTNN_DECL model_file read_model_file(const std::filesystem::path& path, const std::string& operation = "read_model_file")
#if CTNN_DEFINITIONS
{
  auto fail = [&](const std::string& what) { throw weights_error(operation, path, what); };
  const auto d = read_file<std::vector<char>, weights_error>(path, operation);
  model_file f;
  f.bytes = d.size();
  if (d.size() < 16) fail("truncated (" + std::to_string(d.size()) + " bytes, too short for a header)");
  if (std::memcmp(d.data(), model_magic, 8) != 0) fail("not a ctnn model file (wrong magic)");
  std::uint32_t count;
  std::memcpy(&f.version, d.data() + 8, 4);
  std::memcpy(&count, d.data() + 12, 4);
  if (f.version != model_version)
    fail("format version " + std::to_string(f.version) + " is not supported (this build reads version " +
         std::to_string(model_version) + ")");
  if (count != 3 && count != 4) fail("it holds " + std::to_string(count) + " sections (3 or 4 expected)");
  std::size_t at = 16;
  for (std::uint32_t k = 0; k < count; ++k) {
    const std::string which = "section " + std::to_string(k + 1) + " of " + std::to_string(count);
    if (d.size() - at < 12) fail("truncated inside the header of " + which);
    const std::string tag = detail::tag_text(d.data() + at);
    if (std::memcmp(d.data() + at, detail::model_tags[k], 4) != 0)
      fail(which + " is '" + tag + "', expected '" + detail::model_tags[k] + "'");
    std::uint64_t len;
    std::memcpy(&len, d.data() + at + 4, 8);
    const std::string where = which + " ('" + tag + "')";
    if (len > d.size() - at - 12 || d.size() - at - 12 - len < 4)
      fail("truncated inside " + where + " of " + std::to_string(len) + " bytes");
    const std::size_t begin = at + 12, end = begin + std::size_t(len);
    std::uint32_t stored;
    std::memcpy(&stored, d.data() + end, 4);
    if (std::uint32_t(::crc32(0L, reinterpret_cast<const Bytef*>(d.data() + at), uInt(end - at))) != stored)
      fail("checksum mismatch in " + where + ": the file is corrupt");
    std::string why;
    auto section_fail = [&](const std::string& what) { fail("its " + std::string(k == 2 ? "weights" : "optimizer state") + " section: " + what); };
    if (k == 0 && !detail::read_description(d, begin, end, f, why)) fail("its description section: " + why);
    if (k == 1 && !detail::read_config(d, begin, end, f, why)) fail("its configuration section: " + why);
    if (k == 2) {
      f.weights.data.assign(d.begin() + std::ptrdiff_t(begin), d.begin() + std::ptrdiff_t(end));
      detail::parse_weights(f.weights, section_fail);
      if (f.weights.version != weights_version)
        section_fail("a version-" + std::to_string(f.weights.version) + " weights file (version " +
                     std::to_string(weights_version) + " expected)");
    }
    if (k == 3) {
      optimizer_state_file o;
      o.data.assign(d.begin() + std::ptrdiff_t(begin), d.begin() + std::ptrdiff_t(end));
      detail::parse_optimizer_state(o, section_fail);
      f.optimizer_state = std::move(o);
    }
    at = end + 4;
  }
  if (at != d.size()) fail("corrupt: " + std::to_string(d.size() - at) + " bytes follow the last section");
  // The sections agree: one network, one optimizer.
  if (f.weights.fingerprint != f.fingerprint || f.weights.architecture != f.architecture)
    fail("its weights are of the network '" + f.weights.architecture + "' but its description is of '" +
         f.architecture + "'");
  if (f.optimizer_state && (f.optimizer_state->fingerprint != f.fingerprint ||
                            f.optimizer_state->architecture != f.architecture))
    fail("its optimizer state is of the network '" + f.optimizer_state->architecture +
         "' but its description is of '" + f.architecture + "'");
  const std::string held = f.optimizer_state ? f.optimizer_state->optimizer : "";
  if (held != f.optimizer)
    fail("its configuration names the optimizer '" + f.optimizer + "' but its optimizer section holds '" + held + "'");
  return f;
}
#else
;
#endif

// The whole model: description, training configuration, weights and opt's state (m must hold
// it: trained by fit with opt, or loaded). Throws weights_error naming the file.
template <SavableModel M, class O>
  requires requires(const O& o) {
    o.name();
    o.slots_per_parameter();
  }
void save_model(const M& m, const O& opt, const std::filesystem::path& path, const training_config& config = {}) {
  auto fail = [&](const std::string& what) { throw weights_error("save_model", path, what); };
  const std::string state = detail::optimizer_state_bytes(m, opt, fail);
  write_file_atomically(path, detail::model_bytes(m, opt.name(), optimizer_config_of(opt), config, &state));
}

// The model without an optimizer (Keras's include_optimizer=False): description, configuration
// (config's loss and metrics), weights.
template <SavableModel M>
void save_model(const M& m, const std::filesystem::path& path, const training_config& config = {}) {
  write_file_atomically(path, detail::model_bytes(m, "", {}, config, nullptr));
}

namespace detail {
// The checks of load_model against M's type: the description's layers, policy and network.
template <class M, class Fail>
void check_description(const model_file& f, Fail&& fail) {
  using Net = typename M::network;
  const auto want = describe_layers<M>();
  for (std::size_t i = 0; i < std::max(want.size(), f.layers.size()); ++i) {
    const std::string at = "layer " + std::to_string(i + 1);
    if (i >= f.layers.size())
      fail("the file's network has " + std::to_string(f.layers.size()) + " layers, this model's " +
           std::to_string(want.size()) + ": " + at + " (" + want[i].kind + ") is not in the file");
    if (i >= want.size())
      fail("the file's network has " + std::to_string(f.layers.size()) + " layers, this model's " +
           std::to_string(want.size()) + ": " + at + " of the file (" + f.layers[i].kind + ") is not in this model");
    if (!(f.layers[i] == want[i]))
      fail(at + " (" + want[i].kind + ") differs: the file's is " + layer_text(f.layers[i]) + "; this model's is " +
           layer_text(want[i]));
  }
  if (f.policy != M::policy::name())
    fail("it was saved under the precision policy '" + f.policy + "' but this model's is '" + M::policy::name() + "'");
  if (f.fingerprint != Net::fingerprint() || f.architecture != Net::spec_string())
    fail("it was saved from the network '" + f.architecture + "' but this model is '" + Net::spec_string() + "'");
}

inline std::string config_text(const optimizer_config& c) {
  std::string s;
  for (const auto& [key, value] : c) s += (s.empty() ? "" : ", ") + key + " " + ctnn::detail::format_number(value);
  return s;
}
}  // namespace detail

// Loads a model file saved with an optimizer into m (a model of the same network and policy)
// and opt's state (an optimizer of the same type and hyperparameters); returns the training
// configuration. Checks everything first: a refused file leaves m as it was.
template <SavableModel M, class O>
  requires requires(const O& o) {
    o.name();
    o.slots_per_parameter();
  }
training_config load_model(M& m, const O& opt, const std::filesystem::path& path) {
  auto fail = [&](const std::string& what) { throw weights_error("load_model", path, what); };
  const model_file f = read_model_file(path, "load_model");
  detail::check_description<M>(f, fail);
  if (!f.optimizer_state)
    fail("it was saved without an optimizer's state (load it with load_model(m, path), the weights only)");
  if (f.optimizer != opt.name()) fail("it holds the state of optimizer '" + f.optimizer + "', not of '" + opt.name() + "'");
  if (const optimizer_config want = optimizer_config_of(opt); f.hyperparameters != want)
    fail("its " + f.optimizer + " has " + detail::config_text(f.hyperparameters) + "; this one has " +
         detail::config_text(want));
  auto weights_fail = [&](const std::string& what) { fail("its weights section: " + what); };
  auto state_fail = [&](const std::string& what) { fail("its optimizer state section: " + what); };
  const auto copies = detail::check_weights(m, f.weights.data, weights_fail);
  detail::check_optimizer_state(m, opt, *f.optimizer_state, state_fail);
  detail::apply_weights(m, copies);
  detail::apply_optimizer_state(m, opt, *f.optimizer_state);
  return f.training;
}

// Loads a model file's weights into m (Keras's compile=False: the optimizer section, if any, is
// left alone); returns the training configuration. A refused file leaves m as it was.
template <SavableModel M>
training_config load_model(M& m, const std::filesystem::path& path) {
  auto fail = [&](const std::string& what) { throw weights_error("load_model", path, what); };
  const model_file f = read_model_file(path, "load_model");
  detail::check_description<M>(f, fail);
  auto weights_fail = [&](const std::string& what) { fail("its weights section: " + what); };
  detail::apply_weights(m, detail::check_weights(m, f.weights.data, weights_fail));
  return f.training;
}

// A new model of network Net (Precision, Backend as make_model) holding a model file's weights.
template <Network Net, class Precision = float, class Backend = cpu<>>
model<Net, Precision, Backend> load_model(const std::filesystem::path& path) {
  auto m = make_model<Net, Precision, Backend>(0);
  load_model(m, path);
  return m;
}

}  // namespace ctnn::io
