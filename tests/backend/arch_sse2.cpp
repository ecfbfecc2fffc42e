// Built with -march=x86-64: ctnn's default backend here is cpu<sse2>.
#include "arch_run.hpp"

static_assert(std::is_same_v<xsimd::default_arch, xsimd::sse2>, "arch_sse2.cpp must be built for plain x86-64");
arch_run train_sse2() { return train_here(); }
