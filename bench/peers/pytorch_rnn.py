#!/usr/bin/env python3
"""PyTorch peer of bench/bench_rnn.cpp: samples/s of an LSTM(128) and a GRU(128)
over 28 steps of 28 features with a Linear(128, 10) head on the last state, at
batch 1, 16, 64 and 256: inference (no_grad, eval) and one training step
(forward, cross-entropy, backward, RMSprop), on a fixed batch of synthetic
inputs, with the thread count given (default 1). torch.nn.LSTM / GRU run
oneDNN's (mkldnn) RNN kernels on the CPU where PyTorch has them.

  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE MALLOC_MMAP_THRESHOLD_=33554432 \
      MALLOC_TRIM_THRESHOLD_=4294967296 taskset -c 0 \
      /work/wt/peers/build/peers-venv/bin/python bench/peers/pytorch_rnn.py --threads 1

Prints which Python and PyTorch ran (torch_env.py), then per case the median of
--repeats timed runs of about --seconds each.
"""
import argparse
import statistics
import time

import torch
from torch import nn

from torch_env import describe


class Net(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(28, 128, batch_first=True)
        self.head = nn.Linear(128, 10)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1, :])


def rate(fn, batch, seconds, repeats):
    for _ in range(5):  # warm-up
        fn()
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds / 4:
        fn()
        n += 1
    per = max(1, int(n * 4 * seconds / max(time.perf_counter() - t0, 1e-9) / 4))
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(per):
            fn()
        rates.append(per * batch / (time.perf_counter() - t0))
    return statistics.median(rates), rates


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batches", default="1,16,64,256")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1)
    print(describe())
    for name, cell in (("lstm", nn.LSTM), ("gru", nn.GRU)):
        for batch in (int(b) for b in a.batches.split(",")):
            net = Net(cell)
            x = torch.rand(batch, 28, 28)
            y = torch.randint(0, 10, (batch,))
            opt = torch.optim.RMSprop(net.parameters(), lr=1e-3, alpha=0.9, eps=1e-7)
            loss_fn = nn.CrossEntropyLoss()

            def infer():
                with torch.no_grad():
                    net(x)

            def train():
                opt.zero_grad(set_to_none=True)
                loss_fn(net(x), y).backward()
                opt.step()

            net.eval()
            r, rs = rate(infer, batch, a.seconds, a.repeats)
            print(f"torch/{name}_inference/{batch}/threads:{a.threads} samples/s={r:.0f} (" +
                  ", ".join(f"{v:.0f}" for v in rs) + ")")
            net.train()
            r, rs = rate(train, batch, a.seconds, a.repeats)
            print(f"torch/{name}_train/{batch}/threads:{a.threads} samples/s={r:.0f} (" +
                  ", ".join(f"{v:.0f}" for v in rs) + ")")


if __name__ == "__main__":
    main()
