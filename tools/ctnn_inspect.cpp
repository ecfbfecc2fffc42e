// ctnn-inspect: prints what a ctnn weights file (io/weights.hpp, .ctnn), optimizer state file
// (train/optimizer_state_file.hpp) or model file (train/model_file.hpp) holds, without the
// network type: the format version, the network's text and fingerprint, each tensor's layer,
// role, name, dtype, shape, elements and bytes, and the totals; for a model file first its
// description (policy, per layer: name, shapes, counts) and training configuration, and last its
// optimizer state. --stats adds each tensor's min, max, mean and standard deviation, --values
// its values. The files are read by the library's readers (read_weights_file,
// read_optimizer_state_file, read_model_file), under the same checks as load_weights,
// load_optimizer_state and load_model.
// A file they refuse: "ctnn-inspect: <what is wrong, naming the file>" and exit code 1; a
// wrong command line: usage and exit code 2. docs/weights-files.md.
#include <ctnn/io/weights.hpp>
#include <ctnn/train/model_file.hpp>
#include <ctnn/train/optimizer_state_file.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

namespace {

std::string number(double v) { return ctnn::detail::format_number(v); }
// A value of a tensor of at most 32-bit floats, in float's shortest text (0.1, not 0.10000000149011612).
std::string number(double v, bool narrow) { return narrow ? ctnn::detail::format_number(float(v)) : number(v); }

std::string hex(std::uint64_t v) {
  char b[19];
  std::snprintf(b, sizeof b, "0x%016llx", static_cast<unsigned long long>(v));
  return b;
}

// n values read by value(i): min, max, mean, std (population, as NumPy's std) on one line.
template <class Value>
void print_stats(std::size_t n, Value value, bool narrow) {
  if (n == 0) {
    std::cout << "    (no values)\n";
    return;
  }
  double lo = value(0), hi = lo, sum = 0;
  std::size_t nan = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = value(i);
    if (std::isnan(v)) {
      ++nan;
      continue;
    }
    lo = std::isnan(lo) || v < lo ? v : lo;
    hi = std::isnan(hi) || v > hi ? v : hi;
    sum += v;
  }
  const std::size_t m = n - nan;
  const double mean = m ? sum / double(m) : std::nan("");
  double sq = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (const double v = value(i); !std::isnan(v)) sq += (v - mean) * (v - mean);
  std::cout << "    min " << number(lo, narrow) << "  max " << number(hi, narrow) << "  mean " << number(mean, narrow)
            << "  std " << number(m ? std::sqrt(sq / double(m)) : std::nan(""), narrow);
  if (nan) std::cout << "  NaN " << nan;
  std::cout << '\n';
}

template <class Value>
void print_values(std::size_t n, Value value, bool narrow) {
  for (std::size_t i = 0; i < n; i += 8) {
    std::cout << "    [" << i << "]";
    for (std::size_t j = i; j < n && j < i + 8; ++j) std::cout << ' ' << number(value(j), narrow);
    std::cout << '\n';
  }
}

struct options {
  bool stats = false, values = false;
};

void print_tensors(const ctnn::io::weights_file& f, options o);

void inspect_weights(const std::string& path, options o) {
  const ctnn::io::weights_file f = ctnn::io::read_weights_file(path);
  std::cout << "file: " << path << " (" << f.data.size() << " bytes)\n"
            << "format: ctnn weights, version " << f.version << '\n'
            << "network: " << f.architecture << '\n'
            << "fingerprint: " << hex(f.fingerprint) << '\n';
  print_tensors(f, o);
}

// A weights file's tensors (a file, or a model file's weights section) and the totals.
void print_tensors(const ctnn::io::weights_file& f, options o) {
  if (f.version == 1) {
    std::cout << "version-1 padded arena: " << f.parameter_values << " parameter and " << f.state_values
              << " state values of " << f.element_bytes << " bytes (no per-tensor layout)\n";
    return;
  }
  std::cout << "tensors: " << f.tensors.size() << '\n';
  std::size_t elements = 0, bytes = 0;
  for (const auto& t : f.tensors) {
    std::cout << "  layer " << std::uint64_t(t.layer) + 1 << ' ' << ctnn::role_name(t.kind) << " '" << t.name << "' "
              << t.dtype_name() << ' ' << t.shape() << ' ' << t.elements << " elements " << t.bytes << " bytes\n";
    auto value = [&](std::size_t i) { return t.value(i, f.data); };
    namespace d = ctnn::io::detail;
    const bool narrow = t.dtype == d::f32 || t.dtype == d::f16 || t.dtype == d::bf16;  // integers stay exact
    if (o.stats) print_stats(t.elements, value, narrow);
    if (o.values) print_values(t.elements, value, narrow);
    elements += t.elements;
    bytes += t.bytes;
  }
  std::cout << "total: " << f.tensors.size() << " tensors, " << elements << " elements, " << bytes << " bytes\n";
}

void print_optimizer_state(const ctnn::io::optimizer_state_file& f, options o);

void inspect_optimizer_state(const std::string& path, options o) {
  const ctnn::io::optimizer_state_file f = ctnn::io::read_optimizer_state_file(path);
  std::cout << "file: " << path << " (" << f.data.size() << " bytes)\n"
            << "format: ctnn optimizer state, version " << ctnn::io::optimizer_state_version << '\n'
            << "network: " << f.architecture << '\n'
            << "fingerprint: " << hex(f.fingerprint) << '\n';
  print_optimizer_state(f, o);
}

// An optimizer state file's counts and slots (a file, or a model file's optimizer section).
void print_optimizer_state(const ctnn::io::optimizer_state_file& f, options o) {
  std::cout << "optimizer: " << f.optimizer << ", " << f.slots_per_parameter << " slots per parameter, "
            << f.parameters << " parameters\n"
            << "iterations: " << f.iterations << ", steps: " << f.steps
            << ", learning-rate scale: " << number(f.learning_rate_scale) << '\n';
  const std::size_t n = f.slot_bytes / f.element_bytes;
  std::cout << "slots: " << n << " values of " << f.element_bytes << " bytes, " << f.slot_bytes
            << " bytes (per-layer 64-byte blocks included)\n";
  // 2-byte slots are float16 or bfloat16: the file does not say which, so they are not decoded.
  if ((o.stats || o.values) && f.element_bytes == 2) {
    std::cout << "    (2-byte slot values: float16 or bfloat16, not decoded)\n";
    return;
  }
  const std::uint8_t dtype = f.element_bytes == 8 ? ctnn::io::detail::f64 : ctnn::io::detail::f32;
  auto value = [&](std::size_t i) {
    return ctnn::io::detail::dtype_number(f.data.data() + f.slots_offset + i * f.element_bytes, dtype);
  };
  if (o.stats) print_stats(n, value, f.element_bytes == 4);
  if (o.values) print_values(n, value, f.element_bytes == 4);
}

std::string dims(const std::vector<std::uint64_t>& d) {
  std::string s = "(None";
  for (auto v : d) s += ", " + std::to_string(v);
  return s + ")";
}

void inspect_model(const std::string& path, options o) {
  const ctnn::io::model_file f = ctnn::io::read_model_file(path);
  std::cout << "file: " << path << " (" << f.bytes << " bytes)\n"
            << "format: ctnn model, version " << f.version << '\n'
            << "network: " << f.architecture << '\n'
            << "fingerprint: " << hex(f.fingerprint) << '\n'
            << "policy: " << f.policy << '\n'
            << "layers: " << f.layers.size() << '\n';
  for (std::size_t i = 0; i < f.layers.size(); ++i) {
    const ctnn::io::model_file_layer& l = f.layers[i];
    std::cout << "  layer " << i + 1 << ' ' << l.name << " (" << l.kind << ") " << dims(l.input) << " -> "
              << dims(l.output) << ' ' << l.parameters << " parameters " << l.states << " states\n";
  }
  std::cout << "training configuration: optimizer " << (f.optimizer.empty() ? "(none)" : f.optimizer);
  for (const auto& [key, value] : f.hyperparameters) std::cout << ", " << key << ' ' << number(value);
  std::cout << "; loss " << (f.training.loss.empty() ? "(none)" : f.training.loss) << "; metrics";
  if (f.training.metrics.empty()) std::cout << " (none)";
  for (const auto& m : f.training.metrics) std::cout << ' ' << m;
  std::cout << "\nweights: version " << f.weights.version << '\n';
  print_tensors(f.weights, o);
  if (f.optimizer_state) print_optimizer_state(*f.optimizer_state, o);
}

int usage() {
  std::cerr << "usage: ctnn-inspect [--stats] [--values] FILE\n"
               "  prints a ctnn weights, optimizer state or model file's header and tensors\n"
               "  --stats   each tensor's min, max, mean and standard deviation\n"
               "  --values  each tensor's values\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--stats")
      o.stats = true;
    else if (a == "--values")
      o.values = true;
    else if (a == "--help" || a == "-h" || !path.empty() || (a.starts_with("--") && a.size() > 2))
      return usage();
    else
      path = a;
  }
  if (path.empty()) return usage();
  try {
    char magic[8] = {};
    std::ifstream(path, std::ios::binary).read(magic, 8);  // which reader; each checks the file itself
    if (std::memcmp(magic, ctnn::io::optimizer_state_magic, 8) == 0)
      inspect_optimizer_state(path, o);
    else if (std::memcmp(magic, ctnn::io::model_magic, 8) == 0)
      inspect_model(path, o);
    else
      inspect_weights(path, o);
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "ctnn-inspect: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
