"""Tiny checkpoints of every family written by transformers itself, and what transformers' own forward
pass and generate() give on them: the goldens of models/qwen2's TestHFFamilies_* and
models/generate's TestGenerate_HFFamilies*.

For the transformers version of the running interpreter (a set per version: SETS), each fixture is

  model/      AutoModelForCausalLM.from_config(FamilyConfig(**kwargs), attn_implementation="eager")
              after torch.manual_seed(seed), its tensors then redrawn in place (torch.no_grad; the
              magnitudes of tiny_checkpoints.draw: transformers' own init, N(0, 0.02) with norms at
              1 and biases at 0, gives near-uniform log-probs and leaves the norm and bias weights out
              of the forward pass), cast to the set's dtype, and written by save_pretrained: config.json
              and generation_config.json carry exactly the fields that version writes (transformers 5:
              rope_parameters and dtype; 4.57: rope_theta, rope_scaling and torch_dtype).
  inputs/     left_pad, right_pad, single (qwen2-tiny's format): the pad token (pad_token_id, when the
              config has one) also stands among the real tokens, as input and as target, so that
              nn.Embedding's padding_idx rule is exercised: its row gets no gradient from the lookup.
  expected/   NAME.{float64,float32}.json (format: models/testdata/qwen2-tiny/README.md) from the
              checkpoint loaded back with from_pretrained(dtype=float64/float32, eager): the logits of
              model(input_ids, attention_mask, position_ids = cumsum(mask) - 1 with pads at 1), the
              fixture's scored-token log-probs and mean NLL, the gradient of that loss per HF tensor
              (L2, sum, first 4 values; grad.pad_row_l2: the L2 of model.embed_tokens.weight's
              gradient at row pad_token_id), and greedy generate(do_sample=False, use_cache=True and
              False, no EOS stop) with the log-probs of the chosen tokens (output_logits).

  .venv-reference/trl-1/bin/python scripts/reference/hf_families.py      # transformers 5.24.0: models/testdata/hf-5.24.0
  .venv-reference/trl-0.24/bin/python scripts/reference/hf_families.py   # transformers 4.57.6: models/testdata/hf-4.57.6
  ... hf_families.py --out DIR     # write DIR/models/testdata/hf-VERSION instead (make reference-check)

One CPU thread (one summation order): rerunning rewrites every file byte for byte.
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

import torch
import transformers
from transformers.utils import logging

logging.disable_progress_bar()
from transformers import AttentionInterface, AutoModelForCausalLM, GenerationConfig
from transformers.masking_utils import AttentionMaskInterface, eager_mask

sys.dont_write_bytecode = True  # no __pycache__ in the repository
sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_checkpoints import draw  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]  # the repository
DTYPES = {"float64": torch.float64, "float32": torch.float32}
V = 256  # vocabulary of every fixture: ids of the batches below are < V
COMMON = dict(vocab_size=V, bos_token_id=250, eos_token_id=251, attention_dropout=0.0)

QWEN2 = dict(COMMON, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=1000000.0, max_position_embeddings=4096)
QWEN3 = dict(COMMON, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, rope_theta=1000000.0,
             max_position_embeddings=4096)  # head_dim 16: q_proj 64 ≠ hidden 32
LLAMA3 = dict(COMMON, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-5, rope_theta=500000.0,
              max_position_embeddings=131072, attention_bias=True, mlp_bias=True,
              # Llama 3.2's rope_scaling; with head_dim 16 the pairs fall in all three bands
              rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 8192})
SMOLLM2 = dict(COMMON, hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=3,
               num_key_value_heads=1, rms_norm_eps=1e-5, rope_theta=100000.0, max_position_embeddings=8192,
               pad_token_id=2)  # SmolLM2's form: no head_dim (48 / 3), pad a chat token (<|im_end|> = 2)
SMOLLM3 = dict(COMMON, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
               num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=5000000.0, max_position_embeddings=65536,
               no_rope_layer_interval=2, mlp_bias=True)  # layers 1 and 3 NoPE
GEMMA3 = dict(COMMON, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, max_position_embeddings=32768,
              sliding_window=4, sliding_window_pattern=2, query_pre_attn_scalar=24, final_logit_softcapping=5.0,
              rope_theta=1000000.0, rope_local_base_freq=10000.0, rope_scaling={"rope_type": "linear", "factor": 8.0})
# Gemma3TextConfig's pad_token_id default is 0: the configs above that leave it out keep transformers'.

# name → (config class, kwargs, seed, dtype); one list per transformers version. Between the two
# sets every family is tied once and untied once (Gemma 3: tied, as every Gemma 3 checkpoint), stored
# float32 once and bfloat16 once, with a pad token among the real tokens (qwen2 in 4.57.6: none).
SETS = {
    "5.24.0": {
        "qwen2": ("Qwen2Config", dict(QWEN2, tie_word_embeddings=False, pad_token_id=7), 41, "float32"),
        "qwen3": ("Qwen3Config", dict(QWEN3, tie_word_embeddings=True, pad_token_id=0), 42, "float32"),
        "llama3": ("LlamaConfig", dict(LLAMA3, tie_word_embeddings=False, pad_token_id=3), 43, "float32"),
        "smollm2": ("LlamaConfig", dict(SMOLLM2, tie_word_embeddings=True), 44, "bfloat16"),
        "smollm3": ("SmolLM3Config", dict(SMOLLM3, tie_word_embeddings=True, pad_token_id=5), 45, "float32"),
        "gemma3": ("Gemma3TextConfig", dict(GEMMA3), 46, "float32"),
    },
    "4.57.6": {
        "qwen2": ("Qwen2Config", dict(QWEN2, tie_word_embeddings=True), 51, "bfloat16"),
        "qwen3": ("Qwen3Config", dict(QWEN3, tie_word_embeddings=False, pad_token_id=0), 52, "bfloat16"),
        "llama3": ("LlamaConfig", dict(LLAMA3, tie_word_embeddings=True, pad_token_id=3), 53, "bfloat16"),
        "smollm2": ("LlamaConfig", dict(SMOLLM2, tie_word_embeddings=False), 54, "float32"),
        "smollm3": ("SmolLM3Config", dict(SMOLLM3, tie_word_embeddings=False, pad_token_id=5), 55, "bfloat16"),
        "gemma3": ("Gemma3TextConfig", dict(GEMMA3, final_logit_softcapping=None, rope_scaling=None), 56, "bfloat16"),
    },
}


def batches(pad):
    """The three input batches; pad (or 0 without a pad token) fills the padding and, when the
    config has a pad token, also stands among the real tokens (input of the next position and a
    scored target)."""
    p = 0 if pad is None else pad
    a = [17, 201, 42, p, 99, 240, 13, p, 64]  # 9 real tokens, the pad token twice (not last: generate
    b = [11, 22, 33, 44, p, 66, 77, 88, 99, 111, 222, 233]  # warns of right padding on a final pad)
    single = [15, 17, p, 42, 27, 99, 240, 31]
    return {
        "left_pad": {"input_ids": [[p, p, p] + a, b], "attention_mask": [[0, 0, 0] + [1] * 9, [1] * 12],
                     "completion_start": 7, "max_new_tokens": 5},
        "right_pad": {"input_ids": [a + [p, p, p], b], "attention_mask": [[1] * 9 + [0, 0, 0], [1] * 12],
                      "completion_start": [4, 7]},
        "single": {"input_ids": [single], "completion_start": 1, "max_new_tokens": 8},
    }


def write_batch(path, batch):
    """One key per line, rows as JSON arrays (the qwen2-tiny inputs' layout)."""
    lines = [f' "{k}": {json.dumps(v)}' for k, v in batch.items()]
    path.write_text("{" + ",\n".join(lines).lstrip() + "}\n")


def build(name, spec, out):
    """Writes out/model (save_pretrained) and out/inputs for one fixture."""
    cls, kwargs, seed, dtype = spec
    config = getattr(transformers, cls)(**kwargs)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in model.named_parameters():  # tied: lm_head.weight is embed_tokens.weight, listed once
            p.copy_(draw(pname, tuple(p.shape), gen, config.model_type == "gemma3_text"))
    model.to(getattr(torch, dtype))
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(out / "model")
    (out / "inputs").mkdir()
    (out / "expected").mkdir()
    for bname, batch in batches(config.pad_token_id).items():
        write_batch(out / "inputs" / f"{bname}.json", batch)


def read_batch(path):
    b = json.loads(Path(path).read_text())
    ids = torch.tensor(b["input_ids"], dtype=torch.long)
    mask = torch.tensor(b["attention_mask"], dtype=torch.long) if "attention_mask" in b else torch.ones_like(ids)
    cs = b.get("completion_start", 0)
    return ids, mask, cs if isinstance(cs, list) else [cs] * ids.shape[0], b.get("max_new_tokens", 0)


def scored_mask(mask, starts):
    """Token t of row b is scored iff t >= max(1, starts[b]) and tokens t, t-1 are real."""
    B, S = mask.shape
    out = torch.zeros(B, S, dtype=torch.bool)
    for b in range(B):
        for t in range(max(1, starts[b]), S):
            out[b, t] = bool(mask[b, t] == 1 and mask[b, t - 1] == 1)
    return out


_softmax = torch.nn.functional.softmax


def _softmax_in_input_dtype(input, dim=None, _stacklevel=3, dtype=None):
    if dtype == torch.float32 and input.dtype == torch.float64:
        dtype = torch.float64
    return _softmax(input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)


def eager_float64(module, *args, **kwargs):
    """The family's own eager_attention_forward with its softmax in float64. transformers' eager
    softmax(..., dtype=torch.float32) would round float64 scores to float32, and turn the mask's
    finfo(float64).min into -inf: a left pad's row, every key masked, would be NaN, and NaN times
    its zero weight poisons the real rows' next layer."""
    eager = sys.modules[type(module).__module__].eager_attention_forward
    torch.nn.functional.softmax = _softmax_in_input_dtype
    try:
        return eager(module, *args, **kwargs)
    finally:
        torch.nn.functional.softmax = _softmax


AttentionInterface.register("eager_float64", eager_float64)
AttentionMaskInterface.register("eager_float64", eager_mask)


def load(model_dir, dtype):
    attn = "eager_float64" if dtype == torch.float64 else "eager"
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation=attn, dtype=dtype)
    model.eval()  # dropout is 0 anyway
    return model


def greedy(model, ids, mask, steps, cached):
    """generate(do_sample=False) for steps tokens, no EOS stop; the chosen tokens and their
    log-probs under the raw logits."""
    gc = GenerationConfig(do_sample=False, max_new_tokens=steps, min_new_tokens=0, use_cache=cached,
                          eos_token_id=None, bos_token_id=None, pad_token_id=model.config.pad_token_id or 0,
                          output_logits=True, return_dict_in_generate=True, num_beams=1,
                          temperature=None, top_p=None, top_k=None)
    model.generation_config.eos_token_id = None  # 4.57 would fill the unset eos_token_id from it
    out = model.generate(input_ids=ids, attention_mask=mask, generation_config=gc)
    toks = out.sequences[:, ids.shape[1]:]
    logits = torch.stack(out.logits, 1)  # [B, steps, V]
    lps = logits.log_softmax(-1).gather(-1, toks[..., None]).squeeze(-1)
    return toks, lps, logits


def checksum_weights(vocab):
    v = torch.arange(vocab, dtype=torch.int64)
    return ((v * 7919) % 1009).to(torch.float64) / 1009 - 0.5


def expected(model_dir, input_path, dtype_name):
    model = load(model_dir, DTYPES[dtype_name])
    cfg = model.config
    ids, mask, starts, max_new = read_batch(input_path)
    B, S = ids.shape
    pos = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    scored = scored_mask(mask, starts)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False).logits  # [B, S, V]
    lp = logits[:, :-1].log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)  # [B, S-1]
    n = int(scored.sum())
    loss = -lp[scored[:, 1:]].sum() / n
    loss.backward()
    with torch.no_grad():
        real = logits.detach().double()[mask == 1]
        last = [int(mask[b].nonzero().max()) for b in range(B)]
        positions = [[t for t in range(S) if scored[b, t]] for b in range(B)]
        token_lps = [[float(lp[b, t - 1]) for t in positions[b]] for b in range(B)]
        out = {
            "oracle": f"transformers {transformers.__version__} {type(model).__name__} (eager), torch {torch.__version__.split('+')[0]}",
            "model_dir": "model",
            "compute_dtype": dtype_name,
            "model_type": cfg.model_type,
            "pad_token_id": cfg.pad_token_id,
            "tie_word_embeddings": bool(cfg.tie_word_embeddings),
            "batch": B,
            "seq_len": S,
            "position_ids": pos.tolist(),
            "completion_start": starts,
            "last_index": last,
            "last_logits_first8": [[float(x) for x in logits[b, last[b], :8]] for b in range(B)],
            "last_argmax": [int(logits[b, last[b]].argmax()) for b in range(B)],
            "logits_checksum": {
                "positions": int(real.shape[0]),
                "sum": float(real.sum()),
                "abs_sum": float(real.abs().sum()),
                "sum_sq": float((real * real).sum()),
                "weighted_sum": float((real * checksum_weights(cfg.vocab_size)).sum()),
            },
            "token_positions": positions,
            "token_ids": [[int(ids[b, t]) for t in positions[b]] for b in range(B)],
            "token_logprobs": token_lps,
            "seq_logprob": [sum(r) for r in token_lps],
            "n_completion_tokens": n,
            "loss": float(loss),
        }
        l2, sums, first4 = {}, {}, {}
        for name, p in model.named_parameters():
            g = p.grad.double()
            l2[name], sums[name], first4[name] = float(g.norm()), float(g.sum()), [float(x) for x in g.flatten()[:4]]
        out["grad"] = {"l2": l2, "sum": sums, "first4": first4,
                       "global_l2": float(torch.tensor(list(l2.values()), dtype=torch.float64).norm())}
        if cfg.pad_token_id is not None:
            out["grad"]["pad_row_l2"] = float(model.get_input_embeddings().weight.grad[cfg.pad_token_id].double().norm())
        if max_new:
            tc, lc, gc = greedy(model, ids, mask, max_new, cached=True)
            tn, ln, gn = greedy(model, ids, mask, max_new, cached=False)
            out["generation"] = {
                "max_new_tokens": max_new,
                "tokens_cache": tc.tolist(),
                "tokens_nocache": tn.tolist(),
                "agree": bool(torch.equal(tc, tn)),
                "logprobs_cache": [[float(x) for x in row] for row in lc],
                "logprobs_nocache": [[float(x) for x in row] for row in ln],
                "max_abs_logit_diff_cache_vs_nocache": float((gc.double() - gn.double()).abs().max()),
            }
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT),
                    help="the tree to write models/testdata/hf-VERSION/ under (default: the repository)")
    args = ap.parse_args()
    torch.set_num_threads(1)  # one summation order
    version = transformers.__version__
    if version not in SETS:
        sys.exit(f"hf_families.py: transformers {version} has no set here (sets: {', '.join(SETS)})")
    root = Path(args.out) / "models" / "testdata" / f"hf-{version}"
    for name, spec in SETS[version].items():
        fix = root / name
        build(name, spec, fix)
        for inp in sorted((fix / "inputs").glob("*.json")):
            for dtype_name in DTYPES:
                dst = fix / "expected" / f"{inp.stem}.{dtype_name}.json"
                dst.write_text(json.dumps(expected(fix / "model", inp, dtype_name), indent=1) + "\n")
        print(f"wrote {fix} (transformers {version}, torch {torch.__version__})", file=sys.stderr)


if __name__ == "__main__":
    main()
