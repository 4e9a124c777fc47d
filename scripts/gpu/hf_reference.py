#!/usr/bin/env python3
"""PyTorch + HuggingFace transformers side of scripts/gpu-check.sh.

Loads the checkpoint with AutoModelForCausalLM (Qwen2, Qwen3, Llama, ...) from the same checkpoint directory posttrain uses and runs the same
workloads as `posttrain score` / `posttrain bench decode|sft|grpo`, printing one JSON object on
stdout with the same keys (progress goes to stderr):

  score   per-token log-probs of a batch file (qwen2-tiny input format)
  decode  batched greedy decoding, tokens/s per batch size
  sft     AdamW steps on rows x seq-len random tokens, tokens/s and MFU against 6*N
  grpo    one GRPO step: sampling, synthetic reward, group advantages, clipped-surrogate updates
          on micro-batches
  parity  AdamW steps on a batch file (loss and gradient norm per step), as `posttrain bench parity`

The workloads mirror apps/bench/ (the Go side): global gradient-norm clipping at 1, EOS ignored during
generation, and the reward "fraction of even token ids", so that the two sides do the same
arithmetic; here weights and AdamW state stay in the compute dtype, while posttrain's side runs its
trainers' optimizer with float32 master weights and moments ("master_dtype" in its JSON).
"""

import argparse
import json
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def log(msg):
    print(f"hf_reference: {msg}", file=sys.stderr, flush=True)


def device_of(args):
    if args.device:
        return torch.device(args.device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def load(args):
    dev = device_of(args)
    dtype = DTYPES[args.dtype]
    t0 = time.perf_counter()
    major = int(transformers.__version__.split(".")[0])
    kw = {"dtype": dtype} if major >= 5 else {"torch_dtype": dtype}
    if args.attn:
        kw["attn_implementation"] = args.attn
    model = AutoModelForCausalLM.from_pretrained(args.model, **kw).to(dev)
    sync(dev)
    n = sum(p.numel() for p in model.parameters())  # tied embeddings are one parameter
    cfg = model.config
    info = {
        "workload": args.cmd,
        "backend": f"pytorch {torch.__version__} / transformers {transformers.__version__}",
        "backend_description": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "attn_implementation": getattr(cfg, "_attn_implementation", None),
        "dtype": args.dtype,
        "params": n,
        "layers": cfg.num_hidden_layers,
        "hidden": cfg.hidden_size,
        "vocab": cfg.vocab_size,
        "load_s": time.perf_counter() - t0,
        "flops_per_token": 6.0 * n,
    }
    log(f"{args.cmd}: {args.model}, {n} parameters, {args.dtype} on {info['backend_description']} "
        f"(loaded in {info['load_s']:.1f}s)")
    return model, dev, info


def random_ids(gen, vocab, eos, rows, n, dev):
    ids = torch.randint(0, vocab, (rows, n), generator=gen)
    for e in eos:  # as the Go side: prompts never hold an end of sequence
        ids[ids == e] = (e + 1) % vocab
    return ids.to(dev)


def eos_ids(model):
    e = model.config.eos_token_id
    if e is None:
        return []
    return e if isinstance(e, list) else [e]


def read_batch(path):
    """A batch file (qwen2-tiny input format): ids, attention mask and HF position ids [B, S] (pads
    at position 1), and each row's scored mask [B, S]: t >= max(1, completion_start) with tokens t
    and t-1 real, the rule of `posttrain score`."""
    with open(path) as f:
        batch = json.load(f)
    ids = torch.tensor(batch["input_ids"], dtype=torch.long)
    mask = torch.tensor(batch.get("attention_mask") or [[1] * len(r) for r in batch["input_ids"]], dtype=torch.long)
    rows, seq = ids.shape
    cs = batch.get("completion_start", 0)
    starts = cs if isinstance(cs, list) else [cs] * rows
    pos = mask.cumsum(-1) - 1
    pos[mask == 0] = 1
    scored = torch.zeros(rows, seq)
    for r in range(rows):
        for t in range(max(1, starts[r]), seq):
            if mask[r, t] == 1 and mask[r, t - 1] == 1:
                scored[r, t] = 1
    return ids, mask, pos, scored


def cmd_score(args):
    model, dev, info = load(args)
    model.eval()
    ids, mask, pos, scored = read_batch(args.input)
    rows, seq = ids.shape
    with torch.no_grad():
        out = model(input_ids=ids.to(dev), attention_mask=mask.to(dev), position_ids=pos.to(dev))
        lsm = out.logits[:, :-1].float().log_softmax(-1)  # position t-1 scores token t
        nxt = lsm.gather(-1, ids[:, 1:, None].to(dev)).squeeze(-1).cpu().double()  # [B, S-1]
    res = dict(info, token_positions=[], token_ids=[], token_logprobs=[], seq_logprob=[])
    total, count = 0.0, 0
    for r in range(rows):
        p, i, lp = [], [], []
        for t in range(1, seq):
            if scored[r, t] == 1:
                p.append(t), i.append(int(ids[r, t])), lp.append(float(nxt[r, t - 1]))
        res["token_positions"].append(p)
        res["token_ids"].append(i)
        res["token_logprobs"].append(lp)
        res["seq_logprob"].append(sum(lp))
        total += sum(lp)
        count += len(lp)
    res["n_completion_tokens"] = count
    res["loss"] = -total / max(1, count)
    return res


def generate(model, ids, new_tokens, sample, temperature=1.0):
    kw = dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0) if sample else dict(do_sample=False)
    return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                          min_new_tokens=new_tokens, pad_token_id=0, **kw)


def cmd_decode(args):
    model, dev, info = load(args)
    model.eval()
    gen = torch.Generator().manual_seed(args.seed)
    res = dict(info, runs=[])
    for bs in [int(x) for x in args.batch.split(",") if x.strip()]:
        ids = random_ids(gen, model.config.vocab_size, eos_ids(model), bs, args.prompt_len, dev)
        with torch.no_grad():
            t0 = time.perf_counter()
            generate(model, ids, 2, False)
            sync(dev)
            warm = time.perf_counter() - t0
            t0 = time.perf_counter()
            out = generate(model, ids, args.new_tokens, False)
            sync(dev)
            total = time.perf_counter() - t0
        tokens = (out.shape[1] - args.prompt_len) * bs
        run = {"batch": bs, "rows": bs, "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
               "warmup_s": warm, "total_s": total, "tokens": tokens, "tokens_per_second": tokens / total}
        log(f"decode batch {bs}: {tokens} tokens in {total:.2f}s ({run['tokens_per_second']:.0f} tokens/s; warm-up {warm:.1f}s)")
        res["runs"].append(run)
    return res


def make_optimizer(model, lr):
    kw = {}
    if next(model.parameters()).is_cuda:
        kw["foreach"] = True
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, **kw)


def update(model, opt, loss):
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss.detach()), float(norm)


def finish_timing(res, step_s, flops_per_token, peak):
    res["step_s"] = step_s
    res["mean_step_s"] = sum(step_s) / len(step_s)
    res["tokens_per_s"] = res["tokens_per_step"] / res["mean_step_s"]
    res["achieved_tflops"] = res["tokens_per_s"] * flops_per_token / 1e12
    if peak > 0:
        res["peak_tflops"] = peak
        res["mfu"] = res["achieved_tflops"] / peak


def cmd_sft(args):
    model, dev, info = load(args)
    model.train()
    opt = make_optimizer(model, args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    vocab = model.config.vocab_size
    ids = random_ids(gen, vocab, eos_ids(model), args.batch, args.seq_len, dev)
    mask = torch.ones_like(ids)

    def step():
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), ids[:, 1:].reshape(-1))
        return update(model, opt, loss)

    res = dict(info, batch=args.batch, seq_len=args.seq_len, tokens_per_step=args.batch * args.seq_len, losses=[])
    t0 = time.perf_counter()
    for _ in range(args.warmup):
        res["losses"].append(step()[0])
    sync(dev)
    res["warmup_s"] = time.perf_counter() - t0
    step_s = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        res["losses"].append(step()[0])  # .item() waits for the step
        sync(dev)
        step_s.append(time.perf_counter() - t0)
    finish_timing(res, step_s, info["flops_per_token"], args.peak_tflops)
    res["peak_memory_gib"] = torch.cuda.max_memory_allocated(dev) / 2**30 if dev.type == "cuda" else None
    log(f"sft {args.batch}x{args.seq_len}: {res['mean_step_s']:.3f}s/step, {res['tokens_per_s']:.0f} tokens/s, "
        f"{res['achieved_tflops']:.1f} TFLOP/s")
    return res


def cmd_parity(args):
    """AdamW steps on one batch file, as `posttrain bench parity`: the loss is the mean NLL of the
    scored tokens (cmd_score's rule), gradients are clipped to global norm 1, and torch.optim.AdamW
    uses HF Trainer's groups (no weight decay on biases and norm weights)."""
    model, dev, info = load(args)
    model.train()
    ids, mask, pos, scored = read_batch(args.input)
    n = int(scored.sum())
    ids, mask, pos, scored = ids.to(dev), mask.to(dev), pos.to(dev), scored.to(dev)
    named = list(model.named_parameters())
    decay = [p for name, p in named if not name.endswith(".bias") and "norm" not in name]
    rest = [p for name, p in named if name.endswith(".bias") or "norm" in name]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay}, {"params": rest, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.999), eps=1e-8)
    res = dict(info, steps=args.steps, lr=args.lr, weight_decay=args.weight_decay, max_grad_norm=1.0,
               scored_tokens=n, losses=[], grad_norms=[])
    for _ in range(args.steps):
        logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, :-1].float()
        lp = logits.log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)  # [B, S-1]: scores token t at t-1
        loss = -(lp * scored[:, 1:]).sum() / max(1, n)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        res["losses"].append(float(loss.detach()))
        res["grad_norms"].append(float(norm))
    log(f"parity: losses {res['losses']}")
    return res


def completion_logprobs(model, ids, plen, clen):
    try:  # only the completion positions through the LM head, as TRL's logits_to_keep
        logits = model(input_ids=ids, logits_to_keep=clen + 1).logits[:, :-1]
    except TypeError:
        logits = model(input_ids=ids).logits[:, plen - 1:-1]
    lsm = logits.float().log_softmax(-1)
    return lsm.gather(-1, ids[:, plen:, None]).squeeze(-1)  # [B, C]


def cmd_grpo(args):
    model, dev, info = load(args)
    opt = make_optimizer(model, args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)
    plen, clen, g = args.prompt_len, args.new_tokens, args.generations
    n = args.prompts * g
    mb = min(args.micro_batch, n)
    prompts = random_ids(gen, model.config.vocab_size, eos_ids(model), args.prompts, plen, dev).repeat_interleave(g, 0)
    res = dict(info, prompts=args.prompts, generations=g, prompt_len=plen, new_tokens=clen, micro_batch=mb,
               updates=0, losses=[], grad_norms=[], completion_len=clen)

    def updates(seqs, adv, limit):
        model.train()
        for lo in range(0, min(n, limit), mb):
            hi = min(n, lo + mb)
            if hi - lo < mb:
                break
            ids = seqs[lo:hi]
            lp = completion_logprobs(model, ids, plen, clen)
            ratio = torch.exp(lp - lp.detach())
            a = adv[lo:hi, None].to(lp.dtype)
            per_token = -torch.min(ratio * a, ratio.clamp(0.8, 1.2) * a)
            loss, norm = update(model, opt, per_token.mean(-1).mean())
            if limit == n:
                res["losses"].append(loss)
                res["grad_norms"].append(norm)
                res["updates"] += 1

    def rollout(new_tokens):
        model.eval()
        with torch.no_grad():
            return generate(model, prompts, new_tokens, True, args.temperature)

    t0 = time.perf_counter()
    warm = rollout(2)
    warm = torch.cat([warm, warm[:, -1:].expand(-1, clen - 2)], 1) if clen > 2 else warm
    updates(warm, torch.zeros(n, device=dev), mb)
    sync(dev)
    res["warmup_s"] = time.perf_counter() - t0
    log(f"grpo warm-up: {res['warmup_s']:.1f}s")

    t_step = time.perf_counter()
    seqs = rollout(clen)
    sync(dev)
    res["generate_s"] = time.perf_counter() - t_step
    t0 = time.perf_counter()
    comp = seqs[:, plen:]
    if comp.shape[1] != clen:
        raise SystemExit(f"completions have {comp.shape[1]} tokens, want {clen}")
    rewards = (comp % 2 == 0).double().mean(-1).view(args.prompts, g)
    adv = ((rewards - rewards.mean(-1, keepdim=True)) / (rewards.std(-1, keepdim=True) + 1e-4)).view(-1).float()
    sync(dev)
    res["reward_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    updates(seqs, adv, n)
    sync(dev)
    res["train_s"] = time.perf_counter() - t0
    res["step_s"] = time.perf_counter() - t_step
    res["generated_tokens"] = n * clen
    res["generate_tokens_per_s"] = n * clen / res["generate_s"]
    res["train_tokens"] = res["updates"] * mb * (plen + clen)
    res["train_tokens_per_s"] = res["train_tokens"] / res["train_s"]
    res["train_achieved_tflops"] = res["train_tokens_per_s"] * info["flops_per_token"] / 1e12
    if args.peak_tflops > 0:
        res["peak_tflops"] = args.peak_tflops
        res["train_mfu"] = res["train_achieved_tflops"] / args.peak_tflops
    res["mean_reward"] = float(rewards.mean())
    res["sequences_per_s"] = n / res["step_s"]
    log(f"grpo {args.prompts}x{g}x{clen}: step {res['step_s']:.2f}s (generate {res['generate_s']:.2f}s, "
        f"update {res['train_s']:.2f}s in {res['updates']} micro-batches)")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p, dtype="bfloat16"):
        p.add_argument("--model", required=True)
        p.add_argument("--dtype", default=dtype, choices=sorted(DTYPES))
        p.add_argument("--device", default="")
        p.add_argument("--attn", default="", help="attn_implementation (default: transformers' choice)")
        p.add_argument("--seed", type=int, default=1)
        return p

    p = common(sub.add_parser("score"), "float32")
    p.add_argument("--input", required=True)
    p = common(sub.add_parser("decode"))
    p.add_argument("--batch", default="1,64,256")
    p.add_argument("--prompt-len", type=int, default=64)
    p.add_argument("--new-tokens", type=int, default=64)
    p = common(sub.add_parser("sft"))
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--peak-tflops", type=float, default=0)
    p = common(sub.add_parser("grpo"))
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--generations", type=int, default=8)
    p.add_argument("--prompt-len", type=int, default=64)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--micro-batch", type=int, default=64)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--peak-tflops", type=float, default=0)
    p = common(sub.add_parser("parity"), "float32")
    p.add_argument("--input", required=True)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--weight-decay", type=float, default=0.01)
    args = ap.parse_args()
    res = {"score": cmd_score, "decode": cmd_decode, "sft": cmd_sft, "grpo": cmd_grpo, "parity": cmd_parity}[args.cmd](args)
    json.dump(res, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
