#!/usr/bin/env python3
"""Writes models/gguf/testdata/hf/<name>.json: what transformers' own GGUF loader makes of a GGUF
file, for package gguf's and `posttrain convert`'s tests to compare with (TestConvert_TinyMatchesHF
in models/gguf; TestConvert_RealSmolLM2 and TestConvert_RealGemma3 in cmd/posttrain):

  - config: AutoConfig.from_pretrained(dir, gguf_file=f), the keys the conversion writes;
  - tensors: sha256 of each float32 tensor of AutoModelForCausalLM.from_pretrained(dir,
    gguf_file=f, torch_dtype=float32) (transformers dequantises with gguf-py and undoes llama's
    Q/K permutation and Gemma's +1), lm_head left out when tied;
  - texts: AutoTokenizer.from_pretrained(dir, gguf_file=f)'s ids (add_special_tokens=False) of
    TEXTS, and its chat template when the file has one, with the rendering of CONVERSATION;
  - logprobs: for the real models, the log-probs of a fixed token sequence (ids) under that model
    in float32 with attn_implementation="eager": log_softmax(logits[t-1])[ids[t]] for t ≥ 1; the
    ids are the file's tokenizer's (Gemma 3: its own tokenizer.json's, with <bos>).

Environment: the reference venv (make reference-env: transformers 4.57.6, torch 2.15.0) with
gguf-py 0.19.0 beside it (transformers needs it to read GGUF):
  .venv-reference/trl-0.24/bin/python -m pip install --no-deps --target .venv-gguf-ref gguf==0.19.0
  PYTHONPATH=.venv-gguf-ref .venv-reference/trl-0.24/bin/python scripts/reference/gguf_hf_golden.py \
      models/testdata/gguf/qwen2-tiny.gguf models/testdata/gguf/qwen3-tiny.gguf \
      .real-models/SmolLM2-135M-Instruct.Q4_1.gguf .real-models/gemma-3-270m-q4_k_m.gguf
(the last two from scripts/real-models.sh). Deterministic on CPU.
"""
import gzip
import hashlib
import json
import os
import sys
from importlib.metadata import version

import numpy as np
import torch
from tokenizers import Tokenizer
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

TEXTS = ["Hello, world!", "What is the capital of France?", "Numbers 12345 and 3.14159, 2024-12-02",
         "  leading spaces and\ttabs\n\nnewlines", "héllo wörld — ünïcödé 日本語 😀", "don't I'll we've",
         "<|im_start|>user\nHi there<|im_end|>\n", "<start_of_turn>user\nHi<end_of_turn>\n", "   ", "\n\n\n",
         "a\x04b", "ÿþ\xc0\xc1"]
CONVERSATION = [{"role": "user", "content": "What is the capital of France?"}]
CONFIG_KEYS = ["model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
               "num_attention_heads", "num_key_value_heads", "head_dim", "rope_theta", "rms_norm_eps",
               "max_position_embeddings", "tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id",
               "sliding_window", "query_pre_attn_scalar", "rope_local_base_freq", "final_logit_softcapping",
               "layer_types", "rope_scaling"]
# The scored sequence of each real model: its tokenizer's ids of the text (Gemma: with its <bos>).
GEMMA3_TOKENIZER = "data/tokenizer/testdata/gemma3/tokenizer.json.gz"
LOGPROB_TEXT = "The capital of France is Paris. It is known for the Eiffel Tower and the Louvre."


def sha(t):
    return hashlib.sha256(np.ascontiguousarray(t.detach().to(torch.float32).numpy(), dtype="<f4").tobytes()).hexdigest()


def golden(path):
    d, f = os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    out = {"generator": "scripts/reference/gguf_hf_golden.py", "transformers": version("transformers"),
           "torch": version("torch"), "gguf_py": version("gguf"), "file": f,
           "file_sha256": hashlib.sha256(open(path, "rb").read()).hexdigest()}
    cfg = AutoConfig.from_pretrained(d, gguf_file=f).to_dict()
    out["config"] = {k: cfg.get(k) for k in CONFIG_KEYS if k in cfg}
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    out["texts"] = [{"text": t, "ids": tok(t, add_special_tokens=False)["input_ids"]} for t in TEXTS]
    if tok.chat_template:
        out["chat_template"] = tok.chat_template
        out["rendered"] = tok.apply_chat_template(CONVERSATION, tokenize=False, add_generation_prompt=True)
    try:
        model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32, attn_implementation="eager")
    except Exception as e:  # recorded, not hidden: the Go test says what transformers could not load
        out["load_error"] = f"{type(e).__name__}: {e}"
        print(f"{f}: transformers cannot load it: {out['load_error']}", file=sys.stderr)
        return out
    model.eval()
    tied = model.config.tie_word_embeddings
    out["tensors"] = {n: sha(t) for n, t in model.state_dict().items() if not (tied and n == "lm_head.weight")}
    if not f.startswith(("qwen2-tiny", "qwen3-tiny")):
        if model.config.model_type == "gemma3_text":
            # transformers' GGUF tokenizer for Gemma is a Unigram over the scores, not Gemma's BPE
            # (it splits " capital" in three): the ids come from Gemma 3's own tokenizer.json.
            with gzip.open(GEMMA3_TOKENIZER) as fh:
                ids = Tokenizer.from_str(fh.read().decode()).encode(LOGPROB_TEXT, add_special_tokens=True).ids
        else:
            ids = tok(LOGPROB_TEXT, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].to(torch.float64)
        lp = torch.log_softmax(logits, dim=-1)
        out["logprobs"] = {"ids": ids, "token_logprobs": [float(lp[t - 1, ids[t]]) for t in range(1, len(ids))]}
    return out


def main(paths):
    os.makedirs("models/gguf/testdata/hf", exist_ok=True)
    torch.manual_seed(0)
    for p in paths:
        g = golden(p)
        name = os.path.basename(p).removesuffix(".gguf")
        with open(f"models/gguf/testdata/hf/{name}.json", "w", encoding="utf-8") as fh:
            json.dump(g, fh, indent=1, ensure_ascii=False)
            fh.write("\n")
        print(f"wrote models/gguf/testdata/hf/{name}.json: {len(g.get('tensors', {}))} tensors, {len(g['texts'])} texts")


if __name__ == "__main__":
    main(sys.argv[1:])
