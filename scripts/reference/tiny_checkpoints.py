#!/usr/bin/python3
"""Writes the tiny random Qwen3, Llama, SmolLM3 and Gemma 3 checkpoints of models/testdata/*-tiny in
HuggingFace layout: config.json as transformers' configuration classes write it (sorted keys, two-space
indent) and model.safetensors with HF's tensor names ({"format": "pt"} metadata, tensors sorted by name,
the header padded with spaces to 8 bytes, as safetensors' save_file does). The inputs/ are the
qwen2-tiny fixture's batches (token ids < 512, the vocabulary here and models/tinymodel's).

Weights are drawn from torch.Generator seeds, with magnitudes that make the outputs depend on every
tensor (the qwen2-tiny fixture's scale): embeddings and lm_head N(0, 0.25²), projections N(0, 1/in),
down_proj N(0, 0.25/in), biases N(0, 0.3²), norm weights 1 + N(0, 0.2²) (q_norm and k_norm too; Gemma's,
which scale by 1 + w, N(0, 0.2²)).

  /usr/bin/python3 scripts/reference/tiny_checkpoints.py            # (re)write the fixtures' model/ and inputs/
  /usr/bin/python3 scripts/reference/qwen2_ref.py --fixture models/testdata/qwen3-tiny --write   # then their expected/

Fixtures:
  qwen3-tiny    model_type qwen3: q_norm/k_norm, no biases, head_dim 32 with hidden 64 and 4 heads
                (q_proj 128 ≠ hidden), GQA 4:2, tied, float32.
  llama-tiny    model_type llama (Llama 3.2's form): rope_scaling llama3 (factor 32, low 1, high 4,
                original 8192: with rope_theta 500000 and head_dim 16 the pairs fall in all three bands),
                attention_bias and mlp_bias true (both bias paths), head_dim written, untied, float32.
  smollm2-tiny  model_type llama as SmolLM2 writes it: no rope_scaling, no biases, no head_dim
                (hidden 48 / 3 heads), GQA 3:1, tied, stored bfloat16.
  smollm3-tiny  model_type smollm3 as SmolLM3Config writes it: 4 layers, no_rope_layer_interval 2 and the
                no_rope_layers [1, 0, 1, 0] derived from it (layers 1 and 3 NoPE), layer_types, rope_theta
                5e6 (the 3B's), mlp_bias true, no attention bias (on a NoPE layer k_proj.bias has a zero
                gradient: a key offset shared by all positions cancels in the softmax), no head_dim (64 / 4
                heads), GQA 4:2, tied,
                float32.
  gemma3-tiny   model_type gemma3_text as gemma-3-270m's config.json (transformers 4.55) writes it:
                layer_types [sliding, full] with sliding_window 4 (shorter than every test sequence),
                rope_local_base_freq 10000 vs rope_theta 1e6 with rope_scaling linear factor 8 (the
                4B's form), head_dim 32 with hidden 64 and 4/2 heads, query_pre_attn_scalar 24 (not
                head_dim), final_logit_softcapping 5, tied, float32.
  gemma3-bf16-tiny  gemma3_text as gemma-3-1b's config.json (transformers 4.50) writes it: no
                layer_types, sliding_window_pattern 2 (layer 0 sliding, 1 full), sliding_window 3,
                no soft-capping, no rope_scaling, hidden 48, 3/1 heads, head_dim 16, stored bfloat16.
"""

import json
import shutil
import struct
import sys
from pathlib import Path

import torch

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import qwen2  # noqa: E402

TESTDATA = Path(__file__).resolve().parents[2] / "models" / "testdata"

COMMON = {"vocab_size": 512, "hidden_act": "silu", "initializer_range": 0.02, "attention_dropout": 0.0,
          "use_cache": True, "bos_token_id": 509, "eos_token_id": 511}

FIXTURES = {
    "qwen3-tiny": dict(COMMON, **{
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "rope_scaling": None,
        "attention_bias": False, "use_sliding_window": False, "sliding_window": None, "max_window_layers": 2,
        "tie_word_embeddings": True, "torch_dtype": "float32", "seed": 31}),
    "llama-tiny": dict(COMMON, **{
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "attention_bias": True, "mlp_bias": True, "pretraining_tp": 1, "tie_word_embeddings": False,
        "torch_dtype": "float32", "seed": 32}),
    "smollm2-tiny": dict(COMMON, **{
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 48, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 3, "num_key_value_heads": 1,
        "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "rope_theta": 100000.0, "rope_scaling": None,
        "attention_bias": False, "mlp_bias": False, "pretraining_tp": 1, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "seed": 33}),
    "smollm3-tiny": dict(COMMON, **{
        "architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3", "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 65536, "rms_norm_eps": 1e-06, "rope_theta": 5000000.0, "rope_scaling": None,
        "no_rope_layer_interval": 2, "no_rope_layers": [1, 0, 1, 0], "layer_types": ["full_attention"] * 4,
        "use_sliding_window": False, "sliding_window": None, "attention_bias": False, "mlp_bias": True,
        "tie_word_embeddings": True, "torch_dtype": "float32", "seed": 34}),
    "gemma3-tiny": dict(COMMON, **{
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "rope_local_base_freq": 10000.0,
        "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 4, "_sliding_window_pattern": 2,
        "query_pre_attn_scalar": 24, "final_logit_softcapping": 5.0, "attn_logit_softcapping": None,
        "hidden_activation": "gelu_pytorch_tanh", "attention_bias": False, "use_bidirectional_attention": False,
        "pad_token_id": 0, "tie_word_embeddings": True, "torch_dtype": "float32", "seed": 34}),
    "gemma3-bf16-tiny": dict(COMMON, **{
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 48, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 3, "num_key_value_heads": 1, "head_dim": 16,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "rope_scaling": None,
        "rope_local_base_freq": 10000.0, "sliding_window_pattern": 2, "sliding_window": 3,
        "query_pre_attn_scalar": 16, "final_logit_softcapping": None, "attn_logit_softcapping": None,
        "hidden_activation": "gelu_pytorch_tanh", "attention_bias": False, "cache_implementation": "hybrid",
        "pad_token_id": 0, "torch_dtype": "bfloat16", "seed": 35}),
}


def draw(name, shape, gen, gemma):
    """One tensor's random values (float32)."""
    if name.endswith("norm.weight"):
        return (0 if gemma else 1) + 0.2 * torch.randn(shape, generator=gen)
    if name.endswith(".bias"):
        return 0.3 * torch.randn(shape, generator=gen)
    if "embed_tokens" in name or name == "lm_head.weight":
        return 0.25 * torch.randn(shape, generator=gen)
    scale = (0.25 if "down_proj" in name else 1.0) / shape[1] ** 0.5
    return scale * torch.randn(shape, generator=gen)


def shapes(cfg):
    """HF name → shape for every tensor of cfg (a qwen2.Config)."""
    d, hd, inter = cfg.hidden_size, cfg.head_dim, cfg.intermediate_size
    q, kv = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    out = {}
    for name in cfg.tensor_names():
        base = name.rsplit(".", 2)[-2] if name.startswith("model.layers.") else name
        table = {"q_proj": (q, d), "k_proj": (kv, d), "v_proj": (kv, d), "o_proj": (d, q), "gate_proj": (inter, d),
                 "up_proj": (inter, d), "down_proj": (d, inter), "q_norm": (hd,), "k_norm": (hd,),
                 "input_layernorm": (d,), "post_attention_layernorm": (d,), "pre_feedforward_layernorm": (d,),
                 "post_feedforward_layernorm": (d,),
                 "model.embed_tokens.weight": (cfg.vocab_size, d), "model.norm.weight": (d,),
                 "lm_head.weight": (cfg.vocab_size, d)}
        shape = table[base]
        out[name] = shape[:1] if name.endswith(".bias") else shape
    return out


def write_safetensors(path, tensors, dtype):
    """tensors (name → float32 tensor) stored as dtype ("F32" or "BF16", rounded to nearest even)."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = t.numpy().tobytes() if dtype == "F32" else t.to(torch.bfloat16).view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    for name, conf in FIXTURES.items():
        conf = dict(conf)
        seed = conf.pop("seed")
        model = TESTDATA / name / "model"
        model.mkdir(parents=True, exist_ok=True)
        (model / "config.json").write_text(json.dumps(conf, indent=2, sort_keys=True) + "\n")
        cfg = qwen2.Config(model / "config.json")
        gen = torch.Generator().manual_seed(seed)
        tensors = {n: draw(n, s, gen, cfg.gemma) for n, s in shapes(cfg).items()}
        write_safetensors(model / "model.safetensors", tensors, "BF16" if conf["torch_dtype"] == "bfloat16" else "F32")
        inputs = TESTDATA / name / "inputs"
        inputs.mkdir(exist_ok=True)
        (TESTDATA / name / "expected").mkdir(exist_ok=True)
        for f in sorted((TESTDATA / "qwen2-tiny" / "inputs").glob("*.json")):
            shutil.copyfile(f, inputs / f.name)
        print(f"wrote {model} ({len(tensors)} tensors) and {inputs}")


if __name__ == "__main__":
    main()
