#!/usr/bin/env python3
"""The draw of dropout's noise beside the products it sits between (docs/distributed.md, "Dropout too"): on one thread,
the ns per element of a Bernoulli draw into an allocated tensor against the ns per output element of a 768-wide matrix
product (GPT-2 small's width), interleaved, medians of 15 repeats each. mimic's dropout (src/models/networks.cpp) also
allocates the mask and scales it by 1/(1-p): left out here, as the draw is what every rank repeats for the others' rows. Debian's PyTorch (/usr/bin/python3) runs the same LibTorch 1.13 as
mimic. Check `cat /proc/loadavg` before and after: a figure from a busy machine says little.

    /usr/bin/python3 bench/dropout_draw.py"""
import statistics
import time

import torch

torch.set_num_threads(1)
torch.manual_seed(0)
rows, width = 4096, 768
x = torch.empty(rows, width)
a, w = torch.randn(rows, width), torch.randn(width, width)
for _ in range(3):  # warm-up: first touches, BLAS buffers
    x.bernoulli_(0.9)
    a @ w
draws, products = [], []
for _ in range(15):
    t = time.perf_counter()
    x.bernoulli_(0.9)
    draws.append(time.perf_counter() - t)
    t = time.perf_counter()
    a @ w
    products.append(time.perf_counter() - t)
b = statistics.median(draws) / x.numel() * 1e9
m = statistics.median(products) / (rows * width) * 1e9
print("torch %s, 1 thread: Bernoulli draw %.2f ns/element, 768-wide matrix product %.2f ns/output element, ratio %.3f"
      % (torch.__version__, b, m, b / m))
