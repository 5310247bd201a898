#!/usr/bin/python3
"""The PyTorch side of mimic's peer benchmark (docs/peer.md; run by bench/peer/run.sh).

Reads the inputs `mimic bench peer` wrote (one safetensors file: teacher q, k, v and the Hedgehog map's weights of
the distillation step; the model's weights, token ids and labels of the training step; shapes and hyper-parameters in
its metadata), runs the same two steps written the way a PyTorch user would, times them (one warm-up step, then the
median of the repeats), and compares with mimic's report: the losses of the first two steps must agree (the first
checks the forward pass, the second the backward pass and the AdamW update), else the exit status is 1.

Bench only: Debian's python3-torch (1.13) and the standard library; nothing of mimic imports it.
"""
import argparse
import json
import math
import statistics
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

FLT_MIN = torch.finfo(torch.float32).tiny
DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32, "F16": torch.float16, "BF16": torch.bfloat16}


def read_safetensors(path):
    """The tensors and metadata of a safetensors file: an 8-byte little-endian header length, a JSON header, the data."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = memoryview(blob)[8 + n:]
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=DTYPES[info["dtype"]]) if end > begin else torch.empty(0, dtype=DTYPES[info["dtype"]])
        tensors[name] = t.reshape(info["shape"]).clone()
    return tensors, meta


# ---------------------------------------------------------------------------------------------- attention
class Hedgehog(nn.Module):
    """Hedgehog's map in log space: log φ(x) = [x W + b, −(x W + b)] per head (W [H, d, F/2], b [H, 1, F/2])."""

    def __init__(self, n_head, head_dim, half):
        super().__init__()
        for p in ("q_", "k_"):
            self.register_parameter(p + "weight", nn.Parameter(torch.empty(n_head, head_dim, half)))
            self.register_parameter(p + "bias", nn.Parameter(torch.empty(n_head, 1, half)))

    def forward(self, x, role):
        u = torch.matmul(x, getattr(self, role + "_weight")) + getattr(self, role + "_bias")
        return torch.cat([u, -u], -1)


class LinearKernel(nn.Module):
    """Linear attention with row normalisation (ε = 1e-6) on Hedgehog features, stabilised as mimic's op is: each
    query's log-features minus their max, every key's minus one constant per (sequence, head); ε is scaled alike."""

    def __init__(self, n_head, head_dim, feature_dim, eps, chunk):
        super().__init__()
        self.feature_map = Hedgehog(n_head, head_dim, feature_dim // 2)
        self.eps, self.chunk = eps, chunk

    def features(self, q, k, scale):
        root = math.sqrt(scale)
        lq, lk = self.feature_map(q * root, "q"), self.feature_map(k * root, "k")
        qmax = lq.detach().amax(-1, keepdim=True)
        m = lk.detach().amax((2, 3), keepdim=True)
        eps = (self.eps * (-(qmax + m)).clamp_max(80.0).exp()).clamp_min(FLT_MIN)
        return (lq - qmax).exp(), (lk - m).exp(), eps

    def log_weights(self, q, k, scale):
        """The quadratic form's log-weights [B, H, T, T] (distillation)."""
        qf, kf, eps = self.features(q, k, scale)
        t = q.shape[2]
        a = torch.matmul(qf, kf.transpose(-1, -2)) * torch.ones(t, t).tril()
        return a.clamp_min(FLT_MIN).log() - (a.sum(-1, keepdim=True) + eps).clamp_min(FLT_MIN).log()

    def forward(self, q, k, v, scale):
        """The chunked causal form: within a chunk the quadratic form, across chunks the running state Σ φ(k) [v, 1]ᵀ."""
        qf, kf, eps = self.features(q, k, scale)
        b, h, t, f = qf.shape
        c = self.chunk
        # a length that is no multiple of the chunk is padded at the end with zero features: causal, so no earlier row
        # sees them, and their own rows are cut off below (mimic bench peer accepts any --train-length)
        pad = -t % c
        v1 = torch.cat([v, torch.ones_like(v[..., :1])], -1)
        if pad:
            qf, kf, v1 = (torch.nn.functional.pad(x, (0, 0, 0, pad)) for x in (qf, kf, v1))
        n = (t + pad) // c
        qc, kc, vc = qf.reshape(b, h, n, c, f), kf.reshape(b, h, n, c, f), v1.reshape(b, h, n, c, -1)
        out = torch.matmul(torch.matmul(qc, kc.transpose(-1, -2)) * torch.ones(c, c).tril(), vc)
        kv = torch.matmul(kc.transpose(-1, -2), vc).cumsum(2)  # the state after each chunk
        before = torch.cat([torch.zeros_like(kv[:, :, :1]), kv[:, :, :-1]], 2)
        out = (out + torch.matmul(qc, before)).reshape(b, h, t + pad, -1)[:, :, :t]
        return out[..., :-1] / (out[..., -1:] + eps)


# ---------------------------------------------------------------------------------------------- GPT-2
class Conv1D(nn.Module):
    """GPT-2's linear layer: weight stored (in, out)."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.empty(n_out))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(*x.shape[:-1], -1)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Block(nn.Module):
    def __init__(self, d, d_ff, eps):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d, eps=eps), nn.LayerNorm(d, eps=eps)
        self.attn, self.mlp = nn.Module(), nn.Module()
        self.attn.c_attn, self.attn.c_proj = Conv1D(d, 3 * d), Conv1D(d, d)
        self.mlp.c_fc, self.mlp.c_proj = Conv1D(d, d_ff), Conv1D(d_ff, d)


class Gpt2Linear(nn.Module):
    """GPT-2 (no dropout, tied LM head) whose every layer runs the linear kernel; parameter names as mimic's."""

    def __init__(self, cfg, attention):
        super().__init__()
        d, self.n_head = cfg["n_embd"], cfg["n_head"]
        self.wte, self.wpe = nn.Embedding(cfg["vocab_size"], d), nn.Embedding(cfg["n_positions"], d)
        self.h = nn.ModuleList(Block(d, cfg["n_inner"], cfg["layer_norm_epsilon"]) for _ in range(cfg["n_layer"]))
        self.ln_f = nn.LayerNorm(d, eps=cfg["layer_norm_epsilon"])
        hd = d // self.n_head
        fd = attention["map_options"].get("feature_dim", 2 * hd)
        self.kernels = nn.ModuleList(LinearKernel(self.n_head, hd, fd, attention["eps"], attention["chunk"]) for _ in self.h)
        self.scale = 1.0 / math.sqrt(hd)

    def forward(self, ids):
        b, t = ids.shape
        x = self.wte(ids) + self.wpe(torch.arange(t).unsqueeze(0))
        for block, kernel in zip(self.h, self.kernels):
            q, k, v = block.attn.c_attn(block.ln_1(x)).split(x.shape[-1], -1)
            heads = lambda y: y.view(b, t, self.n_head, -1).transpose(1, 2)
            o = kernel(heads(q), heads(k), heads(v), self.scale).transpose(1, 2).reshape(b, t, -1)
            x = x + block.attn.c_proj(o)
            x = x + block.mlp.c_proj(gelu_new(block.mlp.c_fc(block.ln_2(x))))
        return torch.matmul(self.ln_f(x), self.wte.weight.t())


# ---------------------------------------------------------------------------------------------- the steps
def load(module, tensors, prefix):
    module.load_state_dict({n[len(prefix):]: t for n, t in tensors.items() if n.startswith(prefix)}, strict=True)


def time_step(params, lr, adamw, repeats, loss_fn):
    opt = torch.optim.AdamW(params, lr=lr, betas=(adamw["beta1"], adamw["beta2"]), eps=adamw["eps"], weight_decay=adamw["weight_decay"])
    losses, times = [], []
    for i in range(repeats + 1):  # the first is the warm-up
        t0 = time.perf_counter()
        loss = loss_fn()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if i > 0:
            times.append((time.perf_counter() - t0) * 1e3)
    return {"step_ms": statistics.median(times), "losses": losses}


def run(tensors, cfg, repeats):
    adamw = cfg["adamw"]
    d = cfg["distill"]
    st = d["student"]
    student = LinearKernel(d["n_head"], d["head_dim"], st["map_options"].get("feature_dim", 2 * d["head_dim"]), st["eps"], st["chunk"])
    load(student, tensors, "distill.student.")
    q, k, v = tensors["distill.q"], tensors["distill.k"], tensors["distill.v"]
    rows = q.shape[0] * q.shape[1] * q.shape[2]
    causal = torch.ones(q.shape[2], q.shape[2], dtype=torch.bool).tril()

    def distill_loss():
        with torch.no_grad():
            teacher = torch.softmax((torch.matmul(q, k.transpose(-1, -2)) * d["scale"]).masked_fill(~causal, float("-inf")), -1)
        return -(teacher * student.log_weights(q, k, d["scale"])).sum() / rows

    t = cfg["train"]
    model = Gpt2Linear(t["model"], t["attention"])
    load(model, tensors, "train.model.")
    ids, labels = tensors["train.ids"], tensors["train.labels"]

    def train_loss():
        logits = model(ids)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)

    return {"distill": time_step(list(student.parameters()), d["lr"], adamw, repeats, distill_loss),
            "train": time_step(list(model.parameters()), t["lr"], adamw, repeats, train_loss)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", required=True, help="the safetensors file `mimic bench peer --inputs` wrote")
    ap.add_argument("--mimic", help="mimic's --json report of the same run: print the ratios and check the losses")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, help="timed steps (default: as mimic's run)")
    ap.add_argument("--json-out", help="write this side's report here")
    ap.add_argument("--rtol", type=float, default=1e-4, help="tolerance of the first two losses: |x - y| <= rtol * max(1, |y|) (relative above 1, absolute below)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    tensors, meta = read_safetensors(a.inputs)
    if "mimic_peer" not in meta:
        sys.exit(f"peer.py: {a.inputs} has no mimic_peer metadata: not written by `mimic bench peer`")
    cfg = json.loads(meta["mimic_peer"])
    steps = run(tensors, cfg, a.repeats or cfg["repeats"])
    report = {"benchmark": "peer", "side": "pytorch", "torch": torch.__version__, "threads": torch.get_num_threads(), "steps": steps}
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(report, f, indent=1)
    if not a.mimic:
        print(json.dumps(report, indent=1))
        return 0
    with open(a.mimic) as f:
        mimic = json.load(f)
    threads = lambda n: f"{n} thread" + ("" if n == 1 else "s")
    print(f"peer benchmark: mimic {threads(mimic['threads'])}, PyTorch {torch.__version__} {threads(report['threads'])}, median of {cfg['repeats']} steps")
    print(f"{'step':8} {'mimic ms':>10} {'PyTorch ms':>11} {'mimic / PyTorch':>16}  {'target <= 1.0':13}  first two losses (mimic | PyTorch)")
    failed = []
    for name, ours in steps.items():
        theirs = mimic["steps"][name]
        r = theirs["step_ms"] / ours["step_ms"]
        pairs = list(zip(theirs["losses"][:2], ours["losses"][:2]))
        same = len(pairs) == 2 and all(abs(x - y) <= a.rtol * max(1.0, abs(y)) for x, y in pairs)
        if not same:
            failed.append(name)
        shown = "  ".join(f"{x:.6f} | {y:.6f}" for x, y in pairs)
        print(f"{name:8} {theirs['step_ms']:10.1f} {ours['step_ms']:11.1f} {r:15.2f}x  {'PASS' if r <= 1.0 else 'MISS':13}  {shown}")
    if failed:
        print(f"peer.py: the two sides do not compute the same {', '.join(failed)} step: the losses differ by more than "
              f"{a.rtol:g} · max(1, |loss|); the times are not comparable", file=sys.stderr)
        return 1
    print("losses agree: both sides compute the same steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
