// ctnn/cuda/cuda.cuh — moved: the CUDA backend is in ctnn/backends/cuda/ (docs/design.md, "Layout").
#pragma once
#include "../backends/cuda/cuda.cuh"
