#!/usr/bin/env python3
"""PyTorch's own attention on the GPU, the reference point beside `mimic bench attention --device cuda`.

The shapes of mimic's attention benchmark: H heads (one unless given; `bench attention --n-head`), head_dim 64, batch 1, causal, float32 — forward without
autograd, and forward + backward of out.sum() wrt q, k, v; median of REPEATS after one warm-up, each run
bracketed by torch.cuda.synchronize(). Two forms: torch.nn.functional.scaled_dot_product_attention (fp32 picks the
memory-efficient kernel; flash needs 16-bit) and the plain quadratic form (matmul, mask, softmax, matmul), which
is what mimic's softmax kernel computes. Also SDPA in bf16 (flash), for scale. Prints one JSON object.
A benchmark peer (bench/README: python3-torch is allowed there); mimic itself never runs Python.

    python3 bench/gpu/sdpa.py [MAX_LEN] [REPEATS] [HEADS]      (HEADS: one count or a comma list, e.g. 1,12)
"""
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def timed(fn, repeats):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def plain(q, k, v):
    t = q.shape[-2]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(s.masked_fill(mask, torch.finfo(s.dtype).min), -1) @ v


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def main():
    max_len = int(sys.argv[1]) if len(sys.argv) > 1 else 32768
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    heads_list = [int(h) for h in sys.argv[3].split(",")] if len(sys.argv) > 3 else [1]
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False  # as mimic: fp32 products in fp32
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "repeats": repeats, "rows": []}
    for heads, t in ((h, t) for h in heads_list for t in (512 << i for i in range(7)) if t <= max_len):
        row = {"heads": heads, "length": t}
        for name, fn, dtype in (("sdpa_fp32", sdpa, torch.float32), ("plain_fp32", plain, torch.float32), ("sdpa_bf16", sdpa, torch.bfloat16)):
            g = torch.Generator(device="cpu").manual_seed(0)
            q, k, v = (torch.randn(1, heads, t, 64, generator=g).to(dev, dtype) for _ in range(3))
            try:
                with torch.no_grad():
                    fwd = timed(lambda: fn(q, k, v), repeats)
                qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))

                def fb():
                    for x in (qg, kg, vg):
                        x.grad = None
                    fn(qg, kg, vg).sum().backward()

                row[name] = {"fwd_ms": fwd, "fwdbwd_ms": timed(fb, repeats)}
            except torch.cuda.OutOfMemoryError:
                row[name] = "out of memory"
            torch.cuda.empty_cache()
        out["rows"].append(row)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
