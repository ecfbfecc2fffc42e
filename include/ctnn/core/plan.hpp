// ctnn/core/plan.hpp — buffers a bound layer declares, and the typed memory plan.
//
// A bound layer lists `static constexpr std::array<buffer, n> buffers`: each with a role, an
// element kind, an extent (per sample for per-sample roles), a name and a logical shape.
// Declared roles: parameter (trainable; its gradient and optimizer slots follow
// automatically), state (saved, not trained), mask (saved, never updated: pruning),
// metadata (small saved values), cache (per-sample scratch from forward to backward),
// derived (values the layer computes from its variables, never saved: a stripped sparse
// layer's weights decoded to dense; the model rewrites them through the layer's
// `static void derive(layer_slot<T>)` wherever it refreshes the compute-type copies: after
// init, a load, any writable view of the variables, each optimizer update).
// The element kind is resolved by the precision policy: variable, compute, or a fixed type.
// The plan adds activations, the two delta buffers and the optimizer slots, and, where a
// layer computes in another type than its variables (mixed precision), compute_parameter,
// compute_gradient and converted. plan_layout<Net, P>(batch, slots) (Net::plan<P, B>) gives
// each role region's offset and size, 64-byte aligned per layer; it is constexpr. A buffer may ask
// for an alignment inside its region (buffer::aligned(a), a power of two up to 64: the int8 layers'
// packed kernels start on a cache line): the plan pads before it (layer_role_bytes, buffer_offset),
// the files never hold that padding (they hold logical tensors: io/weights.hpp).
// step_scalars is the step's scalars region (loss sum, loss scale, penalty, non-finite flag), kept by
// the model in the backend's memory beside the plan's allocation.
// docs/design.md, "The plan", has the table of roles and regions.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ctnn {

enum class role : std::uint8_t {
  parameter,
  gradient,
  state,
  mask,
  metadata,
  optimizer_slot,
  activation,
  delta,
  cache,
  compute_parameter,  // the parameters in the layer's compute type (mixed policies)
  compute_gradient,   // the gradients a layer writes in its compute type (mixed policies)
  converted,          // a layer's input converted to its compute type; the output widened to io
  derived             // values a layer derives from its variables (decoded weights); never in files
};
inline constexpr std::size_t role_count = 13;

constexpr std::string_view role_name(role r) {
  constexpr std::array<std::string_view, role_count> n{
      "parameter",  "gradient", "state", "mask",          "metadata",         "optimizer_slot",
      "activation", "delta",    "cache", "compute_parameter", "compute_gradient", "converted",
      "derived"};
  return n[std::size_t(r)];
}

enum class elem : std::uint8_t { variable, compute, f32, u8, u32, i8, i32 };  // i8, i32: int8 layers (quantized_dense)

struct buffer {
  role kind = role::parameter;
  elem type = elem::variable;
  std::size_t extent = 0;  // elements (per sample for role::cache)
  std::string_view name{};
  std::array<std::size_t, 4> dims{};  // logical shape (rank dims), e.g. {K, N} for a dense kernel
  std::size_t rank = 1;
  std::size_t align = 1;  // bytes: its offset inside its layer's region of its role is a multiple of it

  static constexpr buffer make(role r, elem e, std::string_view name, std::initializer_list<std::size_t> shape) {
    buffer b;
    b.kind = r;
    b.type = e;
    b.name = name;
    b.rank = 0;
    b.extent = 1;
    for (std::size_t d : shape) {
      b.dims[b.rank++] = d;
      b.extent *= d;
    }
    return b;
  }
  static constexpr buffer parameter(std::string_view name, std::initializer_list<std::size_t> shape) {
    return make(role::parameter, elem::variable, name, shape);
  }
  static constexpr buffer state(std::string_view name, std::initializer_list<std::size_t> shape) {
    return make(role::state, elem::variable, name, shape);
  }
  static constexpr buffer mask(std::string_view name, std::initializer_list<std::size_t> shape) {
    return make(role::mask, elem::u8, name, shape);
  }
  static constexpr buffer cache(std::string_view name, std::size_t per_sample, elem e = elem::compute) {
    return make(role::cache, e, name, {per_sample});
  }
  // This buffer at an offset inside its region that is a multiple of a bytes (a power of two up
  // to memory_alignment, 64: every layer's region starts on such a boundary). For state, mask,
  // metadata and derived buffers (byte-addressed regions).
  constexpr buffer aligned(std::size_t a) const {
    if (a == 0 || a > 64 || (a & (a - 1)) != 0)
      throw "buffer::aligned: the alignment is a power of two up to 64 (the plan's region alignment)";
    if (kind == role::parameter || kind == role::gradient || kind == role::cache)
      throw "buffer::aligned: parameters and caches are laid out by element counts; align state, mask, metadata "
            "or derived buffers";
    buffer b = *this;
    b.align = a;
    return b;
  }
};

inline constexpr std::array<buffer, 0> no_buffers{};

// Whether bound layer L's output is its input's memory, unchanged (flatten, reshape: only the
// shape differs, the layout is row-major): a layer says so with `static constexpr bool
// aliases_input = true`. A model gives such a layer no activation block and runs neither its
// forward nor its backward (dL/dx is dL/dy, in the same buffer). Its forward and backward
// still copy, for the composite layers that run it inside their own buffers.
template <class L>
inline constexpr bool aliases_input = requires { requires L::aliases_input; };

// Elements of one role a buffer list declares (per sample for caches).
template <std::size_t N>
constexpr std::size_t count_of(const std::array<buffer, N>& bs, role r) {
  std::size_t n = 0;
  for (const buffer& b : bs)
    if (b.kind == r) n += b.extent;
  return n;
}

// Element size of a kind under policy P.
template <class P>
constexpr std::size_t elem_bytes(elem e) {
  switch (e) {
    case elem::variable: return sizeof(typename P::variable_type);
    case elem::compute: return sizeof(typename P::compute_type);
    case elem::f32: return 4;
    case elem::u8: return 1;
    case elem::u32: return 4;
    case elem::i8: return 1;
    case elem::i32: return 4;
  }
  return 0;
}

constexpr std::size_t align_bytes(std::size_t n) noexcept { return (n + 63) / 64 * 64; }
// n rounded up to a multiple of a (a power of two; 1: n)
constexpr std::size_t align_up(std::size_t n, std::size_t a) noexcept { return (n + a - 1) & ~(a - 1); }

// Bytes of one layer's buffers of role r (one region per role, buffers in
// declaration order, each at the next multiple of its alignment (buffer::aligned;
// packed when 1), batch samples for per-sample roles).
template <class P, std::size_t N>
constexpr std::size_t layer_role_bytes(const std::array<buffer, N>& bs, role r, std::size_t batch = 1) {
  std::size_t n = 0;
  for (const buffer& b : bs)
    if (b.kind == r) n = align_up(n, b.align) + b.extent * elem_bytes<P>(b.type) * (r == role::cache ? batch : 1);
  return n;
}
// The same bytes without the alignment padding: what a file holds of them (Net::state_bytes).
template <class P, std::size_t N>
constexpr std::size_t layer_role_value_bytes(const std::array<buffer, N>& bs, role r) {
  std::size_t n = 0;
  for (const buffer& b : bs)
    if (b.kind == r) n += b.extent * elem_bytes<P>(b.type);
  return n;
}
// The largest alignment among one layer's buffers of role r (1 when none asks for one).
template <std::size_t N>
constexpr std::size_t role_alignment(const std::array<buffer, N>& bs, role r) {
  std::size_t a = 1;
  for (const buffer& b : bs)
    if (b.kind == r && b.align > a) a = b.align;
  return a;
}
// Byte offset of buffer i inside its layer's region of its role.
template <class P, std::size_t N>
constexpr std::size_t buffer_offset(const std::array<buffer, N>& bs, std::size_t i, std::size_t batch = 1) {
  std::size_t n = 0;
  for (std::size_t j = 0; j < i; ++j)
    if (bs[j].kind == bs[i].kind)
      n = align_up(n, bs[j].align) + bs[j].extent * elem_bytes<P>(bs[j].type) * (bs[j].kind == role::cache ? batch : 1);
  return align_up(n, bs[i].align);
}

// Where every region of a model lives, in bytes from the start of its one allocation.
struct plan_layout {
  std::array<std::size_t, role_count> offset{};
  std::array<std::size_t, role_count> size{};
  std::size_t total = 0;
  constexpr std::size_t bytes(role r) const { return size[std::size_t(r)]; }
  constexpr std::size_t at(role r) const { return offset[std::size_t(r)]; }
};

// What a model of a network needs, in bytes per role, at a batch size and an
// optimizer's slot count: Net::memory_plan(...) and Net::plan<P, B>::bytes(...).
struct memory_plan_bytes {
  std::size_t parameters = 0, gradients = 0, state = 0, masks = 0, metadata = 0, optimizer = 0;
  std::size_t activations = 0;  // layer outputs, the two backward buffers, caches and converted inputs
  std::size_t compute_copies = 0;  // the compute-type parameters and gradients (mixed policies; else 0)
  std::size_t derived = 0;  // values derived from the variables: stripped sparse layers' decoded weights
  std::size_t total = 0;
  static constexpr memory_plan_bytes of(const plan_layout& l) {
    memory_plan_bytes m;
    m.parameters = l.bytes(role::parameter);
    m.gradients = l.bytes(role::gradient);
    m.state = l.bytes(role::state);
    m.masks = l.bytes(role::mask);
    m.metadata = l.bytes(role::metadata);
    m.optimizer = l.bytes(role::optimizer_slot);
    m.activations = l.bytes(role::activation) + l.bytes(role::delta) + l.bytes(role::cache) + l.bytes(role::converted);
    m.compute_copies = l.bytes(role::compute_parameter) + l.bytes(role::compute_gradient);
    m.derived = l.bytes(role::derived);
    m.total = l.total;
    return m;
  }
};

// The scalars one training step shares between its phases, in the backend's
// memory: the step writes it before the forward pass (sums 0, the loss scale),
// the loss ops (has_loss_ops) and the penalty (ops<B>::add_penalty) accumulate
// into it, and the step reads it once after the backward pass (train/step.hpp).
// Plain data, 32 bytes, the same on every backend.
struct step_scalars {
  double loss_sum = 0;           // sum of the per-sample losses (unscaled)
  double loss_scale = 1;         // dL/dy is multiplied by it (read by the loss ops)
  double penalty = 0;            // the regularizers' penalty (ops<B>::add_penalty)
  std::uint32_t non_finite = 0;  // nonzero when a loss sum added was NaN or infinite
  std::uint32_t reserved = 0;
};
inline constexpr std::size_t step_scalars_bytes = align_bytes(sizeof(step_scalars));

// One declared buffer of one layer, as the model holds it.
struct variable_ref {
  std::size_t layer = 0;        // 0-based position among the layers (messages print layer + 1)
  std::string_view name;        // the buffer's name ("kernel", "moving_mean", ...)
  role kind = role::parameter;  // parameter, state, mask or metadata
  elem type = elem::variable;
  std::size_t element_bytes = 0;
  std::array<std::size_t, 4> dims{};
  std::size_t rank = 0;
  std::size_t extent = 0;       // elements
  std::byte* data = nullptr;    // extent * element_bytes bytes in the model's memory
  std::size_t offset = 0;       // byte offset inside its role's region (a parameter's gradient and
                                // slots sit at the same offset of theirs)
  // For a metadata buffer whose layer declares
  //   static std::string check_metadata(std::string_view name, const std::byte* bytes);
  // that function: given the buffer's bytes as a file holds them (any alignment), it returns ""
  // when the kernels can run on them, else what is wrong (an index past its range, ...).
  // load_weights (io/weights.hpp) refuses a file when it returns a reason. Null otherwise.
  std::string (*check)(std::string_view name, const std::byte* bytes) = nullptr;
  // For a state buffer whose layer declares
  //   static std::string check_state(std::string_view name, const std::byte* bytes,
  //                                  const std::byte* const* layer_state, std::size_t n);
  // that function: as check, where layer_state[i] (i < n) are the file's bytes of the layer's
  // state buffers read so far, in declaration order (this one last), so that values that must
  // agree with each other can be checked (an int8 kernel and its row sums). Null otherwise.
  std::string (*check_state)(std::string_view name, const std::byte* bytes, const std::byte* const* layer_state,
                             std::size_t n) = nullptr;
  // Its layer reads the previous layer's int8 output (input_element std::int8_t: quantization::int8_io):
  // load_weights checks that the layer's input_scale and input_zero_point are that layer's output ones.
  bool int8_input = false;
};

namespace detail {
// The variable of layer `layer` (0-based) named `name` among a model's variables (model::with_variables'
// list; nullptr when there is none): what strip_pruning and strip_to read. (No variable_list(m) that
// returns the list: on a device, the refs would outlive the host view they point into.)
inline const variable_ref* find_variable(const std::vector<variable_ref>& vs, std::size_t layer, std::string_view name) {
  for (const auto& v : vs)
    if (v.layer == layer && v.name == name) return &v;
  return nullptr;
}
}  // namespace detail

}  // namespace ctnn
