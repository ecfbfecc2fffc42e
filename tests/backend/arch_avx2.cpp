// Built with -march=haswell: ctnn's default backend here is cpu<fma3<avx2>>.
#include "arch_run.hpp"

static_assert(std::is_same_v<xsimd::default_arch, xsimd::fma3<xsimd::avx2>>, "arch_avx2.cpp must be built for haswell");
arch_run train_avx2() { return train_here(); }
