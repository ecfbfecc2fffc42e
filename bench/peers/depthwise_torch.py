#!/usr/bin/env python3
"""PyTorch peer of bench/bench_depthwise.cpp: the depthwise convolution (3x3, stride 1, same
padding, groups = C, with a bias) at 56x56x128 and 14x14x512, one thread: forward at batch 1
and 16, and forward + backward (the kernel's, the bias' and the input's gradients) at batch 16,
in microseconds per call, NCHW and channels_last (the faster is the peer figure). Python:
build/peers-venv/bin/python (bench/peers/setup.sh).

  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE build/peers-venv/bin/python bench/peers/depthwise_torch.py
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from torch_env import describe


def timed(f, seconds):
    for _ in range(5):
        f()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        f()
        n += 1
    return (time.perf_counter() - t0) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1)
    print(describe())
    for hw, c in [(56, 128), (14, 512)]:
        for batch, train in [(1, False), (16, False), (16, True)]:
            best = None
            for fmt in (torch.contiguous_format, torch.channels_last):
                x = torch.rand(batch, c, hw, hw).to(memory_format=fmt).requires_grad_(train)
                w = torch.rand(c, 1, 3, 3, requires_grad=train)
                b = torch.rand(c, requires_grad=train)
                dz = torch.rand(batch, c, hw, hw).to(memory_format=fmt)

                def forward():
                    with torch.no_grad():
                        F.conv2d(x, w, b, padding=1, groups=c)

                def step():
                    x.grad = w.grad = b.grad = None
                    F.conv2d(x, w, b, padding=1, groups=c).backward(dz)

                us = statistics.median(timed(step if train else forward, a.seconds) for _ in range(a.repeats))
                name = "NCHW" if fmt is torch.contiguous_format else "channels_last"
                print(f"  {hw}x{hw}x{c} batch {batch} {'train' if train else 'forward'} {name}: {us:.1f} us")
                best = us if best is None else min(best, us)
            print(f"torch/depthwise/{'train' if train else 'forward'}/{hw}x{hw}x{c}/{batch} us={best:.1f}")


if __name__ == "__main__":
    main()
