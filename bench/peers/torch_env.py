"""What the PyTorch peers print first: which Python and PyTorch ran, its BLAS
and CPU capability, its threads, and the environment that steers them, so that
every peer figure says where it came from (bench/report.py copies this line).
"""
import os
import re
import sys

import torch


def capability():
    """The kernels' instruction set PyTorch dispatches to (2.x; 1.13 names it
    only in its config: "CPU capability usage: AVX2")."""
    cpu = getattr(torch.backends, "cpu", None)
    if cpu is not None and hasattr(cpu, "get_cpu_capability"):
        return cpu.get_cpu_capability()
    m = re.search(r"CPU capability usage: (\w+)", torch.__config__.show())
    return m[1] if m else "?"


def describe():
    cfg = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", cfg)
    onednn = re.search(r"MKL-DNN v([\d.]+)", cfg)
    env = " ".join(f"{k}={os.environ[k]}" for k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA",
                                                    "MKL_ENABLE_INSTRUCTIONS", "OPENBLAS_NUM_THREADS",
                                                    "OMP_NUM_THREADS") if k in os.environ)
    return (f"torch {torch.__version__} python {sys.executable} "
            f"BLAS {blas[1] if blas else '?'} oneDNN {onednn[1] if onednn else '-'} "
            f"capability {capability()} "
            f"intra-op threads {torch.get_num_threads()}" + (f" env {env}" if env else ""))


if __name__ == "__main__":
    print(describe())
