#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into bench/fuzz/corpus/<target>/ (small valid inputs, a few KB
each, plus a few near misses). Standard library only; rerun after changing a format:  python3 bench/fuzz/make_corpus.py"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "corpus")
SEP = b"\n----\n"  # fuzz_util.h: split_parts


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


DT = {"F32": ("f", 4), "F16": ("e", 2), "F64": ("d", 8), "I64": ("q", 8), "I32": ("i", 4), "I16": ("h", 2),
      "I8": ("b", 1), "U8": ("B", 1), "BOOL": ("?", 1), "BF16": ("H", 2)}


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape)] filled with 1, 2, 3, ...; returns the file's bytes."""
    header, data = {}, b""
    for name, dtype, shape in tensors:
        n = 1
        for s in shape:
            n *= s
        code, size = DT[dtype]
        if dtype == "BOOL":
            values = [i % 2 == 0 for i in range(n)]
        elif dtype == "BF16":
            values = [0x3F80] * n  # 1.0
        else:
            values = [(i % 7) + 1 for i in range(n)]
        blob = struct.pack("<%d%s" % (n, code), *values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def main():
    shutil.rmtree(OUT, ignore_errors=True)

    # ---- safetensors
    put("safetensors", "two-tensors", safetensors([("w", "F32", [2, 3]), ("b", "F16", [3])], {"format": "pt"}))
    put("safetensors", "every-dtype", safetensors([("t_" + d.lower(), d, [2]) for d in DT]))
    put("safetensors", "empty-shapes", safetensors([("e", "F32", [0]), ("s", "I64", []), ("z", "U8", [2, 0, 3])]))
    put("safetensors", "no-tensors", safetensors([], {"k": "v"}))
    put("safetensors", "truncated", safetensors([("w", "F32", [4, 4])])[:-9])

    # ---- sharded index: index, separator, model-00001-of-00002.safetensors (shard 2 is fixed in the target)
    index = {"metadata": {"total_size": 46}, "weight_map": {"wte": "model-00001-of-00002.safetensors",
                                                           "h.0.w": "model-00002-of-00002.safetensors",
                                                           "h.0.b": "model-00002-of-00002.safetensors"}}
    shard1 = safetensors([("wte", "F32", [4, 2])], {"format": "pt"})
    put("safetensors_index", "two-shards", json.dumps(index, indent=2).encode() + SEP + shard1)
    put("safetensors_index", "one-shard", json.dumps({"weight_map": {"wte": "model-00001-of-00002.safetensors"}}).encode() + SEP + shard1)
    put("safetensors_index", "missing-shard", json.dumps({"weight_map": {"x": "model-00003-of-00003.safetensors"}}).encode() + SEP)

    # ---- config.json: the fixtures' and the embedded models'
    for d in ["gpt2-plain", "gpt2-prefixed", "bert-base", "bert-cls", "bert-mlm"]:
        put("config", d, open(os.path.join(ROOT, "tests/fixtures/models", d, "config.json"), "rb").read())
    for d in ["gpt2-mini", "bert-mini-spam"]:
        put("config", d, open(os.path.join(ROOT, "examples/models", d, "config.json"), "rb").read())

    # ---- mimic.json for the gpt2-plain fixture (2 layers, 4 heads of 8)
    def converted(layers):
        return json.dumps({"format": "mimic-converted-1", "summary": "fuzz seed", "attention": layers,
                           "provenance": {"teacher": "gpt2-plain"}}, indent=2)
    put("mimic_json", "linear-elu", converted([{"layer": 0, "kind": "linear", "options": {"feature_map": "elu"}},
                                               {"layer": 1, "kind": "softmax"}]))
    put("mimic_json", "hedgehog-gates", converted([{"layer": 0, "kind": "linear", "options": {"feature_map": "hedgehog", "gates": True,
                                                   "map_options": {"feature_dim": 8}}},
                                                   {"layer": 1, "kind": "linear", "options": {"feature_map": "performer", "norm": "row",
                                                   "map_options": {"features": 16, "seed": 1}}}]))
    put("mimic_json", "hybrid-mixed", converted([{"layer": 0, "kind": "hybrid", "options": {"window": 4, "feature_map": "t2r"}},
                                                 {"layer": 1, "kind": "mixed", "options": {"softmax_heads": [0, 2], "kind": "linear",
                                                  "options": {"feature_map": "cosformer", "decay": [0.9, 0.9, 0.9, 0.9]}}}]))
    put("mimic_json", "softmax-only", converted([{"layer": 0, "kind": "softmax"}, {"layer": 1, "kind": "softmax"}]))

    # ---- maps files (format mimic-distill-1)
    def maps(kind, attention, tensors, layers=(0,)):
        metrics = [{"layer": l, "after": {"heads": [{"kl": 0.1}, {"kl": 0.2}]}} for l in layers]
        md = {"format": "mimic-distill-1", "kind": kind, "attention": json.dumps(attention), "layers": json.dumps(list(layers)),
              "n_head": "2", "head_dim": "4", "source": "gpt2-plain", "model_digest": "abc", "metrics": json.dumps(metrics)}
        return safetensors(tensors, md)
    put("maps", "linear-elu", maps("linear", {"feature_map": "elu"}, [], layers=(0, 1)))
    put("maps", "linear-relu-gates", maps("linear", {"feature_map": "relu", "gates": True},
                                          [("layer_00.gates.w_q", "F32", [8, 2]), ("layer_00.gates.w_k", "F32", [8, 2])]))
    put("maps", "hedgehog", maps("linear", {"feature_map": "hedgehog", "map_options": {"feature_dim": 4}},
                                 [("layer_00.feature_map.weight", "F32", [2, 4, 4]), ("layer_00.feature_map.bias", "F32", [2, 1, 4])]))
    put("maps", "hybrid", maps("hybrid", {"window": 2, "feature_map": "elu"}, [("layer_00.window_logit", "F32", [2])]))

    # ---- GPT-2 tokenizer: vocab.json, separator, merges.txt (byte-level: every byte has a token)
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    vocab = {chr(c): i for i, c in enumerate(cs)}
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "w"), ("o", "r"), ("Ġw", "or")]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    vocab["<|endoftext|>"] = len(vocab)
    text = "#version: 0.2\n" + "".join("%s %s\n" % m for m in merges)
    put("gpt2_bpe", "byte-level", json.dumps(vocab, ensure_ascii=False).encode() + SEP + text.encode())
    put("gpt2_bpe", "crlf-no-version", json.dumps(vocab, ensure_ascii=False).encode() + SEP + text[14:].replace("\n", "\r\n").encode())

    # ---- HF tokenizer.json, separator, a text: byte-level BPE with Llama 3's split regex, and SentencePiece-style BPE
    hf_merges = [" ".join(m) for m in merges]
    added = [{"id": len(vocab), "content": "<|x|>", "special": True, "lstrip": False, "rstrip": True}]
    byte_level = {"model": {"type": "BPE", "vocab": vocab, "merges": hf_merges, "ignore_merges": True},
                  "normalizer": {"type": "NFC"},
                  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                      {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
                       "behavior": "Isolated", "invert": False},
                      {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
                  "added_tokens": added,
                  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|x|>"}}, {"Sequence": {"id": "A"}}],
                                     "special_tokens": {"<|x|>": {"id": "<|x|>", "ids": [len(vocab)]}}},
                  "decoder": {"type": "ByteLevel"}}
    put("hf_tokenizer", "byte-level", json.dumps(byte_level, ensure_ascii=False).encode() + SEP + "It's 12345 the world <|x|> ok".encode())
    spm_vocab = {"<unk>": 0, "<s>": 1, "\u2581": 2, "a": 3, "b": 4, "\u2581a": 5}
    for b in range(256):
        spm_vocab["<0x%02X>" % b] = 6 + b
    spm = {"model": {"type": "BPE", "vocab": spm_vocab, "merges": [["\u2581", "a"]], "byte_fallback": True, "unk_token": "<unk>", "fuse_unk": True},
           "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                              {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
           "pre_tokenizer": {"type": "Digits", "individual_digits": True},
           "added_tokens": [{"id": 1, "content": "<s>", "special": True}],
           "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
                                                        {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}}
    put("hf_tokenizer", "sentencepiece", json.dumps(spm, ensure_ascii=False).encode() + SEP + "a b<s>ab 42 \u00e9".encode())
    # added tokens of both passes (normalized false on the raw text, true in the normalized segments), and Metaspace's
    # split with delimiters in a row
    two_pass = dict(spm, normalizer={"type": "Sequence", "normalizers": [{"type": "Lowercase"}] + spm["normalizer"]["normalizers"]},
                    pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True},
                    added_tokens=[{"id": 1, "content": "<s>", "special": True, "normalized": False},
                                  {"id": 262, "content": "Yes", "lstrip": True, "rstrip": True, "normalized": True},
                                  {"id": 263, "content": "x", "single_word": True, "normalized": True}])
    put("hf_tokenizer", "two-pass", json.dumps(two_pass, ensure_ascii=False).encode() + SEP + "Yes  yES x <s>ax  a-b--c \u200d".encode())
    # regexes that match nothing somewhere (Split and Replace cut there, as HF's Oniguruma reports such matches), \w in a
    # class, and Metaspace's "first" after a Strip (which moves the text's start past the original's first character)
    empty_match = dict(spm, normalizer={"type": "Sequence", "normalizers": [{"type": "Strip", "strip_left": True, "strip_right": False},
                                                                           {"type": "Replace", "pattern": {"Regex": "a*"}, "content": "\u2581"}]},
                       pre_tokenizer={"type": "Sequence", "pretokenizers": [
                           {"type": "Split", "pattern": {"Regex": "(?=b)|[^\\w\\s]+"}, "behavior": "MergedWithNext", "invert": False},
                           {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}]})
    put("hf_tokenizer", "empty-match", json.dumps(empty_match, ensure_ascii=False).encode() + SEP + "  ab\u00bdba \u216b-b".encode())
    # a model "type" that is no string (the loader's look for WordPiece threw nlohmann's exception: 2026-12-07)
    put("hf_tokenizer", "model-type-number", b'{"model": {"type": 49}}' + SEP + b"x")

    # ---- BERT tokenizer: vocab.txt, separator, tokenizer_config.json
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "world", "hello", "un", "##aff", "##able", "caf", "##e", ",", "!",
             "'", "s", "it", "2024", "20", "##24", "中", "文", "a", "##b"]
    put("wordpiece", "lower", "\n".join(words).encode() + b"\n" + SEP + b'{"do_lower_case": true}')
    put("wordpiece", "cased", "\n".join(words + ["Hello", "World"]).encode() + SEP + b'{"do_lower_case": false, "model_max_length": 512}')
    put("wordpiece", "no-config", "\r\n".join(words).encode())

    # ---- classification JSON lines
    rows = [{"text": "win a free prize now", "label": "spam", "split": "train"}, {"text": "see you at lunch", "label": "ham", "split": "train"},
            {"text": "claim your reward", "label": "spam", "split": "test"}, {"text": "meeting moved to 3", "label": "ham"},
            {"text": "caf\u00e9 \u4e2d\u6587", "label": 1, "split": "validation"}]
    put("classification", "splits", "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    put("classification", "numeric-labels", "\n".join(json.dumps({"text": "t%d" % i, "label": i % 3}) for i in range(8)) + "\n\n")

    # ---- HDF5 records: the target reads its choices from the input's end (FuzzedDataProvider); an empty input
    # (or zeros) gives the valid record, other bytes bend it
    put("record", "valid", b"")
    put("record", "zeros", bytes(32))
    put("record", "f32-two-layers", bytes([1, 0, 0, 3, 1, 2, 3, 2, 1, 3]))
    put("record", "bent", bytes(range(64)))
    # fuzz_record's finding of 2026-11-27 (42494de): an attribute holding bytes that are not UTF-8
    put("record", "non-utf8-attribute", bytes.fromhex("13b15353006d00006007640270e240db000403"))

    # ---- text input
    put("text", "english", "Mr. President, in 1862 it's  the  time:\r\n\r\n\r\n\r\nWe can't--we won't!   \nDone.\n")
    put("text", "unicode", "caf\u00e9 na\u00efve \u4e2d\u6587 \U0001F600 \u00a0nbsp \u200bzero-width \u0301accent\tTabs\n")
    put("text", "numbers-and-code", "x = [1, 2, 3]; y = x ** 2 # 3.14159e-10\n<|endoftext|> [CLS] [SEP] ##ing\n")


if __name__ == "__main__":
    main()
