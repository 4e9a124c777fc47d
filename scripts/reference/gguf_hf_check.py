#!/usr/bin/env python3
"""Cross-checks `posttrain convert` against transformers' own GGUF loader (no torch needed for the
parts used): the config transformers builds from the GGUF metadata, the tokenizer it rebuilds from
it, and every weight as gguf-py dequantises it and transformers' LlamaTensorProcessor un-permutes
it (attn_q/attn_k), against the converted directory's config.json, tokenizer.json (run by HF
tokenizers, not by posttrain) and model.safetensors (bit for bit; F32 only). Not a golden: it prints what differs and exits non-zero on an
unexplained difference.

Known, expected differences (transformers 4.57.1):
  - rms_norm_eps: transformers keeps the float32 value (9.99999974738e-06); convert writes the
    shortest decimal that round-trips through float32 (1e-05, the original config.json's).
  - transformers' rebuilt tokenizer sets unk_token, so a byte the vocabulary lacks becomes unk;
    the converted tokenizer drops it, as the original tokenizer.json (unk_token null) does.
  - transformers prefixes bos although tokenizer.ggml.add_bos_token is false, so texts are
    compared with add_special_tokens=False.

Usage:
  python3 -m venv .venv-gguf && .venv-gguf/bin/pip install gguf==0.19.0 transformers==4.57.1 tokenizers==0.22.1 jinja2==3.1.6
  posttrain convert FILE.gguf --out DIR
  .venv-gguf/bin/python scripts/reference/gguf_hf_check.py FILE.gguf DIR
"""
import json
import os
import sys

import numpy as np
import transformers.modeling_gguf_pytorch_utils as gguf_utils
from gguf import GGUFReader
from gguf.quants import dequantize
from tokenizers import Tokenizer
from transformers import AutoConfig, AutoTokenizer

TEXTS = ["Hello, world!", "a\x04b", "x\x06\x13\x14\x16\x1dy", "What is the capital of France?",
         "Numbers 12345 and 3.14159, 2024-12-02", "<|im_start|>user\nHi there<|im_end|>\n",
         "  leading spaces and\ttabs\n\nnewlines", "héllo wörld — ünïcödé 日本語 😀", "don't I'll we've",
         "<file_sep>code<jupyter_code>x=1", "   ", "\n\n\n", "ÿþ\xc0\xc1"]
MODEL_KEYS = ["model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
              "num_attention_heads", "num_key_value_heads", "head_dim", "rope_theta", "max_position_embeddings",
              "tie_word_embeddings", "bos_token_id", "eos_token_id", "attention_bias", "mlp_bias", "rope_scaling"]


# llama.cpp → HF names (gguf-py's tensor_mapping for MODEL_ARCH.LLAMA); "blk.N." → "model.layers.N.".
NAMES = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm", "attn_q": "self_attn.q_proj",
         "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
         "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
TOP = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
       "output.weight": "lm_head.weight"}


def hf_name(name):
    if name in TOP:
        return TOP[name]
    _, n, rest = name.split(".", 2)
    part, suffix = rest.rsplit(".", 1)
    return f"model.layers.{n}.{NAMES[part]}.{suffix}"


def read_safetensors(path):
    with open(path, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(n))
        base = 8 + n
    data = np.memmap(path, mode="r")
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", f"{name}: convert with --dtype float32 for this check"
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[base + a:base + b], dtype="<f4").reshape(t["shape"])
    return out


def check_weights(path, out, cfg):
    proc = gguf_utils.LlamaTensorProcessor(config=cfg)
    mine = read_safetensors(os.path.join(out, "model.safetensors"))
    bad = 0
    reader = GGUFReader(path)
    for t in reader.tensors:
        w = dequantize(np.asarray(t.data), t.tensor_type).reshape([int(d) for d in reversed(t.shape)])
        w = proc.process(w, t.name).weights
        got = mine.get(hf_name(t.name))
        if got is None or got.shape != w.shape or not np.array_equal(got.view("<u4"), w.astype("<f4").view("<u4")):
            print(f"tensor {t.name} → {hf_name(t.name)}: differs")
            bad += 1
    print(f"{len(reader.tensors) - bad}/{len(reader.tensors)} tensors equal bit for bit")
    return bad


def main(path, out):
    gguf_utils.is_torch_available = lambda: True  # only the metadata is read: no tensors, no torch
    d, f = os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    bad = 0
    hf_cfg = AutoConfig.from_pretrained(d, gguf_file=f).to_dict()
    mine = json.load(open(os.path.join(out, "config.json")))
    for k in MODEL_KEYS:
        if hf_cfg.get(k) != mine.get(k):
            print(f"config {k}: transformers {hf_cfg.get(k)!r}, converted {mine.get(k)!r}")
            bad += 1
    eps = (hf_cfg["rms_norm_eps"], mine["rms_norm_eps"])
    print(f"config rms_norm_eps: transformers {eps[0]!r}, converted {eps[1]!r} (expected to differ in spelling only)")
    ref = AutoTokenizer.from_pretrained(d, gguf_file=f)
    conv = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    unk = ref.unk_token_id
    same = 0
    for text in TEXTS:
        a = ref(text, add_special_tokens=False)["input_ids"]
        b = conv.encode(text, add_special_tokens=False).ids
        if a == b:
            same += 1
        elif [i for i in a if i != unk] == b:
            print(f"text {text!r}: equal but for transformers' unk ({unk}) where the vocabulary lacks a byte")
            same += 1
        else:
            print(f"text {text!r}: transformers {a}, converted {b}")
            bad += 1
    print(f"{same}/{len(TEXTS)} texts tokenise alike")
    bad += check_weights(path, out, hf_cfg)
    print(f"{bad} unexplained differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
