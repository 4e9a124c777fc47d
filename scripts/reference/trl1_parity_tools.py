#!/usr/bin/env python3
"""TRL 1.16's GRPOTrainer with tools=[calculator] replaying posttrain's multi-turn completions: the
golden of TestGRPO_TRL1ParityTools.

trl1_parity.py's method (its model and tokenizer, TRL 1.16 in `.venv-reference/trl-1`), on
conversational rows (trainers/grpo/testdata/trl1_parity_tools/rows.jsonl) rendered with a small
tool-calling chat template (template.jinja beside them, prefix-preserving, Qwen's <tool_call>
format, so TRL's response template for Qwen parses the calls). posttrain runs each case
(TestGRPO_TRL1ParityTools with POSTTRAIN_TRL_RECORD writes rollouts.json): the first turns of its
completions are scripted (a calculator call, a plain answer, a call to an unknown tool, a division
by zero), the tool turns are its built-in calculator's and the turns after them its model's. TRL
then trains on exactly those: its first generation returns posttrain's first turns, its tool loop
runs TRL's own tool (a Python calculator: `eval`, whose schema is posttrain's built-in one) and
renders the tool turn itself, and each continuation it asks for is checked to start from
posttrain's context (prompt + first turn + tool turn) before posttrain's continuation is returned.
The reward is the vowels of each completion's last assistant message, over 4.

Regenerate (from the repository root):

    .venv-reference/trl-1/bin/python scripts/reference/trl1_parity_tools.py [--out TREE]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trl_parity as tp  # noqa: E402  (its model, tokenizer, common options and helpers)

import torch  # noqa: E402
import transformers  # noqa: E402
import trl  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl.chat_template_utils import qwen3_template  # noqa: E402

COMMAND = ".venv-reference/trl-1/bin/python scripts/reference/trl1_parity_tools.py"
BASE = "trainers/grpo/testdata/trl1_parity_tools"
ROWS = BASE + "/rows.jsonl"
ROLLOUTS = BASE + "/rollouts.json"
TEMPLATE = BASE + "/template.jinja"
GO_RECORD = ["go", "test", "./trainers/grpo", "-run", "^TestGRPO_TRL1ParityTools$", "-count=1"]

# Three steps (two generation batches off-policy), for the test's time.
COMMON = {"per_device_train_batch_size": 4, "num_generations": 4, "max_completion_length": 160,
          "learning_rate": 3e-3, "max_tool_calling_iterations": 1, "max_steps": 3}
# Off-policy with a reference model, so that the old and reference log-probs of the multi-turn
# sequences (tool turns included, masked) enter the loss.
CASES = {"calculator": {"tools": ["calculator"], "num_iterations": 2, "beta": 0.05, "use_bias_correction_kl": True},
         "calculator_on_policy": {"tools": ["calculator"]}}
POSTTRAIN_ONLY = {"tools"}  # TRL takes tools as the trainer's argument


def calculator(expression: str):
    """Evaluates an arithmetic expression and returns its value.

    Args:
        expression: The expression, e.g. "1234 * 5678" (+, -, *, /, //, %, ** and parentheses).
    """
    return eval(expression, {"__builtins__": {}})


def last_vowels(completions, **kwargs):
    out = []
    for c in completions:
        content = next((m["content"] for m in reversed(c) if m["role"] == "assistant"), "")
        out.append(sum(ch in "aeiou" for ch in content) / 4)
    return out


def split(ids, mask):
    """A completion of one tool round: its first turn, its tool turn (mask 0) and the rest."""
    k0 = mask.index(0) if 0 in mask else len(ids)
    k1 = k0
    while k1 < len(ids) and mask[k1] == 0:
        k1 += 1
    return ids[:k0], ids[k0:k1], ids[k1:]


def replay(gens, rows):
    trl.trainer.grpo_trainer.shuffle_sequence_dict = lambda d: d

    class Replay(tp.parity(trl.GRPOTrainer)):
        def _get_train_sampler(self, dataset=None):
            inner = trl.GRPOTrainer._get_train_sampler(self, dataset)
            self.sampler = tp.RolloutSampler(gens, self.num_generations, inner.repeat_count, len(inner))
            return self.sampler

        def _generate(self, prompts):
            self.g = gens[self.gen_i]
            self.gen_i += 1
            want = [rows[r]["prompt"] for r in self.g["rows"] for _ in range(self.num_generations)]
            assert prompts == want, (self.gen_i, prompts, want)
            self.turn = 0
            return super()._generate(prompts)

        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
            assert self.model.training, "the parity cases do not evaluate"
            g = self.g
            parts = [split(c, m) for c, m in zip(g["completion_ids"], g["masks"])]
            if self.turn == 0:
                self.turn = 1
                assert [list(p) for p in prompt_ids] == g["prompt_ids"], (self.gen_i, prompt_ids, g["prompt_ids"])
                return [first for first, _, _ in parts], None
            # The tool loop's continuations, in row order: each from posttrain's context.
            called = [j for j, (_, tool, _) in enumerate(parts) if tool]
            assert len(called) == len(prompt_ids), (len(called), len(prompt_ids))
            out = []
            for j, ctx in zip(called, prompt_ids):
                first, tool, rest = parts[j]
                assert list(ctx) == g["prompt_ids"][j] + first + tool, (self.gen_i, j, list(ctx), g["prompt_ids"][j] + first + tool)
                out.append(rest)
            return out, None

    Replay.__name__ = "GRPOTrainer"
    return Replay


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=tp.REPO, help="tree to write the golden into (default: the repository)")
    out = ap.parse_args().out
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    with open(os.path.join(tp.REPO, ROWS)) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    golden = {
        "generator": COMMAND,
        "versions": {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__},
        "model": tp.GRPO_MODEL,
        "tokenizer": tp.TOKENIZER,
        "template": TEMPLATE,
        "rows": ROWS,
        "rollouts": ROLLOUTS,
        "sampler": "rollouts",
        "common": tp.COMMON,
        "trl_only": tp.TRL_ONLY,
        "cases": {name: {"options": dict(COMMON, **opts), "rows": ROWS} for name, opts in CASES.items()},
    }
    os.makedirs(os.path.join(out, BASE), exist_ok=True)
    tp.write_json(os.path.join(out, BASE, "golden.json"), golden)
    env = {k: v for k, v in os.environ.items() if k != "POSTTRAIN_TEST_BACKEND"}
    env["POSTTRAIN_TRL_RECORD"] = os.path.abspath(out)
    print("trl1_parity_tools: posttrain runs the cases (" + " ".join(GO_RECORD) + ")", file=sys.stderr)
    subprocess.run(GO_RECORD, cwd=tp.REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, ROLLOUTS)) as f:
        recorded = json.load(f)
    with open(os.path.join(tp.REPO, TEMPLATE)) as f:
        template = f.read()
    with tempfile.TemporaryDirectory() as tmp:
        gdir = os.path.join(tmp, "grpo-model")
        shutil.copytree(os.path.join(out, tp.GRPO_MODEL), gdir)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tp.REPO, tp.TOKENIZER, name), gdir)
        for name, case in golden["cases"].items():
            print(f"trl1_parity_tools: grpo {name}", file=sys.stderr)
            opts = {k: v for k, v in case["options"].items() if k not in POSTTRAIN_ONLY}
            torch.manual_seed(0)
            model = AutoModelForCausalLM.from_pretrained(gdir, dtype=torch.float32)
            tok = AutoTokenizer.from_pretrained(gdir)
            tok.chat_template = template
            tok.response_template = qwen3_template
            args = dict(tp.COMMON, **tp.TRL_ONLY, **opts, output_dir=os.path.join(tmp, f"grpo-{name}"))
            tr = replay(recorded[name], rows)(model=model, reward_funcs=[last_vowels], args=trl.GRPOConfig(**args),
                                               train_dataset=Dataset.from_list(rows), processing_class=tok,
                                               tools=[calculator])
            tr.gen_i, tr.unrounded = 0, []
            tr.remove_callback(transformers.PrinterCallback)
            tr.train()
            assert tr.gen_i == len(recorded[name]), (tr.gen_i, len(recorded[name]))
            steps = [e for e in tr.state.log_history if "loss" in e]
            summary = [e for e in tr.state.log_history if "train_runtime" in e]
            assert len(steps) == opts["max_steps"] == len(tr.unrounded), (len(steps), len(tr.unrounded))
            for e, u in zip(steps, tr.unrounded):
                e["loss_unrounded"] = u
                e.pop("step_time", None)
            case.update({"order": tr.sampler.yielded, "num_rows": len(rows), "steps": steps,
                         "summary_keys": sorted(summary[0]) if summary else []})
    tp.write_json(os.path.join(out, BASE, "golden.json"), golden)


if __name__ == "__main__":
    main()
