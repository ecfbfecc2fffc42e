// ctnn/train/optimizer_state_file.hpp — the optimizer's state in a file of its own, to resume training.
//
// save_optimizer_state(m, opt, path) writes what fit keeps in m between calls for an optimizer
// of opt's type: its slots (Adam's moments, RMSprop's averages, ...), the update and step counts
// and the learning-rate scale (reduce_lr_on_plateau), after a magic, the format version (1), the
// network's fingerprint and text, the optimizer's name and slots per parameter, then a CRC-32;
// to a temporary file renamed over path. load_optimizer_state(m, opt, path) checks all of it
// against m and opt (every slot value finite) before it changes m; the next fit with opt
// continues as the saved run would have (Keras's model.save keeps the optimizer's variables
// and iterations; its save_weights does not). With save_weights / load_weights beside it, a
// job resumes bit for bit; in data-parallel training rank 0 alone may load both (the broadcast
// at train begin hands them to the others). Errors: io::weights_error naming the file and what
// differs. read_optimizer_state_file(path) reads such a file without the network and optimizer
// types (ctnn-inspect prints it), under the checks load_optimizer_state shares with it.
// A model file (model_file.hpp) holds such a file's bytes as a section, through the same pieces
// (detail::optimizer_state_bytes, parse_optimizer_state, check_optimizer_state, apply_optimizer_state).
// Format: docs/weights-files.md.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

#include <zlib.h>

#include "../io/atomic_file.hpp"
#include "../io/read_file.hpp"
#include "../io/weights.hpp"
#include "model.hpp"

namespace ctnn::io {

inline constexpr char optimizer_state_magic[8] = {'C', 'T', 'N', 'N', 'O', 'P', 'T', '\0'};
inline constexpr std::uint32_t optimizer_state_version = 1;

namespace detail {
// An optimizer state file's bytes (save_optimizer_state, and a model file's optimizer section);
// a model without opt's state fails through fail(what).
template <class M, class O, class Fail>
std::string optimizer_state_bytes(const M& m, const O& opt, Fail&& fail) {
  using Net = typename M::network;
  using W = typename M::variable_type;
  const optimizer_state& os = m.optimizer_state();
  if (os.kind != &ctnn::detail::optimizer_kind_tag<O>)
    fail(os.kind ? "the model's optimizer state belongs to another optimizer type than " + opt.name()
                 : "the model holds no optimizer state (it has not been trained yet)");
  const std::string arch = Net::spec_string(), name = opt.name();
  const auto view = m.host_region(role::optimizer_slot, true);
  std::string out;
  out.append(optimizer_state_magic, 8);
  put<std::uint32_t>(out, optimizer_state_version);
  put<std::uint64_t>(out, Net::fingerprint());
  put<std::uint32_t>(out, std::uint32_t(arch.size()));
  out += arch;
  put<std::uint32_t>(out, std::uint32_t(name.size()));
  out += name;
  put<std::uint32_t>(out, std::uint32_t(opt.slots_per_parameter()));
  put<std::uint64_t>(out, std::uint64_t(M::parameter_count));
  put<std::int64_t>(out, os.iterations);
  put<std::int64_t>(out, os.steps);
  put<double>(out, os.learning_rate_scale);
  put<std::uint32_t>(out, std::uint32_t(sizeof(W)));
  put<std::uint64_t>(out, std::uint64_t(view.size()));
  out.append(reinterpret_cast<const char*>(view.data()), view.size());
  const auto crc = std::uint32_t(::crc32(0L, reinterpret_cast<const Bytef*>(out.data()), uInt(out.size())));
  put<std::uint32_t>(out, crc);
  return out;
}
}  // namespace detail

template <class M, class O>
void save_optimizer_state(const M& m, const O& opt, const std::filesystem::path& path) {
  auto fail = [&](const std::string& what) { throw weights_error("save_optimizer_state", path, what); };
  write_file_atomically(path, detail::optimizer_state_bytes(m, opt, fail));
}

// An optimizer state file as read_optimizer_state_file found it.
struct optimizer_state_file {
  std::uint64_t fingerprint = 0;
  std::string architecture, optimizer;  // Net::spec_string(), the optimizer's name()
  std::uint32_t slots_per_parameter = 0;
  std::uint64_t parameters = 0;
  std::int64_t iterations = 0, steps = 0;
  double learning_rate_scale = 1;
  std::uint32_t element_bytes = 0;  // bytes per slot value
  std::uint64_t slot_bytes = 0;     // the slot region, per-layer 64-byte blocks included
  std::size_t slots_offset = 0;     // of the slot region in data
  std::vector<char> data;           // the file's bytes
};

namespace detail {
// The checks of read_optimizer_state_file on an optimizer state file's bytes f.data (a file, or
// a model file's optimizer section), failing through fail(what).
template <class Fail>
void parse_optimizer_state(optimizer_state_file& f, Fail&& fail) {
  const std::vector<char>& d = f.data;
  if (d.size() < 16) fail("truncated (" + std::to_string(d.size()) + " bytes, too short for a header)");
  if (std::memcmp(d.data(), optimizer_state_magic, 8) != 0) fail("not a ctnn optimizer state file (wrong magic)");
  std::uint32_t version, stored_crc;
  std::memcpy(&version, d.data() + 8, 4);
  if (version != optimizer_state_version)
    fail("format version " + std::to_string(version) + " is not supported (this build reads version " +
         std::to_string(optimizer_state_version) + ")");
  std::memcpy(&stored_crc, d.data() + d.size() - 4, 4);
  if (std::uint32_t(::crc32(0L, reinterpret_cast<const Bytef*>(d.data()), uInt(d.size() - 4))) != stored_crc)
    fail("checksum mismatch: the file is corrupt or truncated");
  reader r{d, 12, d.size() - 4};
  f.fingerprint = r.get<std::uint64_t>();
  const auto arch_len = r.get<std::uint32_t>();
  const char* arch = r.take(arch_len);
  const auto name_len = r.get<std::uint32_t>();
  const char* name = r.take(name_len);
  f.slots_per_parameter = r.get<std::uint32_t>();
  f.parameters = r.get<std::uint64_t>();
  f.iterations = r.get<std::int64_t>();
  f.steps = r.get<std::int64_t>();
  f.learning_rate_scale = r.get<double>();
  f.element_bytes = r.get<std::uint32_t>();
  f.slot_bytes = r.get<std::uint64_t>();
  f.slots_offset = r.at;
  r.take(f.slot_bytes);
  if (!r.ok) fail("truncated");
  if (r.at != r.end) fail(std::to_string(r.end - r.at) + " bytes after the slots");
  f.architecture.assign(arch, arch_len);
  f.optimizer.assign(name, name_len);
  if (f.iterations < 0 || f.steps < f.iterations)
    fail("the counts are inconsistent (iterations " + std::to_string(f.iterations) + ", steps " +
         std::to_string(f.steps) + ")");
  if (!std::isfinite(f.learning_rate_scale) || !(f.learning_rate_scale > 0))
    fail("the learning-rate scale " + std::to_string(f.learning_rate_scale) + " is not finite and > 0");
  if (f.element_bytes != 2 && f.element_bytes != 4 && f.element_bytes != 8)
    fail("its slots are " + std::to_string(f.element_bytes) + "-byte values (2, 4 or 8 expected)");
  if (f.slot_bytes % f.element_bytes != 0)
    fail("its slot region of " + std::to_string(f.slot_bytes) + " bytes is not a whole number of " +
         std::to_string(f.element_bytes) + "-byte values");
}
}  // namespace detail

// Reads an optimizer state file of any network and optimizer: the checks of load_optimizer_state
// that need neither type (size, magic, version, checksum, layout, the counts 0 <= iterations <=
// steps, a finite scale > 0, 2-, 4- or 8-byte values). operation names the caller in errors
// (weights_error naming the file and the problem).
CTNN_LAZY CTNN_DECL optimizer_state_file read_optimizer_state_file(const std::filesystem::path& path,
                                                         const std::string& operation = "read_optimizer_state_file")
#if CTNN_DEFINITIONS
{
  auto fail = [&](const std::string& what) { throw weights_error(operation, path, what); };
  optimizer_state_file f;
  f.data = read_file<std::vector<char>, weights_error>(path, operation);
  detail::parse_optimizer_state(f, fail);
  return f;
}
#else
;
#endif

namespace detail {
// The checks of load_optimizer_state of a read file f against m and opt; changes nothing.
template <class M, class O, class Fail>
void check_optimizer_state(const M& m, const O& opt, const optimizer_state_file& f, Fail&& fail) {
  using Net = typename M::network;
  using W = typename M::variable_type;
  if (f.fingerprint != Net::fingerprint() || f.architecture != Net::spec_string())
    fail("it was saved from the network '" + f.architecture + "' but this model is '" + Net::spec_string() + "'");
  if (f.optimizer != opt.name())
    fail("it holds the state of optimizer '" + f.optimizer + "', not of '" + opt.name() + "'");
  if (f.slots_per_parameter != opt.slots_per_parameter())
    fail("it holds " + std::to_string(f.slots_per_parameter) + " slots per parameter, but this " + opt.name() +
         " uses " + std::to_string(opt.slots_per_parameter()));
  if (f.parameters != M::parameter_count)
    fail("it is for " + std::to_string(f.parameters) + " parameters, but this model has " +
         std::to_string(M::parameter_count));
  if (f.element_bytes != sizeof(W))
    fail("its slots are " + std::to_string(f.element_bytes) + "-byte values, this model's " +
         std::to_string(sizeof(W)) + "-byte");
  const std::size_t slots = f.slots_per_parameter;
  const std::uint64_t bytes = f.slot_bytes;
  const char* values = f.data.data() + f.slots_offset;
  const std::size_t want = m.host_region(role::parameter, false).size() * slots;  // the plan's slot region
  if (bytes != want) fail("its slots take " + std::to_string(bytes) + " bytes, this model's " + std::to_string(want));
  for (std::size_t i = 0; i < bytes / sizeof(W); ++i) {
    W w;
    std::memcpy(&w, values + i * sizeof(W), sizeof(W));
    if (!std::isfinite(w)) fail("slot value [" + std::to_string(i) + "] is not finite");
  }
}

// Puts a checked file's slots and counts (check_optimizer_state) into m, its slot region sized for opt.
template <class M, class O>
void apply_optimizer_state(M& m, const O& opt, const optimizer_state_file& f) {
  ctnn::detail::training_access::prepare_optimizer(m, opt);  // the slot region, sized for opt
  auto view = m.host_region(role::optimizer_slot, false);
  std::memcpy(view.data(), f.data.data() + f.slots_offset, std::size_t(f.slot_bytes));
  view.commit();
  optimizer_state& os = ctnn::detail::training_access::optimizer_state(m);
  os.iterations = f.iterations;
  os.steps = f.steps;
  os.learning_rate_scale = f.learning_rate_scale;
}
}  // namespace detail

template <class M, class O>
void load_optimizer_state(M& m, const O& opt, const std::filesystem::path& path) {
  auto fail = [&](const std::string& what) { throw weights_error("load_optimizer_state", path, what); };
  const optimizer_state_file f = read_optimizer_state_file(path, "load_optimizer_state");
  detail::check_optimizer_state(m, opt, f, fail);
  detail::apply_optimizer_state(m, opt, f);
}

}  // namespace ctnn::io
