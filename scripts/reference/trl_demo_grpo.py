"""TRL 0.24.0's own GRPOTrainer on the GRPO run of `posttrain demo --model` (docs/demo.md, "From a
pretrained model"): the same converted checkpoint, the same problems and prompts (the demo's
OUTPUT_DIR/prompts/grpo.jsonl: conversational prompt-only rows with their "answer"), the same
verifier and the same GRPO settings, on PyTorch's CPU in float32. It saves the trained model as an
HF checkpoint (evaluate it with the demo's greedy evaluation: `posttrain demo --model OUT
--grpo-steps 0` and the same --prompt/--max-factor/--held-out/--seed/--max-completion-length) and
prints the seconds per optimizer step (generation, scoring and update: TRL does them inside its
training step) and the logged rewards.

Not a golden: nothing under testdata comes from it. Run in the trl-0.24 venv:

    .venv-reference/trl-0.24/bin/python scripts/reference/trl_demo_grpo.py \
        --model .real-models/SmolLM2-135M-Instruct.Q4_1 --prompts runs/smol/prompts \
        --out runs/smol-trl --reward mult_last --steps 20 --prompts-per-step 2 --num-generations 8 \
        --max-completion-length 12 --learning-rate 1e-5 --beta 0 --seed 1

posttrain's demo GRPO settings that TRL shares by default are left at TRL's defaults (loss_type
dapo, scale_rewards group, epsilon 0.2, max_grad_norm 1, AdamW betas and epsilon, top_p 1, top_k
None, num_iterations 1, steps_per_generation = gradient accumulation = 1); the demo's own are set
here (learning rate constant, weight decay 0, the batch of prompts × generations).
"""

import argparse
import json
import os
import re
import statistics
import time

import torch
import transformers
import trl
from datasets import Dataset

# The demo's verifiers (data/mult/reward.go): Python's re with \d on str, as the course's.
INT = re.compile(r"-?\d+")


def mult_strict(prompts, completions, answer, **kwargs):
    return [float(c[0]["content"].strip() == a) for c, a in zip(completions, answer)]


def mult_correct(prompts, completions, answer, **kwargs):
    out = []
    for c, a in zip(completions, answer):
        m = INT.search(c[0]["content"])
        out.append(float(m is not None and m.group(0) == a))
    return out


def mult_last(prompts, completions, answer, **kwargs):
    out = []
    for c, a in zip(completions, answer):
        m = INT.findall(c[0]["content"])
        out.append(float(len(m) > 0 and m[-1] == a))
    return out


REWARDS = {f.__name__: f for f in (mult_strict, mult_correct, mult_last)}


class StepTimer(transformers.TrainerCallback):
    """Wall seconds of each optimizer step (TRL generates and scores inside the step)."""

    def __init__(self):
        self.seconds, self.t0 = [], None

    def on_step_begin(self, args, state, control, **kwargs):
        self.t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.seconds.append(time.perf_counter() - self.t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="the HF checkpoint directory (posttrain convert's)")
    ap.add_argument("--prompts", required=True, help="the demo's OUTPUT_DIR/prompts (grpo.jsonl)")
    ap.add_argument("--out", required=True, help="where the trained model is saved")
    ap.add_argument("--reward", default="mult_last", choices=sorted(REWARDS))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--prompts-per-step", type=int, default=2)
    ap.add_argument("--num-generations", type=int, default=8)
    ap.add_argument("--max-completion-length", type=int, default=12)
    ap.add_argument("--learning-rate", type=float, default=1e-5)
    ap.add_argument("--beta", type=float, default=0.0)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--logging-steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default, every core)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)

    with open(os.path.join(a.prompts, "grpo.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    ds = Dataset.from_list(rows)
    model = transformers.AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    tok = transformers.AutoTokenizer.from_pretrained(a.model)
    args = trl.GRPOConfig(
        output_dir=a.out, max_steps=a.steps, per_device_train_batch_size=a.prompts_per_step * a.num_generations,
        num_generations=a.num_generations, max_completion_length=a.max_completion_length,
        temperature=a.temperature, learning_rate=a.learning_rate, lr_scheduler_type="constant",
        weight_decay=0.0, beta=a.beta, seed=a.seed, logging_steps=a.logging_steps,
        use_cpu=True, bf16=False, fp16=False, report_to=[], save_strategy="no",
        dataloader_num_workers=0, disable_tqdm=True,
    )
    timer = StepTimer()
    tr = trl.GRPOTrainer(model=model, processing_class=tok, reward_funcs=[REWARDS[a.reward]], args=args,
                         train_dataset=ds, callbacks=[timer])
    t0 = time.perf_counter()
    tr.train()
    wall = time.perf_counter() - t0
    tr.save_model(a.out)
    tok.save_pretrained(a.out)
    steady = timer.seconds[a.logging_steps:] or timer.seconds
    logs = [e for e in tr.state.log_history if "reward" in e]
    summary = {
        "versions": {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
                     "threads": torch.get_num_threads()},
        "steps": len(timer.seconds), "train_wall_s": wall,
        "step_s_median_after_first_window": statistics.median(steady),
        "step_s_mean_after_first_window": statistics.fmean(steady),
        "step_s": timer.seconds,
        "reward": [e["reward"] for e in logs],
        "log_history": tr.state.log_history,
    }
    with open(os.path.join(a.out, "trl_demo_grpo.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("log_history", "step_s")}))


if __name__ == "__main__":
    main()
