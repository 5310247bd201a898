#!/usr/bin/env python3
"""Loads a model directory mimic wrote — a converted one included — into plain PyTorch (no mimic), and computes its
logits: GPT-2, BERT (the masked-LM head's logits over the vocabulary, or a classifier's over its labels; one unpadded
sequence, token type 0) and the Llama family (Llama, Mistral, Qwen2, Qwen3), with softmax, linear, hybrid and mixed
attention as mimic.json names them per layer (BERT's bidirectional, the others causal). What the directory holds is documented in docs/convert.md ("Layout of a converted
directory"); the mathematics of each kind is docs/attention.md's, written here once more from those definitions.

    import mimic_torch
    model = mimic_torch.load("out/converted")            # config.json, safetensors (single or sharded), mimic.json
    logits = model(torch.tensor([[1, 2, 3]]))            # [B, T, vocab] ([B, labels] for a classifier), float64

    python3 python/mimic_torch.py DIR --ids 1,2,3        # prints the logits' shape and the last position's top 5
    python3 python/mimic_torch.py DIR --check FORWARD.safetensors   # against `mimic forward --out`: max relative error

Refused with a ValueError naming what: other model types, the `delta` kind, a hybrid layer's sparse cache, the
performer and cosformer feature maps, SLA-gated or decayed hybrid layers' options this file does not know. Computes in
float64 (the reference's precision; pass dtype=torch.float32 for speed). Needs only torch.
"""
import json
import math
import os
import struct
import sys

import torch

_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
           "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}
LLAMA_TYPES = ("llama", "mistral", "qwen2", "qwen3")


# ------------------------------------------------------------------------------------------------ files
def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        if v["dtype"] not in _DTYPES:
            raise ValueError("%s: tensor %s has dtype %s, which this loader does not read" % (path, name, v["dtype"]))
        a, b = v["data_offsets"]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=_DTYPES[v["dtype"]]) if b > a else torch.empty(0, dtype=_DTYPES[v["dtype"]])
        out[name] = t.reshape(v["shape"])
    return out


def read_weights(directory):
    single = os.path.join(directory, "model.safetensors")
    if os.path.exists(single):
        return read_safetensors(single)
    index = os.path.join(directory, "model.safetensors.index.json")
    if not os.path.exists(index):
        raise ValueError("%s: neither model.safetensors nor model.safetensors.index.json" % directory)
    weights = {}
    for shard in sorted(set(json.load(open(index))["weight_map"].values())):
        weights.update(read_safetensors(os.path.join(directory, shard)))
    return weights


# ------------------------------------------------------------------------------------------------ attention kinds
def _feature_map(name, options, tensors, prefix, head_dim):
    """The map as a function (x, role) -> (features, log_space); x: [B, H, T, d] already scaled by sqrt(scale)."""
    def head_linear(x, role):
        tied = prefix + "feature_map.weight" in tensors
        w = tensors[prefix + ("feature_map.weight" if tied else "feature_map.%s_weight" % role)]
        b = tensors.get(prefix + ("feature_map.bias" if tied else "feature_map.%s_bias" % role))
        y = torch.matmul(x, w.to(x.dtype))
        return y + b.to(x.dtype) if b is not None else y

    if name in ("hedgehog", "hedgehog_softmax"):
        def hedgehog(x, role):
            u = head_linear(x, role)
            if name == "hedgehog_softmax":
                return torch.cat([torch.log_softmax(u, -1), torch.log_softmax(-u, -1)], -1), True
            return torch.cat([u, -u], -1), True
        return hedgehog
    if name == "t2r":
        return lambda x, role: (torch.relu(head_linear(x, role)), False)
    if name == "elu":
        return lambda x, role: (torch.nn.functional.elu(x) + 1, False)
    if name == "relu":
        return lambda x, role: (torch.relu(x), False)
    if name == "identity":
        return lambda x, role: (x, False)
    if name == "exp_t":
        t = float(options.get("t", 1.0))
        return lambda x, role: (x * t, True)
    if name in ("taylor", "taylor2"):
        order = 2 if name == "taylor2" else int(options.get("order", 2))

        def taylor(x, role):
            term = torch.ones_like(x[..., :1])
            terms = [term]
            for n in range(1, order + 1):  # vec(x^⊗n)/√n!
                term = (term.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2) / math.sqrt(n)
                terms.append(term)
            return torch.cat(terms, -1), False
        return taylor
    raise ValueError("feature map '%s' is not supported by mimic_torch.py (hedgehog, hedgehog_softmax, t2r, elu, relu, "
                     "identity, exp_t, taylor, taylor2)" % name)


def _features(o, tensors, prefix, q, k, scale, head_dim, default_map):
    """φ(q), φ(k) of a linear or hybrid layer, gates applied; returns (fq, fk, log_space). default_map: the kind's own
    (mimic writes the map into every saved layer; linear: hedgehog, hybrid: hedgehog_softmax)."""
    phi = _feature_map(o.get("feature_map", default_map), o.get("map_options", {}) or {}, tensors, prefix, head_dim)
    root = math.sqrt(scale)
    fq, log_space = phi(q * root, "q")
    fk, _ = phi(k * root, "k")
    if o.get("gates"):
        def gate(x, w):  # log-softmax over heads of the layer's projection, heads side by side: [B, H, T]
            full = x.permute(0, 2, 1, 3).flatten(2)
            return torch.log_softmax(full @ w.to(x.dtype), -1).permute(0, 2, 1)
        gq, gk = gate(q, tensors[prefix + "gates.w_q"]), gate(k, tensors[prefix + "gates.w_k"])
        if log_space:
            fq, fk = fq + gq.unsqueeze(-1), fk + gk.unsqueeze(-1)
        else:
            fq, fk = fq * gq.exp().unsqueeze(-1), fk * gk.exp().unsqueeze(-1)
    return fq, fk, log_space


def softmax_attention(q, k, v, scale, causal):
    s = (q @ k.transpose(-1, -2)) * scale
    if causal:
        t = q.shape[2]
        s = s.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(s, -1) @ v


def linear_attention(o, tensors, prefix, q, k, v, scale, causal):
    """out_i = Σ_j a_ij v_j / divisor_i with a_ij = φ(q_i)·φ(k_j) (× γ^(i−j) with a decay), j ≤ i when causal."""
    fq, fk, log_space = _features(o, tensors, prefix, q, k, scale, q.shape[-1], "hedgehog")
    b, h, t, _ = q.shape
    norm, eps = o.get("norm", "row"), float(o.get("eps", 1e-6))
    shift = torch.zeros(b, h, t, 1, dtype=q.dtype)
    if log_space:  # exp(log φ − max): the maxima come back through `shift`, in which ε is expressed
        if norm != "none":
            qtop = fq.amax(-1, keepdim=True)
            ktop = fk.amax((2, 3), keepdim=True)
            fq, fk, shift = (fq - qtop).exp(), (fk - ktop).exp(), qtop + ktop
        else:
            fq, fk = fq.exp(), fk.exp()
    a = fq @ fk.transpose(-1, -2)
    if causal:
        a = a * torch.ones(t, t, dtype=a.dtype).tril()
    decay = o.get("decay", False)
    if decay:
        gammas = [1 - 2.0 ** (-5 - i) for i in range(h)] if decay is True else decay
        i = torch.arange(t, dtype=a.dtype)
        diff = (i.unsqueeze(1) - i.unsqueeze(0)).clamp_min(0)
        a = a * torch.tensor(gammas, dtype=a.dtype).view(h, 1, 1) ** diff
    num, den = a @ v, a.sum(-1, keepdim=True)
    scaled_eps = (eps * (-shift).clamp_max(80.0).exp()).clamp_min(torch.finfo(torch.float32).tiny)
    if norm == "row":
        return num / (den + scaled_eps)
    if norm == "none":
        return num * shift.exp()
    if norm == "l2":
        return num / (num.norm(dim=-1, keepdim=True) + scaled_eps)
    if norm == "rms":
        return num / (num.square().mean(-1, keepdim=True).sqrt() + scaled_eps)
    raise ValueError("unknown norm '%s'" % norm)


def hybrid_attention(o, tensors, prefix, q, k, v, scale, causal):
    """LoLCATs: a_ij = σ exp(s_ij − M_i) for the w newest keys (0 ≤ i − j < w), φ(q_i)·φ(k_j) (× (1 − σ) when
    affine) beyond; out = Σ a v / Σ a. M_i, the window's max score, is added back with window_scale exact."""
    if int(o.get("cache", 0)) > 0:
        raise ValueError("hybrid attention with a sparse cache is not supported by mimic_torch.py")
    fq, fk, log_space = _features(o, tensors, prefix, q, k, scale, q.shape[-1], "hedgehog_softmax")
    b, h, t, _ = q.shape
    w = int(o["window"])
    i = torch.arange(t)
    diff = i.unsqueeze(1) - i.unsqueeze(0)
    in_window = (diff >= 0) & (diff < w) if causal else diff.abs() < w
    in_linear = diff >= w if causal else diff.abs() >= w
    s = ((q @ k.transpose(-1, -2)) * scale).masked_fill(~in_window, float("-inf"))
    M = s.amax(-1, keepdim=True)
    M = torch.where(torch.isinf(M), torch.zeros_like(M), M)
    exact = o.get("window_scale", "max") == "exact"
    if o.get("mix", "learned") == "learned":
        sigma = torch.sigmoid(tensors[prefix + "window_logit"].to(q.dtype))
    else:
        sigma = torch.full((h,), float(o.get("window_weight", 0.5)), dtype=q.dtype)
    sigma = sigma.view(1, h, 1, 1)
    win = (s - M).exp() * sigma
    lshift = torch.zeros(b, h, t, 1, dtype=q.dtype)
    if log_space:
        qtop, ktop = fq.amax(-1, keepdim=True), fk.amax((2, 3), keepdim=True)
        fq, fk, lshift = (fq - qtop).exp(), (fk - ktop).exp(), qtop + ktop
    lin = (fq @ fk.transpose(-1, -2)).masked_fill(~in_linear, 0.0)
    if o.get("affine", False):
        lin = lin * (1 - sigma)
    wshift = M if exact else torch.zeros_like(M)
    c = torch.maximum(lshift, wshift)
    a = win * (wshift - c).exp() + lin * (lshift - c).exp()
    den = a.sum(-1, keepdim=True)
    den = torch.where(den == 0, torch.ones_like(den), den)
    return (a / den) @ v


def attention(entry, tensors, layer, q, k, v, scale, causal):
    kind = entry.get("kind", "softmax") if entry else "softmax"
    prefix = "mimic.attention.%d." % layer
    if kind == "softmax":
        return softmax_attention(q, k, v, scale, causal)
    if kind == "linear":
        return linear_attention(entry.get("options", {}), tensors, prefix, q, k, v, scale, causal)
    if kind == "hybrid":
        return hybrid_attention(entry.get("options", {}), tensors, prefix, q, k, v, scale, causal)
    if kind == "mixed":
        o = entry["options"]
        student = {"kind": o["kind"], "options": o.get("options", {})}
        # the student's tensors are registered under "student."
        sub = {("mimic.attention.%d." % layer) + n[len(prefix + "student."):]: t for n, t in tensors.items() if n.startswith(prefix + "student.")}
        out = attention(student, sub, layer, q, k, v, scale, causal)
        kept = torch.tensor(o["softmax_heads"])
        out[:, kept] = softmax_attention(q[:, kept], k[:, kept], v[:, kept], scale, causal)
        return out
    raise ValueError("attention kind '%s' (layer %d) is not supported by mimic_torch.py (softmax, linear, hybrid, mixed)" % (kind, layer))


# ------------------------------------------------------------------------------------------------ model families
def _gelu_new(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x.pow(3))))


def _activation(name):
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return _gelu_new
    if name == "gelu":
        return torch.nn.functional.gelu
    if name == "relu":
        return torch.relu
    if name in ("silu", "swish"):
        return torch.nn.functional.silu
    raise ValueError("hidden_act '%s' is not supported (gelu_new, gelu, relu, silu)" % name)


def _layer_norm(x, w, b, eps):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


def _rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _rope_settings(c):
    """rope_theta and the scaling object, from transformers 4's keys or transformers 5's rope_parameters (mimic refuses
    configs where the two disagree or a form it cannot compute, so either source is the same where both are given)."""
    scaling = c.get("rope_scaling") or {}  # one that says anything wins in both versions
    params = {} if scaling else (c.get("rope_parameters") or {})
    theta = c.get("rope_theta") or (params.get("rope_theta") if not scaling else None) or scaling.get("rope_theta") or 10000.0
    return theta, scaling or params


def _rope_inv_freq(c, hd):
    theta, sc = _rope_settings(c)
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    kind = sc.get("rope_type") if sc.get("rope_type") is not None else sc.get("type")
    if not kind:
        return inv
    if kind == "default":
        return inv
    if kind == "linear":
        return inv / sc["factor"]
    if kind != "llama3":
        raise ValueError("rope_scaling type '%s' is not supported (linear, llama3)" % kind)
    factor, lo, hi, old = sc["factor"], sc["low_freq_factor"], sc["high_freq_factor"], sc["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    out = torch.where(wavelen > old / lo, inv / factor, inv)
    smooth = (old / wavelen - lo) / (hi - lo)
    medium = (wavelen >= old / hi) & (wavelen <= old / lo)
    return torch.where(medium, (1 - smooth) * out / factor + smooth * out, out)


def _rope(x, inv):
    t = x.shape[2]
    angles = torch.arange(t, dtype=torch.float64).unsqueeze(1) * inv.unsqueeze(0)
    cos, sin = torch.cat([angles.cos()] * 2, -1).to(x.dtype), torch.cat([angles.sin()] * 2, -1).to(x.dtype)
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


class Model:
    """A loaded directory: call it with token ids [B, T] for logits [B, T, vocab]."""

    def __init__(self, directory, dtype=torch.float64):
        self.dir = directory
        self.config = json.load(open(os.path.join(directory, "config.json")))
        self.type = self.config.get("model_type")
        if self.type not in ("gpt2", "bert") and self.type not in LLAMA_TYPES:
            raise ValueError("%s: model_type '%s' is not supported by mimic_torch.py (gpt2, bert, %s)" % (directory, self.type, ", ".join(LLAMA_TYPES)))
        self.w = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in read_weights(directory).items()}
        mimic_json = os.path.join(directory, "mimic.json")
        self.layers = {}
        if os.path.exists(mimic_json):
            for e in json.load(open(mimic_json)).get("attention", []):
                self.layers[int(e["layer"])] = e
        if self.type == "gpt2":  # keys with or without the "transformer." prefix
            self.w = {(k[len("transformer."):] if k.startswith("transformer.") else k): v for k, v in self.w.items()}
        if self.type == "bert":  # the backbone's keys with or without the "bert." prefix; the heads' never have it
            self.w = {(k[len("bert."):] if k.startswith("bert.") else k): v for k, v in self.w.items()}

    def __call__(self, ids):
        c = self.config
        vocab = c.get("vocab_size")
        context = c.get("n_positions", c.get("n_ctx")) if self.type == "gpt2" else c.get("max_position_embeddings")
        if ids.dim() != 2 or ids.dtype not in (torch.int64, torch.int32):
            raise ValueError("token ids must be an integer tensor [B, T], got %s %s" % (list(ids.shape), ids.dtype))
        if ids.numel() and (int(ids.min()) < 0 or (vocab and int(ids.max()) >= vocab)):
            raise ValueError("token ids must lie in [0, %s), got %d..%d" % (vocab, int(ids.min()), int(ids.max())))
        if context and ids.shape[1] > context:
            raise ValueError("%d tokens exceed the model's context of %d" % (ids.shape[1], context))
        with torch.no_grad():
            if self.type == "bert":
                return self._bert(ids)
            return self._gpt2(ids) if self.type == "gpt2" else self._llama(ids)

    def _gpt2(self, ids):
        c, w = self.config, self.w
        d, nh = c["n_embd"], c["n_head"]
        hd, eps, b, t = d // nh, c.get("layer_norm_epsilon") or 1e-5, ids.shape[0], ids.shape[1]
        if c.get("scale_attn_by_inverse_layer_idx") or c.get("reorder_and_upcast_attn"):
            raise ValueError("scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn are not supported")
        scale = 1 / math.sqrt(hd) if c.get("scale_attn_weights", True) else 1.0
        act = _activation(c.get("activation_function", "gelu_new"))
        x = w["wte.weight"][ids] + w["wpe.weight"][:t]
        for i in range(c["n_layer"]):
            p = "h.%d." % i
            h = _layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
            qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
            q, k, v = (z.view(b, t, nh, hd).transpose(1, 2) for z in qkv.split(d, -1))
            a = attention(self.layers.get(i), w, i, q, k, v, scale, True).transpose(1, 2).reshape(b, t, d)
            x = x + a @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
            h = _layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
            x = x + act(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]) @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        x = _layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], eps)
        return x @ w.get("lm_head.weight", w["wte.weight"]).t()

    def _bert(self, ids):
        """Post-norm encoder: x = LN(x + attention(x)), x = LN(x + MLP(x)); then the masked-LM transform and the tied
        decoder, or the pooler (tanh of the first position) and the classifier."""
        c, w = self.config, self.w
        d, nh = c["hidden_size"], c["num_attention_heads"]
        hd, eps, b, t = d // nh, c.get("layer_norm_eps", 1e-12), ids.shape[0], ids.shape[1]
        act = _activation(c.get("hidden_act", "gelu"))
        lin = lambda x, n: x @ w[n + ".weight"].t() + w[n + ".bias"]
        ln = lambda x, n: _layer_norm(x, w[n + ".weight"], w[n + ".bias"], eps)
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:t] + w["embeddings.token_type_embeddings.weight"][0]
        x = ln(x, "embeddings.LayerNorm")
        for i in range(c["num_hidden_layers"]):
            p = "encoder.layer.%d." % i
            q, k, v = (lin(x, p + "attention.self." + n).view(b, t, nh, hd).transpose(1, 2) for n in ("query", "key", "value"))
            a = attention(self.layers.get(i), w, i, q, k, v, 1 / math.sqrt(hd), False).transpose(1, 2).reshape(b, t, d)
            x = ln(x + lin(a, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            x = ln(x + lin(act(lin(x, p + "intermediate.dense")), p + "output.dense"), p + "output.LayerNorm")
        if "classifier.weight" in w:
            return lin(torch.tanh(lin(x[:, 0], "pooler.dense")), "classifier")
        if "cls.predictions.transform.dense.weight" not in w:
            raise ValueError("%s: a BERT without a masked-LM or classification head has no logits" % self.dir)
        h = ln(act(lin(x, "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
        return h @ w.get("cls.predictions.decoder.weight", w["embeddings.word_embeddings.weight"]).t() + w["cls.predictions.bias"]

    def _llama(self, ids):
        c, w = self.config, self.w
        b, t = ids.shape
        # an absent key is the type's HF default, as mimic reads it (Mistral 8 KV heads, Qwen2/3 32, Qwen3 heads of 128)
        kv_default = {"mistral": 8, "qwen2": 32, "qwen3": 32}.get(c["model_type"], c["num_attention_heads"])
        # (absent: the default; null: one per query head and hidden / heads, as HF's classes turn it)
        nh = c["num_attention_heads"]
        nkv = kv_default if "num_key_value_heads" not in c else (c["num_key_value_heads"] or nh)
        hd = c.get("head_dim") or (128 if c["model_type"] == "qwen3" and "head_dim" not in c else c["hidden_size"] // nh)
        eps = c.get("rms_norm_eps") or 1e-6
        inv = _rope_inv_freq(c, hd)
        lin = lambda x, n: x @ w[n + ".weight"].t() + (w[n + ".bias"] if n + ".bias" in w else 0)
        x = w["model.embed_tokens.weight"][ids]
        for i in range(c["num_hidden_layers"]):
            p = "model.layers.%d." % i
            h = _rms_norm(x, w[p + "input_layernorm.weight"], eps)
            q = lin(h, p + "self_attn.q_proj").view(b, t, nh, hd).transpose(1, 2)
            k = lin(h, p + "self_attn.k_proj").view(b, t, nkv, hd).transpose(1, 2)
            v = lin(h, p + "self_attn.v_proj").view(b, t, nkv, hd).transpose(1, 2)
            if p + "self_attn.q_norm.weight" in w:
                q, k = _rms_norm(q, w[p + "self_attn.q_norm.weight"], eps), _rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
            q, k = _rope(q, inv), _rope(k, inv)  # feature maps act after the rotation, as mimic's do
            k, v = k.repeat_interleave(nh // nkv, 1), v.repeat_interleave(nh // nkv, 1)
            a = attention(self.layers.get(i), w, i, q, k, v, 1 / math.sqrt(hd), True).transpose(1, 2).reshape(b, t, nh * hd)
            x = x + lin(a, p + "self_attn.o_proj")
            h = _rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
            gate = lin(h, p + "mlp.gate_proj")
            x = x + lin(torch.nn.functional.silu(gate) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj")
        x = _rms_norm(x, w["model.norm.weight"], eps)
        return x @ w.get("lm_head.weight", w["model.embed_tokens.weight"]).t()


def load(directory, dtype=torch.float64):
    return Model(directory, dtype)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    model = load(argv[1])
    if len(argv) == 4 and argv[2] == "--check":
        got = read_safetensors(argv[3])
        ref = model(got["input_ids"])
        err = ((got["logits"].to(ref.dtype) - ref).abs().max() / ref.abs().max()).item()
        kinds = sorted({e.get("kind", "softmax") for e in model.layers.values()} or {"softmax"})
        print(json.dumps({"model": argv[1], "tokens": int(got["input_ids"].shape[1]), "kinds": kinds, "max_relative_error": err}))
        return 0 if err < 1e-4 else 1
    if len(argv) == 4 and argv[2] == "--ids":
        ids = torch.tensor([[int(x) for x in argv[3].split(",")]])
        logits = model(ids)
        top = logits[0, -1].topk(min(5, logits.shape[-1]))
        print("logits", list(logits.shape), "top 5 at the last position:", top.indices.tolist())
        return 0
    print("usage: mimic_torch.py DIR [--ids 1,2,3 | --check FORWARD.safetensors]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except ValueError as e:  # what the file cannot compute, or bad input: one line
        print("mimic_torch.py: error: %s" % e, file=sys.stderr)
        sys.exit(1)
