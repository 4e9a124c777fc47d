"""Qwen2 in plain PyTorch: the forward pass of transformers' Qwen2ForCausalLM (modeling_qwen2.py,
eager attention), written out so that the references need only torch (Debian's python3-torch).

What it follows, op for op where the float32 rounding depends on it:
  - embeddings; per layer: RMSNorm -> q/k/v projections (with biases) -> rotary (rotate_half) ->
    grouped-query attention (repeat_kv) with a causal + padding mask filled with finfo.min ->
    softmax -> o_proj -> residual; RMSNorm -> SwiGLU MLP -> residual; final RMSNorm; LM head
    (the embedding matrix when tie_word_embeddings);
  - RMSNorm: x * rsqrt(mean(x^2) + eps), then * weight (HF casts to float32 first: here the
    compute dtype, float32 or float64);
  - rotary: inv_freq = 1 / theta^(2i/head_dim), angles = position * inv_freq, cos/sin of
    cat(angles, angles), in the compute dtype;
  - position ids: cumsum(attention_mask) - 1 with pads set to 1 (the convention of the fixture,
    as HF's generate does);
  - scores: q k^T * head_dim^-0.5, softmax over the keys in the compute dtype.

The KV cache holds each layer's keys (after rotary) and values; a cached step attends to every
cached key allowed by the attention mask and causality.
"""

import json
import struct
from pathlib import Path

import numpy as np
import torch

ST_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16}


def read_safetensors(path):
    """The tensors of a .safetensors file by name (float32/float64/float16; no bfloat16 needed)."""
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    out, dtypes = {}, set()
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        lo, hi = meta["data_offsets"]
        arr = np.frombuffer(raw[base + lo : base + hi], dtype=ST_DTYPES[meta["dtype"]]).reshape(meta["shape"])
        out[name] = torch.from_numpy(arr.copy())
        dtypes.add(meta["dtype"])
    return out, sorted(dtypes)


class Config:
    """The fields of config.json the forward pass reads."""

    def __init__(self, path):
        c = json.loads(Path(path).read_text())
        self.hidden_size = c["hidden_size"]
        self.intermediate_size = c["intermediate_size"]
        self.num_hidden_layers = c["num_hidden_layers"]
        self.num_attention_heads = c["num_attention_heads"]
        self.num_key_value_heads = c.get("num_key_value_heads", c["num_attention_heads"])
        self.head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        self.vocab_size = c["vocab_size"]
        self.rms_norm_eps = c["rms_norm_eps"]
        self.rope_theta = c.get("rope_theta", 10000.0)
        self.tie_word_embeddings = c.get("tie_word_embeddings", False)
        if c.get("rope_scaling"):
            raise ValueError("rope_scaling is not supported by this reference")
        if c.get("use_sliding_window"):
            raise ValueError("sliding-window attention is not supported by this reference")

    def as_dict(self):
        keys = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "head_dim", "vocab_size", "rms_norm_eps", "rope_theta", "tie_word_embeddings"]
        return {k: getattr(self, k) for k in keys}

    def tensor_names(self):
        """HF tensor names in forward order (tied embeddings: no lm_head.weight)."""
        names = ["model.embed_tokens.weight"]
        for i in range(self.num_hidden_layers):
            p = f"model.layers.{i}."
            names += [p + "input_layernorm.weight"]
            for proj in "qkv":
                names += [p + f"self_attn.{proj}_proj.weight", p + f"self_attn.{proj}_proj.bias"]
            names += [p + "self_attn.o_proj.weight", p + "post_attention_layernorm.weight",
                      p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", p + "mlp.down_proj.weight"]
        names += ["model.norm.weight"]
        if not self.tie_word_embeddings:
            names += ["lm_head.weight"]
        return names


class Qwen2:
    """A Qwen2 checkpoint as leaf tensors (params, by HF name) in one compute dtype."""

    def __init__(self, model_dir, dtype):
        model_dir = Path(model_dir)
        self.cfg = Config(model_dir / "config.json")
        self.dtype = dtype
        tensors, self.stored_dtypes = read_safetensors(model_dir / "model.safetensors")
        self.params = {}
        for name in self.cfg.tensor_names():
            self.params[name] = tensors[name].to(dtype).requires_grad_(True)

    def named_parameters(self):
        return list(self.params.items())

    def rms_norm(self, x, w):
        var = x.pow(2).mean(-1, keepdim=True)
        return w * (x * torch.rsqrt(var + self.cfg.rms_norm_eps))

    def rotary(self, pos):
        """cos, sin [B, S, head_dim] for position ids pos [B, S]."""
        hd = self.cfg.head_dim
        inv_freq = 1.0 / (self.cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.int64).to(self.dtype) / hd))
        angles = pos.to(self.dtype)[:, :, None] * inv_freq[None, None, :]
        emb = torch.cat((angles, angles), dim=-1)
        return emb.cos(), emb.sin()

    def forward(self, ids, mask, pos, cache=None):
        """Logits [B, S, V] of ids [B, S] at position ids pos [B, S]. mask [B, T] covers the cached
        keys and these tokens (T = cached + S). cache: None (no cache), or a list the call extends
        with each layer's (keys, values), [] on the first call."""
        cfg, p = self.cfg, self.params
        B, S = ids.shape
        nh, nkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        past = 0 if not cache else cache[0][0].shape[2]
        T = past + S
        # [B, 1, S, T]: key j visible to query i (absolute index past+i) iff j <= past+i and mask[b, j] = 1.
        causal = torch.arange(T)[None, :] <= (past + torch.arange(S))[:, None]
        allowed = causal[None, None] & (mask[:, None, None, :] == 1)
        bias = torch.zeros(B, 1, S, T, dtype=self.dtype).masked_fill(~allowed, torch.finfo(self.dtype).min)
        cos, sin = self.rotary(pos)
        cos, sin = cos[:, None], sin[:, None]

        def rotate_half(x):
            return torch.cat((-x[..., hd // 2 :], x[..., : hd // 2]), dim=-1)

        lin = torch.nn.functional.linear
        h = p["model.embed_tokens.weight"][ids]
        for i in range(cfg.num_hidden_layers):
            L = f"model.layers.{i}."
            x = self.rms_norm(h, p[L + "input_layernorm.weight"])
            q = lin(x, p[L + "self_attn.q_proj.weight"], p[L + "self_attn.q_proj.bias"]).view(B, S, nh, hd).transpose(1, 2)
            k = lin(x, p[L + "self_attn.k_proj.weight"], p[L + "self_attn.k_proj.bias"]).view(B, S, nkv, hd).transpose(1, 2)
            v = lin(x, p[L + "self_attn.v_proj.weight"], p[L + "self_attn.v_proj.bias"]).view(B, S, nkv, hd).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            if cache is not None:
                if len(cache) > i:
                    k = torch.cat((cache[i][0], k), dim=2)
                    v = torch.cat((cache[i][1], v), dim=2)
                    cache[i] = (k, v)
                else:
                    cache.append((k, v))
            rep = nh // nkv
            k = k[:, :, None].expand(B, nkv, rep, T, hd).reshape(B, nh, T, hd)
            v = v[:, :, None].expand(B, nkv, rep, T, hd).reshape(B, nh, T, hd)
            w = torch.matmul(q, k.transpose(2, 3)) * hd**-0.5 + bias
            w = torch.softmax(w, dim=-1)
            a = torch.matmul(w, v).transpose(1, 2).reshape(B, S, nh * hd)
            h = h + lin(a, p[L + "self_attn.o_proj.weight"])
            x = self.rms_norm(h, p[L + "post_attention_layernorm.weight"])
            m = torch.nn.functional.silu(lin(x, p[L + "mlp.gate_proj.weight"])) * lin(x, p[L + "mlp.up_proj.weight"])
            h = h + lin(m, p[L + "mlp.down_proj.weight"])
        h = self.rms_norm(h, p["model.norm.weight"])
        head = p["model.embed_tokens.weight"] if cfg.tie_word_embeddings else p["lm_head.weight"]
        return lin(h, head)


def position_ids(mask):
    pos = mask.cumsum(-1) - 1
    return pos.masked_fill(mask == 0, 1)


def read_batch(path):
    """A batch file (qwen2-tiny input format): ids, mask [B, S] (all ones when absent), per-row
    completion_start, and max_new_tokens (0 when absent)."""
    b = json.loads(Path(path).read_text())
    ids = torch.tensor(b["input_ids"], dtype=torch.long)
    mask = torch.tensor(b["attention_mask"], dtype=torch.long) if "attention_mask" in b else torch.ones_like(ids)
    cs = b.get("completion_start", 0)
    starts = cs if isinstance(cs, list) else [cs] * ids.shape[0]
    return ids, mask, starts, b.get("max_new_tokens", 0)


def scored_mask(mask, starts):
    """[B, S] float: token t of row b is scored iff t >= max(1, starts[b]) and tokens t, t-1 are real."""
    B, S = mask.shape
    out = torch.zeros(B, S)
    for b in range(B):
        for t in range(max(1, starts[b]), S):
            if mask[b, t] == 1 and mask[b, t - 1] == 1:
                out[b, t] = 1
    return out


def token_logprobs(logits, ids):
    """[B, S-1]: log_softmax(logits[b, t-1])[ids[b, t]] for t = 1..S-1."""
    return logits[:, :-1].log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)


def nll(model, ids, mask, scored):
    """The mean NLL of the scored tokens (the fixture's loss; posttrain's SFT NLL over tokens)."""
    logits = model.forward(ids, mask, position_ids(mask))
    lp = token_logprobs(logits, ids)
    n = int(scored.sum())
    return -(lp * scored[:, 1:].to(lp.dtype)).sum() / max(1, n), logits
