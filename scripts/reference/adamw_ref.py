#!/usr/bin/python3
"""A few AdamW steps on one qwen2-tiny batch: the reference for the trainers' update
(trainers/engine/loop.Optimizer) and the PyTorch side of `posttrain bench parity`.

Each step: the loss is the mean NLL of the batch's scored tokens (the fixture's loss, posttrain's
SFT NLL over tokens), its gradient is clipped to a global L2 norm (torch.nn.utils.clip_grad_norm_),
and torch.optim.AdamW updates the weights with HF Trainer's parameter groups: weight decay on every
weight except biases and norm weights (Trainer.get_decay_parameter_names: parameters of
nn.LayerNorm modules, and names matching bias, layernorm, rmsnorm, (^|.)norm($|.) or _norm($|.),
lower-cased). The learning rate is constant. Recorded per step: the loss and the global gradient
norm before clipping (what clip_grad_norm_ returns), as `posttrain bench parity` prints them.

  /usr/bin/python3 scripts/reference/adamw_ref.py            # compare with the committed files
  /usr/bin/python3 scripts/reference/adamw_ref.py --write    # rewrite them

The committed trajectories (PRESETS), each in float64 and float32, on inputs/left_pad.json:
  expected/adamw_5steps.DTYPE.json        `posttrain bench parity`'s and scripts/gpu/hf_reference.py
                                          parity's setup: lr 1e-4, betas (0.9, 0.999), eps 1e-8,
                                          weight decay 0.01, max grad norm 1, 5 steps
  expected/adamw_5steps_decay.DTYPE.json  the same with lr 1e-3 and weight decay 0.1
"""

import argparse
import json
import re
import sys
from pathlib import Path

import torch

sys.dont_write_bytecode = True  # no __pycache__ in the repository
sys.path.insert(0, str(Path(__file__).resolve().parent))
import qwen2  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[2] / "models" / "testdata" / "qwen2-tiny"
NO_DECAY = [re.compile(p) for p in (r"bias", r"layernorm", r"rmsnorm", r"(?:^|\.)norm(?:$|\.)", r"_norm(?:$|\.)")]


def decays(name):
    """HF Trainer's rule for a Qwen2 parameter name (it has no nn.LayerNorm modules)."""
    return not any(p.search(name.lower()) for p in NO_DECAY)


def trajectory(model_dir, input_path, dtype, steps, lr, betas, eps, weight_decay, max_grad_norm):
    model = qwen2.Qwen2(model_dir, dtype)
    ids, mask, starts, _ = qwen2.read_batch(input_path)
    scored = qwen2.scored_mask(mask, starts)
    named = model.named_parameters()
    decay = [n for n, _ in named if decays(n)]
    groups = [{"params": [p for n, p in named if decays(n)], "weight_decay": weight_decay},
              {"params": [p for n, p in named if not decays(n)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)
    params = [p for _, p in named]
    losses, norms = [], []
    for _ in range(steps):
        loss, _ = qwen2.nll(model, ids, mask, scored)
        loss.backward()
        if max_grad_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        else:
            norm = torch.norm(torch.stack([p.grad.norm() for p in params]))
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss))
        norms.append(float(norm))
    return {
        "oracle": "adamw_ref.py",
        "torch": torch.__version__,
        "model_dir": "model",
        "input": f"inputs/{Path(input_path).name}",
        "compute_dtype": str(dtype).removeprefix("torch."),
        "steps": steps,
        "lr": lr,
        "betas": list(betas),
        "eps": eps,
        "weight_decay": weight_decay,
        "max_grad_norm": max_grad_norm,
        "scored_tokens": int(scored.sum()),
        "decay_params": decay,
        "no_decay_params": [n for n, _ in named if not decays(n)],
        "losses": losses,
        "grad_norms": norms,
    }


# The committed trajectories (expected/adamw_5steps{suffix}.{dtype}.json): "parity" is `posttrain
# bench parity`'s setup; "decay" raises the learning rate and weight decay so that the parameter
# groups move the losses far beyond float32 rounding (at parity's, putting the norm weights and
# biases in the decay group moves them by ~1e-5 relative, ten times float32's spread).
PRESETS = {
    "parity": dict(suffix="", input="left_pad", steps=5, lr=1e-4, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01,
                   max_grad_norm=1.0),
    "decay": dict(suffix="_decay", input="left_pad", steps=5, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                  weight_decay=0.1, max_grad_norm=1.0),
}


def run(fix, p, dtype_name):
    dtype = {"float32": torch.float32, "float64": torch.float64}[dtype_name]
    return trajectory(fix / "model", fix / "inputs" / f"{p['input']}.json", dtype, p["steps"], p["lr"],
                      (p["beta1"], p["beta2"]), p["eps"], p["weight_decay"], p["max_grad_norm"])


def check(res, path, rtol):
    """Compares res with the file at path: the settings must be equal, the losses and gradient norms
    within rtol (relative). Returns whether they are."""
    want = json.loads(path.read_text())
    for k in ("input", "compute_dtype", "steps", "lr", "betas", "eps", "weight_decay", "max_grad_norm", "scored_tokens",
              "decay_params", "no_decay_params"):
        if res[k] != want[k]:
            print(f"{path.name}: {k} is {want[k]!r}, this run's is {res[k]!r}")
            return False
    worst = max(abs(a - b) / abs(b) for k in ("losses", "grad_norms") for a, b in zip(res[k], want[k], strict=True))
    bits = all(res[k] == want[k] for k in ("losses", "grad_norms"))
    print(f"{path.name}: max relative difference of losses and gradient norms {worst:.3g}"
          f"{' (bit-identical)' if bits else ''}; tolerance {rtol}")
    return worst <= rtol


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixture", default=str(FIXTURE))
    ap.add_argument("--preset", default="", choices=[""] + sorted(PRESETS), help="one committed trajectory (default: all)")
    ap.add_argument("--dtype", default="", choices=["", "float32", "float64"], help="default: both")
    ap.add_argument("--write", action="store_true", help="rewrite the committed files instead of comparing")
    ap.add_argument("--rtol", type=float, default=None,
                    help="largest relative difference of a loss or gradient norm accepted when comparing "
                         "(default: 1e-12 for float64, 1e-5 for float32)")
    ap.add_argument("--print", dest="show", default="", metavar="KEY=VALUE,...",
                    help="print a trajectory for other settings (the keys of PRESETS, over parity's) and stop")
    args = ap.parse_args()
    torch.set_num_threads(1)  # one summation order
    fix = Path(args.fixture)
    print(f"torch {torch.__version__}", file=sys.stderr)
    if args.show:
        p = dict(PRESETS["parity"])
        for kv in args.show.split(","):
            k, v = kv.split("=")
            p[k] = type(p[k])(v)
        res = run(fix, p, args.dtype or "float32")
        print(json.dumps({k: res[k] for k in ("losses", "grad_norms")}))
        return
    ok = True
    for name in [args.preset] if args.preset else sorted(PRESETS):
        p = PRESETS[name]
        for dtype_name in [args.dtype] if args.dtype else ["float64", "float32"]:
            res = run(fix, p, dtype_name)
            path = fix / "expected" / f"adamw_{p['steps']}steps{p['suffix']}.{dtype_name}.json"
            if args.write:
                path.write_text(json.dumps(res, indent=1) + "\n")
                print(f"wrote {path}")
                continue
            rtol = args.rtol if args.rtol is not None else (1e-12 if dtype_name == "float64" else 1e-5)
            ok = check(res, path, rtol) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
