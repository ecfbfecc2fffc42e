#!/usr/bin/env python3
"""Makes torch_mlp.onnx, torch_mlp_x.npy and torch_mlp_y.npy beside this script.

A small PyTorch MLP (8 -> 16 relu -> 16 tanh -> 3) with seeded random weights,
exported by torch.onnx.export (TorchScript exporter, opset 17), and its outputs
on 5 seeded inputs as PyTorch computes them. tests/onnx/test_onnx.cpp imports
the graph into sequential<input<8>, dense<16, relu>, dense<16, tanh>, dense<3>>
and checks that ctnn predicts the same within 1e-5.
Made with torch 2.5.1 (pip install torch==2.5.1).
"""
import pathlib

import numpy as np
import torch

here = pathlib.Path(__file__).parent
torch.manual_seed(13)
net = torch.nn.Sequential(
    torch.nn.Linear(8, 16), torch.nn.ReLU(),
    torch.nn.Linear(16, 16), torch.nn.Tanh(),
    torch.nn.Linear(16, 3),
).eval()
x = torch.randn(5, 8)
with torch.no_grad():
    y = net(x)
torch.onnx.export(net, x, str(here / "torch_mlp.onnx"), input_names=["input"], output_names=["output"],
                  dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=17, dynamo=False)
np.save(here / "torch_mlp_x.npy", x.numpy().astype(np.float32))
np.save(here / "torch_mlp_y.npy", y.numpy().astype(np.float32))
print("torch", torch.__version__, "y[0] =", y[0].tolist())
