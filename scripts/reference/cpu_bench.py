"""PyTorch's side of `make bench`: the CPU workloads of bench/'s BenchmarkCPU, timed once with
PyTorch 2.x from PyPI (the reference venv of `make reference-env`, its default CPU kernels),
random weights of the same shapes. It writes its figures as JSON ({"torch": version, "threads": n,
"workloads": {name: {"s": ..., ...}}}); scripts/bench-cpu.sh runs it once per round, between
posttrain's sides, and apps/bench/cpucompare makes the table of all rounds.

Workloads (the same shapes and statistics as BenchmarkCPU; each after one untimed warm-up):
  forward  per-token log-probs (log_softmax + gather) of batch 2 x 64 on the eighth-width
           Qwen2.5 config (hidden 896, 14/2 heads, intermediate 4864, vocabulary 8192, 2 layers),
           no gradient: median of 5
  adamw    forward, mean NLL, backward, clip_grad_norm_(1), torch.optim.AdamW on the same batch:
           median of 3
  decode   batch-1 greedy decoding at Qwen2.5-0.5B's shape (vocabulary 151936, hidden 896, 24
           layers, 14/2 heads, intermediate 4864, tied) in float32 with transformers'
           Qwen2ForCausalLM.generate (KV cache, its default attention): an 8-token prompt, 32 new
           tokens, EOS ignored; tokens/s of the 31 decode steps (timed from the logits of the
           prompt pass to those of the last step, by a logits processor)
  decode_bf16  the same with the model in bfloat16
  grpo     one GRPO-style step on the eighth config: 2 prompts x 4 completions of 16 tokens
           sampled at temperature 1 from 16-token prompts (KV cache), reward = fraction of even
           ids, group advantages, one clipped-surrogate AdamW update on the 8 completions:
           median of 3 steps (each figure its own median)

forward, adamw and grpo run qwen2.py's plain-PyTorch Qwen2 in float32 (as the Go tests'
references do); PyTorch runs eagerly, so it has no compile time to report.

Usage: .venv-reference/trl-0.24/bin/python scripts/reference/cpu_bench.py [--threads 2]
       [--only forward,adamw] [--json figures.json]
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qwen2  # noqa: E402  (this directory's plain-PyTorch Qwen2)

EIGHTH = dict(vocab_size=8192, hidden_size=896, intermediate_size=4864, num_hidden_layers=2)
QWEN25_05B = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24)


def random_model(shape, seed):
    """qwen2.Qwen2 with Qwen2.5's features at shape, weights ~ N(0, 0.02²), norms 1, biases 0."""
    c = dict(model_type="qwen2", num_attention_heads=14, num_key_value_heads=2, head_dim=64, rms_norm_eps=1e-6,
             rope_theta=1e6, tie_word_embeddings=True, **shape)
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "config.json").write_text(json.dumps(c))
        cfg = qwen2.Config(Path(d) / "config.json")
    m = qwen2.Qwen2.__new__(qwen2.Qwen2)
    m.cfg, m.dtype, m.params = cfg, torch.float32, {}
    gen = torch.Generator().manual_seed(seed)
    nh, nkv, hd, D, I = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.hidden_size, cfg.intermediate_size
    shapes = {"model.embed_tokens.weight": (cfg.vocab_size, D), "model.norm.weight": (D,)}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (D,), p + "post_attention_layernorm.weight": (D,),
                       p + "self_attn.q_proj.weight": (nh * hd, D), p + "self_attn.q_proj.bias": (nh * hd,),
                       p + "self_attn.k_proj.weight": (nkv * hd, D), p + "self_attn.k_proj.bias": (nkv * hd,),
                       p + "self_attn.v_proj.weight": (nkv * hd, D), p + "self_attn.v_proj.bias": (nkv * hd,),
                       p + "self_attn.o_proj.weight": (D, nh * hd), p + "mlp.gate_proj.weight": (I, D),
                       p + "mlp.up_proj.weight": (I, D), p + "mlp.down_proj.weight": (D, I)})
    for name in cfg.tensor_names():
        s = shapes[name]
        if name.endswith("norm.weight"):
            t = torch.ones(s)
        elif name.endswith(".bias"):
            t = torch.zeros(s)
        else:
            t = torch.randn(s, generator=gen) * 0.02
        m.params[name] = t.requires_grad_(True)
    return m


def batch(vocab, rows, n, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (rows, n), generator=gen)


def median_time(fn, reps):
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_forward(m):
    ids = batch(m.cfg.vocab_size, 2, 64, 1)
    mask = torch.ones_like(ids)

    def run():
        with torch.no_grad():
            qwen2.token_logprobs(m.forward(ids, mask, qwen2.position_ids(mask)), ids)

    return {"s": median_time(run, 5)}


def adamw(m):
    return torch.optim.AdamW([p for _, p in m.named_parameters()], lr=1e-5, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)


def update(m, opt, loss):
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for _, p in m.named_parameters()], 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)


def bench_adamw(m):
    ids = batch(m.cfg.vocab_size, 2, 64, 2)
    mask = torch.ones_like(ids)
    scored = qwen2.scored_mask(mask, [1, 1])
    opt = adamw(m)
    return {"s": median_time(lambda: update(m, opt, qwen2.nll(m, ids, mask, scored)[0]), 3)}


def generate(m, ids, new_tokens, temperature, gen):
    """new_tokens tokens per row after ids [B, P] (all real) with the KV cache: greedy at
    temperature 0, else sampled from softmax(logits / temperature). Returns the ids [B, P+N] and
    the prefill and decode times."""
    B, P = ids.shape
    mask = torch.ones(B, P, dtype=torch.long)
    cache, out = [], [ids]

    def draw(logits):
        if temperature == 0:
            return logits.argmax(-1, keepdim=True)
        return torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=gen)

    with torch.no_grad():
        t0 = time.perf_counter()
        tok = draw(m.forward(ids, mask, qwen2.position_ids(mask), cache)[:, -1])
        prefill = time.perf_counter() - t0
        out.append(tok)
        t0 = time.perf_counter()
        for _ in range(new_tokens - 1):
            mask = torch.cat([mask, torch.ones(B, 1, dtype=torch.long)], 1)
            tok = draw(m.forward(tok, mask, mask.sum(-1, keepdim=True) - 1, cache)[:, -1])
            out.append(tok)
        decode = time.perf_counter() - t0
    return torch.cat(out, 1), prefill, decode


def hf_model(shape, dtype):
    """transformers' Qwen2ForCausalLM at shape with Qwen2.5's features, its own random init."""
    import transformers

    torch.manual_seed(42)
    c = transformers.Qwen2Config(num_attention_heads=14, num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=1e6,
                                 tie_word_embeddings=True, max_position_embeddings=32768, use_cache=True, **shape)
    return transformers.Qwen2ForCausalLM(c).to(dtype).eval()


def bench_decode(shape, dtype):
    import transformers

    m = hf_model(shape, dtype)
    ids = batch(shape["vocab_size"], 1, 8, 3)
    times = []

    class Clock(transformers.LogitsProcessor):
        def __call__(self, input_ids, scores):  # called once per forward pass, after it
            times.append(time.perf_counter())
            return scores

    def run(n):
        times.clear()
        t0 = time.perf_counter()
        with torch.no_grad():
            out = m.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                             use_cache=True, logits_processor=transformers.LogitsProcessorList([Clock()]),
                             pad_token_id=0, eos_token_id=None)
        assert out.shape[1] == 8 + n, out.shape
        return times[0] - t0, times[-1] - times[0]

    run(2)  # warm-up
    prefill, decode = run(32)
    return {"tokens_per_s": 31 / decode, "prefill_s": prefill, "attn": m.config._attn_implementation}


def bench_grpo(m):
    prompts, g, plen, clen = 2, 4, 16, 16
    gen = torch.Generator().manual_seed(4)
    ids = batch(m.cfg.vocab_size, prompts, plen, 4).repeat_interleave(g, 0)
    opt = adamw(m)

    def step():
        t0 = time.perf_counter()
        seqs, _, _ = generate(m, ids, clen, 1.0, gen)
        t1 = time.perf_counter()
        rewards = (seqs[:, plen:] % 2 == 0).double().mean(-1).view(prompts, g)
        adv = ((rewards - rewards.mean(-1, keepdim=True)) / (rewards.std(-1, keepdim=True) + 1e-4)).view(-1, 1).float()
        mask = torch.ones_like(seqs)
        logits = m.forward(seqs, mask, qwen2.position_ids(mask))[:, plen - 1:-1]
        lp = logits.log_softmax(-1).gather(-1, seqs[:, plen:, None]).squeeze(-1)
        ratio = torch.exp(lp - lp.detach())
        update(m, opt, (-torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv)).mean(-1).mean())
        t2 = time.perf_counter()
        return t2 - t0, t1 - t0, t2 - t1

    step()  # warm-up
    runs = [step() for _ in range(3)]  # median of 3, as posttrain's side
    s, gen_s, upd_s = (statistics.median(r[i] for r in runs) for i in range(3))
    return {"s": s, "generate_s": gen_s, "update_s": upd_s}


# name, model shape, function (of qwen2.py's model, or, for HF_WORKLOADS, of the shape)
WORKLOADS = [
    ("forward", EIGHTH, bench_forward),
    ("adamw", EIGHTH, bench_adamw),
    ("grpo", EIGHTH, bench_grpo),
    ("decode", QWEN25_05B, lambda shape: bench_decode(shape, torch.float32)),
    ("decode_bf16", QWEN25_05B, lambda shape: bench_decode(shape, torch.bfloat16)),
]
HF_WORKLOADS = {"decode", "decode_bf16"}  # functions of the shape (transformers' model)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--only", default="", help="comma-separated workloads (default all)")
    ap.add_argument("--json", help="write the figures to this file (default: print them)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    only = [w for w in args.only.split(",") if w]
    unknown = sorted(set(only) - {name for name, _, _ in WORKLOADS})
    if unknown:
        ap.error(f"unknown workloads {unknown}")
    res, models = {}, {}
    for name, shape, fn in WORKLOADS:
        if only and name not in only:
            continue
        if name in HF_WORKLOADS:
            models.clear()  # one model in memory at a time (the 0.5B one is 2 GB)
            res[name] = fn(shape)
        else:
            key = tuple(sorted(shape.items()))
            if key not in models:
                models.clear()
                models[key] = random_model(shape, 42)
            res[name] = fn(models[key])
        print(f"torch {name}: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in res[name].items()),
              file=sys.stderr, flush=True)
    out = json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "workloads": res}, indent=2) + "\n"
    if args.json:
        Path(args.json).write_text(out)
    else:
        sys.stdout.write(out)


if __name__ == "__main__":
    main()
