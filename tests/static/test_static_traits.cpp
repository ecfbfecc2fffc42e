// The per-type traits that replaced closed lists: a precision policy's name
// made from its types (core/precision.hpp), and keeps_channels, declared by
// each layer that keeps every channel apart (pruning/strip.hpp reads it).
#include <string_view>

#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>

namespace {
using namespace ctnn;

static_assert(std::string_view(precision::name_of<precision::float32>()) == "float32");
static_assert(std::string_view(precision::name_of<precision::float64>()) == "float64");
static_assert(std::string_view(precision::name_of<precision::mixed_float16>()) == "mixed_float16");
static_assert(std::string_view(precision::name_of<precision::mixed_bfloat16>()) == "mixed_bfloat16");
static_assert(std::string_view(precision::name_of<precision::float16>()) == "float16");
static_assert(std::string_view(precision::policy<bfloat16_t>::name()) == "bfloat16");
static_assert(std::string_view(precision::policy<float, double>::name()) == "custom");
static_assert(std::string_view(precision::policy<int>::name()) == "custom");

template <class Spec, class In>
using bound = typename Spec::template bind<In, precision::float32, cpu<>>;
using img = shape<8, 8, 4>;
static_assert(pruning::detail::keeps_channels_v<bound<max_pool2d<2>, img>>);
static_assert(pruning::detail::keeps_channels_v<bound<average_pool2d<2>, img>>);
static_assert(pruning::detail::keeps_channels_v<bound<dropout<0.5f>, img>>);
static_assert(pruning::detail::keeps_channels_v<bound<dynamic_dropout, img>>);
static_assert(pruning::detail::keeps_channels_v<bound<global_average_pool, img>>);
static_assert(pruning::detail::keeps_channels_v<bound<flatten, img>>);
static_assert(!pruning::detail::keeps_channels_v<bound<reshape<16, 16>, img>>);
static_assert(!pruning::detail::keeps_channels_v<bound<dense<4>, shape<8>>>);
static_assert(!pruning::detail::keeps_channels_v<bound<conv2d<4, 3, 3>, img>>);
}  // namespace
