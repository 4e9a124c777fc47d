#!/usr/bin/env python3
"""Writes models/testdata/gguf/{qwen2-tiny,qwen3-tiny}.gguf: the tiny HF checkpoints of
models/testdata (qwen2-tiny, qwen3-tiny) with the cut-down Qwen tokenizer of models/tinymodel,
written as GGUF with llama.cpp's own Python package gguf (gguf-py, pinned below) the way llama.cpp's
convert_hf_to_gguf.py writes a Qwen2/Qwen3 checkpoint (Qwen2Model / Qwen3Model, TextModel):

  - metadata: TextModel.set_gguf_parameters' keys (context_length, embedding_length, block_count,
    feed_forward_length, head_count, head_count_kv, rope.freq_base, layer_norm_rms_epsilon;
    key_length and value_length when config.json has head_dim), general.file_type;
  - vocabulary: _set_vocab_gpt2 / get_vocab_base: tokens by id, padded to vocab_size with
    "[PAD{i}]" of type UNUSED; added tokens marked special are CONTROL, other added ones
    USER_DEFINED, the rest NORMAL; tokenizer.ggml.pre "qwen2" (what its hash check gives Qwen's
    tokenizer; this cut-down one has no registered hash); the merges as "a b"; gguf.SpecialVocab's
    bos/eos from config.json and pad from tokenizer_config.json, the chat template;
  - tensors: HF names mapped by gguf.get_tensor_name_map (the converter's TensorNameMap), no
    permutation (Qwen is not llama's LlamaModel), 1-D tensors F32; 2-D ones Q8_0 for qwen2-tiny
    (gguf.quants.quantize; mlp.down_proj, whose 176-wide rows are not whole
    32-blocks, falls back to F16 as the converter does) and F16 for qwen3-tiny (--outtype f16).

Usage (run from the repository root; see models/testdata/README.md):
  python3 -m venv .venv-gguf && .venv-gguf/bin/pip install gguf==0.19.0 safetensors==0.8.0
  .venv-gguf/bin/python scripts/reference/gguf_tiny.py
Deterministic: rerunning rewrites both files byte for byte.
"""
import json
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from safetensors.numpy import load_file

GGUF_PY_VERSION = "0.19.0"
TOKENIZER = "models/tinymodel/files"
FIXTURES = [  # fixture, gguf architecture, 2-D tensor type, file type
    ("qwen2-tiny", gguf.MODEL_ARCH.QWEN2, Q.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    ("qwen3-tiny", gguf.MODEL_ARCH.QWEN3, Q.F16, gguf.LlamaFileType.MOSTLY_F16),
]


def vocab(cfg):
    tj = json.load(open(f"{TOKENIZER}/tokenizer.json", encoding="utf-8"))
    tc = json.load(open(f"{TOKENIZER}/tokenizer_config.json", encoding="utf-8"))
    by_id = {i: t for t, i in tj["model"]["vocab"].items()}
    added = {a["id"]: a for a in tj["added_tokens"]}
    for i, a in added.items():
        by_id[i] = a["content"]
    tokens, types = [], []
    for i in range(cfg["vocab_size"]):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif i in added:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if added[i]["special"] else gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.NORMAL)
    merges = [" ".join(m) if isinstance(m, list) else m for m in tj["model"]["merges"]]
    pad = tj["model"]["vocab"].get(tc["pad_token"], next(i for i, a in added.items() if a["content"] == tc["pad_token"]))
    return tokens, types, merges, pad, tc["chat_template"]


def write(fixture, arch, qtype, ftype):
    src = f"models/testdata/{fixture}/model"
    cfg = json.load(open(f"{src}/config.json"))
    weights = load_file(f"{src}/model.safetensors")
    n = cfg["num_hidden_layers"]
    w = gguf.GGUFWriter(f"models/testdata/gguf/{fixture}.gguf", gguf.MODEL_ARCH_NAMES[arch])
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(fixture)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(n)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if "head_dim" in cfg:
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    tokens, types, merges, pad, template = vocab(cfg)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    w.add_pad_token_id(pad)
    w.add_chat_template(template)
    names = gguf.get_tensor_name_map(arch, n)
    for hf in sorted(weights):
        base, suffix = hf.rsplit(".", 1)
        name = names.get_name(base)
        if name is None:
            sys.exit(f"{fixture}: no GGUF name for {hf}")
        x = weights[hf].astype(np.float32)
        if x.ndim == 1:
            w.add_tensor(f"{name}.{suffix}", x)
        elif qtype == Q.F16:
            w.add_tensor(f"{name}.{suffix}", x.astype(np.float16))
        else:
            try:  # as ModelBase.prepare_tensors: a row that is not whole blocks falls back to F16
                w.add_tensor(f"{name}.{suffix}", gguf.quants.quantize(x, qtype), raw_dtype=qtype)
            except gguf.QuantError:
                w.add_tensor(f"{name}.{suffix}", x.astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    from importlib.metadata import version
    if version("gguf") != GGUF_PY_VERSION:
        sys.exit(f"gguf {version('gguf')} is installed; this script pins gguf=={GGUF_PY_VERSION}")
    for f in FIXTURES:
        write(*f)
