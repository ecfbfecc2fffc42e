#!/usr/bin/env python3
"""PyTorch CUDA peer of bench/cuda/bench_cuda.cu, same figures, one line each
("<name> <value> <unit>"):
  train_{mlp,cnn}_{float32,autocast}_batch{256,8192}_samples_per_s
      one epoch of 60000 synthetic 28x28 samples (after a warm-up epoch), Adam
      (lr 1e-3, eps 1e-7 as Keras), cross-entropy on logits; the batches are
      gathered on the host from pinned memory and copied with non_blocking=True,
      as ctnn's fit stages them. autocast = torch.autocast(float16) + GradScaler.
  infer_mlp_batch1_latency  median of 2000 forwards of one sample (+ synchronize), float32
The MLP is 784-256-128-10 (relu), the CNN that of examples/fashion_mnist_cnn.cpp.

  python3 bench/peers/torch_cuda.py [train|infer|all]
"""
import statistics
import sys
import time

import torch


def mlp():
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))


def cnn():
    # channels-first here; the same layers, sizes and parameter count as the ctnn CNN
    return torch.nn.Sequential(
        torch.nn.Unflatten(1, (1, 28)), torch.nn.Conv2d(1, 32, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.BatchNorm2d(32, eps=1e-3, momentum=0.01), torch.nn.Conv2d(32, 64, 3), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.BatchNorm2d(64, eps=1e-3, momentum=0.01), torch.nn.Flatten(),
        torch.nn.Linear(1600, 128), torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.Linear(128, 10))


def figure(name, value, unit):
    print(f"{name} {value:.6g} {unit}", flush=True)


def epoch(model, opt, scaler, x, y, batch, autocast):
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    perm = torch.randperm(x.shape[0], generator=g)
    for i in range(0, x.shape[0], batch):
        idx = perm[i:i + batch]
        xb = x[idx].pin_memory().cuda(non_blocking=True)
        yb = y[idx].pin_memory().cuda(non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=autocast):
            loss = loss_fn(model(xb), yb)
        if autocast:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
    torch.cuda.synchronize()
    return x.shape[0] / (time.perf_counter() - t0)


def train():
    torch.manual_seed(7)
    x = torch.rand(60000, 28, 28)
    y = torch.randint(0, 10, (60000,))
    for batch in (256, 8192):
        for name, make in (("mlp", mlp), ("cnn", cnn)):
            for autocast in (False, True):
                torch.manual_seed(42)
                model = make().cuda()
                opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
                scaler = torch.amp.GradScaler("cuda", enabled=autocast)
                epoch(model, opt, scaler, x, y, batch, autocast)  # warm-up
                rate = epoch(model, opt, scaler, x, y, batch, autocast)
                kind = "autocast" if autocast else "float32"
                figure(f"torch_train_{name}_{kind}_batch{batch}_samples_per_s", rate, "samples/s")


def infer():
    torch.manual_seed(42)
    model = mlp().cuda().eval()
    xb = torch.rand(1, 28, 28, device="cuda")
    times = []
    with torch.no_grad():
        for i in range(2200):
            t0 = time.perf_counter()
            model(xb)
            torch.cuda.synchronize()
            if i >= 200:
                times.append((time.perf_counter() - t0) * 1e6)
    figure("torch_infer_mlp_batch1_latency", statistics.median(times), "us")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if not torch.cuda.is_available():
        print("CTNN_SKIP: torch.cuda.is_available() is False")
        sys.exit(0)
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name(0)}", flush=True)
    if what in ("all", "train"):
        train()
    if what in ("all", "infer"):
        infer()
