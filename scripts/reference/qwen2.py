"""Qwen2, Qwen3, Llama, SmolLM3 and Gemma 3 in plain PyTorch: the forward pass of transformers'
Qwen2ForCausalLM (modeling_qwen2.py, eager attention), Qwen3ForCausalLM (modeling_qwen3.py),
LlamaForCausalLM (modeling_llama.py, with modeling_rope_utils.py's llama3 RoPE scaling),
SmolLM3ForCausalLM (modeling_smollm3.py) and Gemma3ForCausalLM (modeling_gemma3.py, model_type
gemma3_text, config fields of transformers 4.55), written out so that the references need only torch
(Debian's python3-torch). The families differ in what model_type fixes (Config): Qwen2's q/k/v
biases; Qwen3's per-head RMSNorm q_norm/k_norm before rotary and its default head_dim 128; Llama's
attention_bias (q/k/v/o) and mlp_bias; rope_scaling rope_type llama3; SmolLM3 is a Llama whose
NoPE layers (no_rope_layers[i] = 0, or every no_rope_layer_interval-th layer) skip the rotary.
Gemma 3 (gemma3_forward): RMSNorm x*(1+w) (Gemma3RMSNorm), embeddings times
torch.tensor(hidden_size**0.5) in the weights' dtype, q_norm/k_norm, scores times
query_pre_attn_scalar**-0.5, GELU-tanh MLP, norms before and after attention and MLP,
sliding_attention layers masked to kv_idx > q_idx - sliding_window (masking_utils'
sliding_window_overlay, over cache positions) with the default RoPE of base rope_local_base_freq,
full_attention layers with rope_theta and rope_scaling (linear: inv_freq / factor), final logits
cap * tanh(logits / cap) when final_logit_softcapping is set.

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
import math
import struct
from pathlib import Path

import numpy as np
import torch

ST_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "BF16": np.uint16}


def read_safetensors(path):
    """The tensors of a .safetensors file by name (float32/float64/float16; bfloat16 as the float32
    with the same upper 16 bits, which is exact)."""
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
        if meta["dtype"] == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[name] = torch.from_numpy(arr.copy())
        dtypes.add(meta["dtype"])
    return out, sorted(dtypes)


FAMILIES = ("qwen2", "qwen3", "llama", "smollm3", "gemma3_text")


class Config:
    """The fields of config.json the forward pass reads."""

    def __init__(self, path):
        c = json.loads(Path(path).read_text())
        self.model_type = c["model_type"]
        if self.model_type not in FAMILIES:
            raise ValueError(f"model_type {self.model_type!r} is not supported by this reference ({FAMILIES})")
        self.gemma = self.model_type == "gemma3_text"
        if self.gemma:  # Gemma3TextConfig's defaults
            c = dict({"num_key_value_heads": 4, "head_dim": 256, "rope_theta": 1_000_000.0, "tie_word_embeddings": True,
                      "rms_norm_eps": 1e-6}, **c)
        self.hidden_size = c["hidden_size"]
        self.intermediate_size = c["intermediate_size"]
        self.num_hidden_layers = c["num_hidden_layers"]
        self.num_attention_heads = c["num_attention_heads"]
        smol = self.model_type == "smollm3"
        # SmolLM3Config's defaults differ: 4 key/value heads, rope_theta 2e6, tied embeddings.
        self.num_key_value_heads = c.get("num_key_value_heads") or (4 if smol else c["num_attention_heads"])
        default_head_dim = 128 if self.model_type == "qwen3" else None  # Qwen3Config's default
        self.head_dim = c.get("head_dim", default_head_dim) or c["hidden_size"] // c["num_attention_heads"]
        self.vocab_size = c["vocab_size"]
        self.rms_norm_eps = c["rms_norm_eps"]
        self.rope_theta = c.get("rope_theta", 2000000.0 if smol else 10000.0)
        self.tie_word_embeddings = c.get("tie_word_embeddings", smol)
        # Qwen2: q/k/v biases, none on o_proj; Qwen3, Llama: attention_bias on q/k/v/o.
        self.qkv_bias = self.model_type == "qwen2" or c.get("attention_bias", False)
        self.o_bias = self.model_type != "qwen2" and c.get("attention_bias", False)
        self.mlp_bias = self.model_type in ("llama", "smollm3") and c.get("mlp_bias", False)
        self.qk_norm = self.model_type == "qwen3"
        self.rope_scaling = c.get("rope_scaling")
        rope_type = self.rope_scaling.get("rope_type", self.rope_scaling.get("type")) if self.rope_scaling else None
        if rope_type and rope_type != ("linear" if self.gemma else "llama3"):
            raise ValueError(f"rope_scaling {self.rope_scaling} is not supported by this reference (llama3; gemma3_text: linear)")
        if c.get("use_sliding_window"):
            raise ValueError("sliding-window attention is not supported by this reference")
        if self.gemma:
            self.qk_norm = True
            if c.get("hidden_activation", "gelu_pytorch_tanh") != "gelu_pytorch_tanh" or c.get("attn_logit_softcapping") is not None:
                raise ValueError("this reference has Gemma 3 with gelu_pytorch_tanh and no attention soft-capping only")
            self.query_pre_attn_scalar = c.get("query_pre_attn_scalar", 256)
            self.sliding_window = c.get("sliding_window", 4096)
            self.rope_local_base_freq = c.get("rope_local_base_freq", 10_000.0)
            self.final_logit_softcapping = c.get("final_logit_softcapping")
            pattern = c.get("sliding_window_pattern", 6)  # configuration_gemma3.py: layer_types from the pattern
            self.layer_types = c.get("layer_types") or [
                "sliding_attention" if bool((i + 1) % pattern) else "full_attention" for i in range(self.num_hidden_layers)]
        # SmolLM3 (configuration_smollm3.py): no_rope_layers[i] = 1 where layer i applies rotary, 0 on
        # its NoPE layers; derived from no_rope_layer_interval (default 4) when absent. Others: all 1.
        self.no_rope_layers = [1] * self.num_hidden_layers
        if smol:
            interval = c.get("no_rope_layer_interval") or 4
            self.no_rope_layers = c.get("no_rope_layers") or [
                int((i + 1) % interval != 0) for i in range(self.num_hidden_layers)]

    def as_dict(self):
        keys = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "head_dim", "vocab_size", "rms_norm_eps", "rope_theta", "tie_word_embeddings"]
        if self.model_type != "qwen2":  # the Qwen2 files keep their format_version 1 keys
            keys = ["model_type"] + keys + ["qkv_bias", "o_bias", "mlp_bias", "qk_norm", "rope_scaling"]
        if self.gemma:
            keys += ["query_pre_attn_scalar", "sliding_window", "rope_local_base_freq", "final_logit_softcapping", "layer_types"]
        if self.model_type == "smollm3":
            keys += ["no_rope_layers"]
        return {k: getattr(self, k) for k in keys}

    def tensor_names(self):
        """HF tensor names in forward order (tied embeddings: no lm_head.weight)."""
        names = ["model.embed_tokens.weight"]
        for i in range(self.num_hidden_layers):
            p = f"model.layers.{i}."
            names += [p + "input_layernorm.weight"]
            for proj in "qkv":
                names += [p + f"self_attn.{proj}_proj.weight"] + ([p + f"self_attn.{proj}_proj.bias"] if self.qkv_bias else [])
            names += [p + "self_attn.o_proj.weight"] + ([p + "self_attn.o_proj.bias"] if self.o_bias else [])
            if self.qk_norm:
                names += [p + "self_attn.q_norm.weight", p + "self_attn.k_norm.weight"]
            names += [p + "post_attention_layernorm.weight"]
            if self.gemma:
                names += [p + "pre_feedforward_layernorm.weight", p + "post_feedforward_layernorm.weight"]
            for proj in ("gate", "up", "down"):
                names += [p + f"mlp.{proj}_proj.weight"] + ([p + f"mlp.{proj}_proj.bias"] if self.mlp_bias else [])
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
        if self.cfg.gemma:  # Gemma3RMSNorm: (x * rsqrt(var + eps)) * (1 + w)
            return (x * torch.rsqrt(var + self.cfg.rms_norm_eps)) * (1.0 + w)
        return w * (x * torch.rsqrt(var + self.cfg.rms_norm_eps))

    def rotary(self, pos, local=False):
        """cos, sin [B, S, head_dim] for position ids pos [B, S]; local: Gemma 3's sliding layers'
        (the default RoPE with base rope_local_base_freq)."""
        hd = self.cfg.head_dim
        base = self.cfg.rope_local_base_freq if local else self.cfg.rope_theta
        inv_freq = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.int64).to(self.dtype) / hd))
        if self.cfg.rope_scaling and not local:
            if self.cfg.gemma:  # _compute_linear_scaling_rope_parameters
                inv_freq = inv_freq / self.cfg.rope_scaling["factor"]
            else:
                inv_freq = llama3_inv_freq(inv_freq, self.cfg.rope_scaling)
        angles = pos.to(self.dtype)[:, :, None] * inv_freq[None, None, :]
        emb = torch.cat((angles, angles), dim=-1)
        return emb.cos(), emb.sin()

    def forward(self, ids, mask, pos, cache=None):
        """Logits [B, S, V] of ids [B, S] at position ids pos [B, S]. mask [B, T] covers the cached
        keys and these tokens (T = cached + S). cache: None (no cache), or a list the call extends
        with each layer's (keys, values), [] on the first call."""
        if self.cfg.gemma:
            return self.gemma3_forward(ids, mask, pos, cache)
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

        def lin(x, name):
            return torch.nn.functional.linear(x, p[name + ".weight"], p.get(name + ".bias"))

        h = p["model.embed_tokens.weight"][ids]
        for i in range(cfg.num_hidden_layers):
            L = f"model.layers.{i}."
            x = self.rms_norm(h, p[L + "input_layernorm.weight"])
            q = lin(x, L + "self_attn.q_proj").view(B, S, nh, hd)
            k = lin(x, L + "self_attn.k_proj").view(B, S, nkv, hd)
            if cfg.qk_norm:  # Qwen3: RMSNorm over each head's hd, before the transpose and rotary
                q = self.rms_norm(q, p[L + "self_attn.q_norm.weight"])
                k = self.rms_norm(k, p[L + "self_attn.k_norm.weight"])
            q, k = q.transpose(1, 2), k.transpose(1, 2)
            v = lin(x, L + "self_attn.v_proj").view(B, S, nkv, hd).transpose(1, 2)
            if cfg.no_rope_layers[i]:  # SmolLM3's NoPE layers skip the rotary (SmolLM3Attention.use_rope)
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
            h = h + lin(a, L + "self_attn.o_proj")
            x = self.rms_norm(h, p[L + "post_attention_layernorm.weight"])
            m = torch.nn.functional.silu(lin(x, L + "mlp.gate_proj")) * lin(x, L + "mlp.up_proj")
            h = h + lin(m, L + "mlp.down_proj")
        h = self.rms_norm(h, p["model.norm.weight"])
        head = p["model.embed_tokens.weight"] if cfg.tie_word_embeddings else p["lm_head.weight"]
        return torch.nn.functional.linear(h, head)

    def gemma3_forward(self, ids, mask, pos, cache):
        """forward for Gemma3ForCausalLM, op for op after modeling_gemma3.py (eager attention)."""
        cfg, p = self.cfg, self.params
        B, S = ids.shape
        nh, nkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        past = 0 if not cache else cache[0][0].shape[2]
        T = past + S
        q_idx, kv_idx = (past + torch.arange(S))[:, None], torch.arange(T)[None, :]
        causal = (kv_idx <= q_idx)[None, None] & (mask[:, None, None, :] == 1)
        sliding = causal & (kv_idx > q_idx - cfg.sliding_window)[None, None]  # sliding_window_overlay
        bias = {kind: torch.zeros(B, 1, S, T, dtype=self.dtype).masked_fill(~allowed, torch.finfo(self.dtype).min)
                for kind, allowed in (("full_attention", causal), ("sliding_attention", sliding))}
        rope = {"full_attention": self.rotary(pos), "sliding_attention": self.rotary(pos, local=True)}

        def rotate_half(x):
            return torch.cat((-x[..., hd // 2 :], x[..., : hd // 2]), dim=-1)

        def lin(x, name):
            return torch.nn.functional.linear(x, p[name + ".weight"], p.get(name + ".bias"))

        # Gemma3TextScaledWordEmbedding: the scale is a float32 tensor cast to the weights' dtype
        h = p["model.embed_tokens.weight"][ids] * torch.tensor(cfg.hidden_size**0.5).to(self.dtype)
        for i in range(cfg.num_hidden_layers):
            L, kind = f"model.layers.{i}.", cfg.layer_types[i]
            cos, sin = rope[kind]
            cos, sin = cos[:, None], sin[:, None]
            residual = h
            x = self.rms_norm(h, p[L + "input_layernorm.weight"])
            q = lin(x, L + "self_attn.q_proj").view(B, S, nh, hd).transpose(1, 2)
            k = lin(x, L + "self_attn.k_proj").view(B, S, nkv, hd).transpose(1, 2)
            v = lin(x, L + "self_attn.v_proj").view(B, S, nkv, hd).transpose(1, 2)
            q = self.rms_norm(q, p[L + "self_attn.q_norm.weight"])
            k = self.rms_norm(k, p[L + "self_attn.k_norm.weight"])
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
            w = torch.matmul(q, k.transpose(2, 3)) * cfg.query_pre_attn_scalar**-0.5 + bias[kind]
            w = torch.softmax(w, dim=-1)
            a = torch.matmul(w, v).transpose(1, 2).reshape(B, S, nh * hd)
            h = lin(a, L + "self_attn.o_proj")
            h = residual + self.rms_norm(h, p[L + "post_attention_layernorm.weight"])
            residual = h
            x = self.rms_norm(h, p[L + "pre_feedforward_layernorm.weight"])
            x = torch.nn.functional.gelu(lin(x, L + "mlp.gate_proj"), approximate="tanh") * lin(x, L + "mlp.up_proj")
            h = residual + self.rms_norm(lin(x, L + "mlp.down_proj"), p[L + "post_feedforward_layernorm.weight"])
        h = self.rms_norm(h, p["model.norm.weight"])
        head = p["model.embed_tokens.weight"] if cfg.tie_word_embeddings else p["lm_head.weight"]
        logits = torch.nn.functional.linear(h, head)
        if cfg.final_logit_softcapping is not None:
            logits = torch.tanh(logits / cfg.final_logit_softcapping) * cfg.final_logit_softcapping
        return logits


def llama3_inv_freq(inv_freq, rs):
    """modeling_rope_utils.py's _compute_llama3_parameters: long wavelengths divided by factor, short
    ones kept, those between interpolated (attention scaling stays 1)."""
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama
    is_medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(is_medium, smoothed, inv_freq_llama)


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
