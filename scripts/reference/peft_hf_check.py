"""Not a golden: runs posttrain (a built binary) to train and save, then loads what it wrote with
PEFT 0.21.2 and transformers 4.57.6 themselves and compares their outputs with posttrain's.

In a temporary directory, on the base models/testdata/qwen2-tiny/model (its weights and config.json,
with models/tinymodel's tokenizer files beside them, as the Go tests' looptest.Model):

  lora     `posttrain sft --use-peft` (LORA_RUNS: rsLoRA on all-linear with dropout 0.1; PEFT's default
           targets with model.norm in modules_to_save; 4 steps): PeftModel.from_pretrained of its
           output, log-probs vs `posttrain score --adapter`; `posttrain merge` of it, loaded with
           AutoModelForCausalLM, log-probs vs PEFT's merge_and_unload() and vs posttrain's.
  sft      `posttrain sft` (full fine-tuning, 2 steps): AutoModelForCausalLM.from_pretrained,
           log-probs vs `posttrain score`.
  reward   `posttrain reward` (2 steps): AutoModelForSequenceClassification.from_pretrained (a
           Qwen2ForSequenceClassification), rewards of texts vs `posttrain score-reward`.
  ppo      `posttrain ppo` with that reward model (1 update): the policy (AutoModelForCausalLM) and
           the value model (value_model/, AutoModelForSequenceClassification) the same way.

Every from_pretrained and PeftModel.from_pretrained runs with warnings and transformers/PEFT log
records of level WARNING turned into failures (missing, unexpected or newly initialised weights are
such warnings). The log-probs are those of the qwen2-tiny inputs (left_pad, right_pad, single) in
float32, compared within 2e-5 (float32 rounding of two implementations); rewards likewise.

  go build -o /tmp/posttrain ./cmd/posttrain
  .venv-reference/trl-0.24/bin/python scripts/reference/peft_hf_check.py --posttrain /tmp/posttrain
  ... --write-adapter   # also copy the lora run's adapter to models/testdata/peft-0.21.2/posttrain-sft/adapter

Exits non-zero on the first failure; prints one line per comparison.
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
from peft_adapters import POSTTRAIN, POSTTRAIN_BASE, ROOT, SET, Strict, logprobs, peft_model  # noqa: E402

TOL = 2e-5
INPUTS = sorted((ROOT / POSTTRAIN_BASE / "inputs").glob("*.json"))
# the --use-peft runs: "lora" is the adapter committed as posttrain-sft (--write-adapter)
LORA_RUNS = {
    "lora": ["--lora-r", "4", "--lora-alpha", "8", "--lora-dropout", "0.1", "--use-rslora", "--lora-target-modules", "all-linear"],
    "lora-norm": ["--lora-r", "2", "--lora-alpha", "4", "--lora-modules-to-save", "model.norm"],  # PEFT's default targets
}
TEXTS = ["2×3=6", "7×8=56", "12×12=144", "hello"]


def run(posttrain, *args, cwd):
    p = subprocess.run([posttrain, *args], cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"peft_hf_check.py: posttrain {' '.join(args)} failed:\n{p.stderr}")
    return p.stdout


def compare(what, got, want):
    d = max(abs(a - b) for a, b in zip(got, want, strict=True))
    print(f"{what}: {len(got)} values, max |diff| {d:.3g}")
    if not d <= TOL:
        sys.exit(f"peft_hf_check.py: {what}: {d} > {TOL}")


def flat(rep):
    return [x for row in rep["token_logprobs"] for x in row] + [rep["loss"]]


def check_logprobs(what, model, posttrain, tmp, model_arg, *extra):
    for inp in INPUTS:
        ref = logprobs(model, inp, "float32", "")
        got = json.loads(run(posttrain, "score", "--model", model_arg, "--input", str(inp), *extra, cwd=tmp))
        if got["token_positions"] != ref["token_positions"]:
            sys.exit(f"peft_hf_check.py: {what} {inp.stem}: scored positions differ")
        compare(f"{what} {inp.stem}: posttrain score vs {type(model).__name__}", flat(got), flat(ref))


def check_causal(what, d, posttrain, tmp):
    with Strict():
        model = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager", dtype=torch.float32).eval()
    check_logprobs(what, model, posttrain, tmp, str(d))


def check_classifier(what, d, posttrain, tmp):
    with Strict():
        model = AutoModelForSequenceClassification.from_pretrained(d, attn_implementation="eager", dtype=torch.float32).eval()
        tok = AutoTokenizer.from_pretrained(d)
    if type(model).__name__ != "Qwen2ForSequenceClassification" or model.config.num_labels != 1:
        sys.exit(f"peft_hf_check.py: {what}: {type(model).__name__} with {model.config.num_labels} labels")
    args = ["score-reward", "--model", str(d)]
    for t in TEXTS:
        args += ["--text", t]
    got = [json.loads(line)["reward"] for line in run(posttrain, *args, cwd=tmp).splitlines()]
    want = []
    with torch.no_grad():
        for t in TEXTS:
            ids = tok(t)["input_ids"] + [tok.eos_token_id]  # RewardTrainer's plain text: the EOS appended
            want.append(float(model(input_ids=torch.tensor([ids])).logits[0, 0]))
    compare(f"{what}: posttrain score-reward vs {type(model).__name__} on {len(TEXTS)} texts", got, want)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--posttrain", required=True, help="the posttrain binary (go build -o ... ./cmd/posttrain)")
    ap.add_argument("--write-adapter", action="store_true", help=f"copy the lora run's adapter into {SET}/{POSTTRAIN}/adapter")
    args = ap.parse_args()
    pt = str(Path(args.posttrain).resolve())
    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix="peft_hf_check."))
    try:
        base = tmp / "base"
        base.mkdir()
        for f in ("config.json", "model.safetensors"):
            shutil.copy(ROOT / POSTTRAIN_BASE / "model" / f, base / f)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(ROOT / "internal" / "tinymodel" / "files" / f, base / f)
        for kind in ("sft", "dpo", "grpo"):
            run(pt, "data", "mult", "--kind", kind, "-n", "16", "-o", f"{kind}.jsonl", cwd=tmp)
        common = ["--logging-steps", "1", "--per-device-train-batch-size", "2", "--learning-rate", "5e-3"]

        # LoRA: posttrain's adapters in PEFT; posttrain merge in transformers and vs merge_and_unload
        for name, flags in LORA_RUNS.items():
            run(pt, "sft", "--model", "base", "--dataset", "sft.jsonl", "--output-dir", name, "--max-steps", "4", *common,
                "--use-peft", *flags, cwd=tmp)
            pm = peft_model(str(base), str(tmp / name), "float32")
            check_logprobs(f"{name} adapter", pm, pt, tmp, "base", "--adapter", name)
            run(pt, "merge", "--model", "base", "--adapter", name, "--output-dir", f"{name}-merged", cwd=tmp)
            check_causal(f"{name}: posttrain merge", tmp / f"{name}-merged", pt, tmp)
            check_logprobs(f"{name}: posttrain merge vs merge_and_unload", pm.merge_and_unload().eval(), pt, tmp, f"{name}-merged")
        if args.write_adapter:
            dst = ROOT / SET / POSTTRAIN / "adapter"
            dst.mkdir(parents=True, exist_ok=True)
            for f in ("adapter_config.json", "adapter_model.safetensors"):
                shutil.copy(tmp / "lora" / f, dst / f)
            print(f"wrote {dst}")

        run(pt, "sft", "--model", "base", "--dataset", "sft.jsonl", "--output-dir", "sft", "--max-steps", "2", *common, cwd=tmp)
        check_causal("sft output", tmp / "sft", pt, tmp)
        run(pt, "reward", "--model", "base", "--dataset", "dpo.jsonl", "--output-dir", "rm", "--max-steps", "2", *common, cwd=tmp)
        check_classifier("reward output", tmp / "rm", pt, tmp)
        run(pt, "ppo", "--model", "sft", "--reward-model", "rm", "--dataset", "grpo.jsonl", "--output-dir", "ppo",
            "--total-episodes", "4", "--per-device-train-batch-size", "4", "--response-length", "4", "--num-ppo-epochs", "1",
            "--learning-rate", "5e-3", "--logging-steps", "1", cwd=tmp)
        check_causal("ppo policy", tmp / "ppo", pt, tmp)
        check_classifier("ppo value model", tmp / "ppo" / "value_model", pt, tmp)
        print("peft_hf_check.py: every output loads without warnings and gives posttrain's numbers")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
