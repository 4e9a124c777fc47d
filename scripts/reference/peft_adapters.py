"""LoRA adapters saved by PEFT itself, and what PEFT gives with them: the goldens of models/lora's
TestPEFT_* and cmd/posttrain's TestMerge_EqualsPEFT.

models/testdata/peft-0.21.2/NAME/ for each case of CASES (a base of models/testdata/hf-4.57.6):

  adapter/    get_peft_model(base, LoraConfig(task_type=CAUSAL_LM, init_lora_weights=False, ...))
              after torch.manual_seed(seed) (init_lora_weights=False keeps nn.Linear's Kaiming-uniform
              draws for A and B, so B is not zero), a modules_to_save copy moved off the base by
              N(0, 0.05) noise, then save_pretrained: adapter_config.json and
              adapter_model.safetensors as PEFT writes them (its README.md model card is dropped).
  expected/   NAME.{float64,float32}.json for each of the base's inputs/*.json: the base loaded with
              from_pretrained(dtype, eager), PeftModel.from_pretrained(base, adapter/) (no warning
              allowed: a missing or unexpected key fails the script), and the log-probs of the
              fixture's scored tokens (models/testdata/qwen2-tiny/README.md's layout: token_positions,
              token_ids, token_logprobs, seq_logprob, n_completion_tokens, loss, last_logits_first8).
              merged.safetensors: merge_and_unload() of the float32 model, the tensors the merge
              changed (the adapted layers' weights, the modules_to_save ones), float32; its
              metadata "base" names the base checkpoint.

models/testdata/peft-0.21.2/posttrain-sft/ is the other direction: adapter/ is what `posttrain sft
--use-peft` wrote (committed input, made by scripts/reference/peft_hf_check.py --write-adapter), on
the base models/testdata/qwen2-tiny/model; this script writes only its expected/ (PEFT's log-probs
on qwen2-tiny's inputs, and merged.safetensors).

  .venv-reference/trl-0.24/bin/python scripts/reference/peft_adapters.py            # in place
  .venv-reference/trl-0.24/bin/python scripts/reference/peft_adapters.py --out DIR  # make reference-check

One CPU thread (one summation order) and PYTHONHASHSEED=0 (the script re-executes itself with it:
PEFT lists all-linear's resolved target_modules in a set's order): rerunning rewrites every file
byte for byte.
"""

import argparse
import json
import logging as pylogging
import os
import shutil
import sys
import warnings
from pathlib import Path

import peft
import torch
import transformers
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import save_file
from transformers.utils import logging

sys.dont_write_bytecode = True  # no __pycache__ in the repository
sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_families import DTYPES, load, read_batch, scored_mask  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]  # the repository
SET = "models/testdata/peft-" + peft.__version__
HF = "models/testdata/hf-4.57.6"

# name: (base family of HF, seed, LoraConfig keyword arguments, modules_to_save noise)
CASES = {
    # PEFT's defaults: r 8, lora_alpha 8, target_modules None (q_proj, v_proj for qwen2).
    "qwen2-default": ("qwen2", 1, {}),
    # rsLoRA (s = α/√r) on every linear layer but the LM head.
    "qwen3-rslora-all-linear": ("qwen3", 2, dict(r=4, lora_alpha=8, use_rslora=True, target_modules="all-linear")),
    # attention only, the untied LM head trained in full beside the adapter.
    "smollm2-attn-lm-head": ("smollm2", 3, dict(r=2, lora_alpha=4, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                                                modules_to_save=["lm_head"])),
    # the MLP of Gemma 3 (scaled embeddings, sandwich norms), and the final norm trained in full.
    "gemma3-mlp-norm": ("gemma3", 4, dict(r=4, lora_alpha=16, lora_dropout=0.1, target_modules=["gate_proj", "up_proj", "down_proj"],
                                          modules_to_save=["norm"])),
}
POSTTRAIN = "posttrain-sft"  # adapter written by posttrain, base qwen2-tiny
POSTTRAIN_BASE = "models/testdata/qwen2-tiny"


class Strict:
    """Fails on any Python warning or transformers/PEFT log record of level WARNING or above inside
    the block: a missing or unexpected key is one."""

    def __enter__(self):
        self.records = []
        self.handler = pylogging.Handler(pylogging.WARNING)
        self.handler.emit = self.records.append
        for name in ("transformers", "peft"):
            pylogging.getLogger(name).addHandler(self.handler)
        self.warnings = warnings.catch_warnings(record=True)
        self.caught = self.warnings.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self.warnings.__exit__(*exc)
        for name in ("transformers", "peft"):
            pylogging.getLogger(name).removeHandler(self.handler)
        msgs = [str(w.message) for w in self.caught] + [r.getMessage() for r in self.records]
        if msgs and exc[0] is None:
            sys.exit("peft_adapters.py: warnings while loading:\n  " + "\n  ".join(msgs))


def logprobs(model, input_path, dtype_name, oracle):
    ids, mask, starts, _ = read_batch(input_path)
    B, S = ids.shape
    pos = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    scored = scored_mask(mask, starts)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False).logits
        lp = logits[:, :-1].log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        n = int(scored.sum())
        loss = -lp[scored[:, 1:]].sum() / n
        last = [int(mask[b].nonzero().max()) for b in range(B)]
        positions = [[t for t in range(S) if scored[b, t]] for b in range(B)]
        token_lps = [[float(lp[b, t - 1]) for t in positions[b]] for b in range(B)]
        return {
            "oracle": oracle,
            "compute_dtype": dtype_name,
            "completion_start": starts,
            "token_positions": positions,
            "token_ids": [[int(ids[b, t]) for t in positions[b]] for b in range(B)],
            "token_logprobs": token_lps,
            "seq_logprob": [sum(r) for r in token_lps],
            "n_completion_tokens": n,
            "loss": float(loss),
            "last_index": last,
            "last_logits_first8": [[float(x) for x in logits[b, last[b], :8]] for b in range(B)],
        }


def peft_model(base_dir, adapter_dir, dtype_name):
    with Strict():
        base = load(base_dir, DTYPES[dtype_name])
        model = PeftModel.from_pretrained(base, adapter_dir)
    model.eval()
    for name, p in model.named_parameters():
        if "lora_" in name and p.dtype != DTYPES[dtype_name]:
            sys.exit(f"peft_adapters.py: {name} is {p.dtype}, want {DTYPES[dtype_name]}")
    return model


def oracle():
    return f"peft {peft.__version__} PeftModel.from_pretrained, transformers {transformers.__version__} (eager), torch {torch.__version__.split('+')[0]}"


def write_expected(base_dir, inputs_dir, adapter_dir, out_dir):
    out_dir.mkdir(parents=True, exist_ok=True)
    for dtype_name in DTYPES:
        model = peft_model(base_dir, adapter_dir, dtype_name)
        for inp in sorted(Path(inputs_dir).glob("*.json")):
            d = logprobs(model, inp, dtype_name, oracle())
            (out_dir / f"{inp.stem}.{dtype_name}.json").write_text(json.dumps(d, indent=1) + "\n")


def write_merged(name, base_dir, adapter, out_dir):
    """merge_and_unload() of the float32 model read back from the files, as `posttrain merge` reads
    them: the tensors it changed, with the base's directory in the file's metadata."""
    model = peft_model(base_dir, adapter, "float32")
    before = {k: v.clone() for k, v in load(base_dir, torch.float32).state_dict().items()}
    merged = model.merge_and_unload().state_dict()
    changed = {k: v.contiguous() for k, v in merged.items() if not torch.equal(v, before[k])}
    if not changed:
        sys.exit(f"peft_adapters.py: {name}: merge_and_unload changed nothing")
    if set(merged) != set(before):
        sys.exit(f"peft_adapters.py: {name}: merged tensors {sorted(set(merged) ^ set(before))} differ from the base's")
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(changed, out_dir / "merged.safetensors", metadata={"base": str(base_dir)})  # one key: the order of several is random


def make_adapter(name, family, seed, kwargs, out):
    base_dir = f"{HF}/{family}/model"  # relative: base_model_name_or_path in adapter_config.json
    adapter = out / "adapter"
    if adapter.exists():
        shutil.rmtree(adapter)
    base = load(base_dir, torch.float32)
    torch.manual_seed(seed)
    model = get_peft_model(base, LoraConfig(task_type="CAUSAL_LM", init_lora_weights=False, **kwargs))
    with torch.no_grad():
        for mname, p in model.named_parameters():
            if ".modules_to_save." in mname:
                p.add_(torch.randn_like(p) * 0.05)
    model.save_pretrained(adapter)
    (adapter / "README.md").unlink()
    write_merged(name, base_dir, adapter, out / "expected")
    write_expected(base_dir, f"{HF}/{family}/inputs", adapter, out / "expected")


def main():
    if os.environ.get("PYTHONHASHSEED") != "0":
        # PEFT writes all-linear's target_modules in a set's order: fix the string hashes
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT), help=f"the tree to write {SET}/ under (default: the repository)")
    args = ap.parse_args()
    out_root = Path(args.out).resolve()
    os.chdir(ROOT)  # the bases are read by relative paths (written so into adapter_config.json)
    torch.set_num_threads(1)
    logging.disable_progress_bar()
    for name, (family, seed, kwargs) in CASES.items():
        out = out_root / SET / name
        (out / "expected").mkdir(parents=True, exist_ok=True)
        make_adapter(name, family, seed, kwargs, out)
        print(f"wrote {out} (peft {peft.__version__}, transformers {transformers.__version__})", file=sys.stderr)
    out = out_root / SET / POSTTRAIN / "expected"
    write_merged(POSTTRAIN, f"{POSTTRAIN_BASE}/model", f"{SET}/{POSTTRAIN}/adapter", out)
    write_expected(f"{POSTTRAIN_BASE}/model", f"{POSTTRAIN_BASE}/inputs", f"{SET}/{POSTTRAIN}/adapter", out)
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
