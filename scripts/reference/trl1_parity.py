#!/usr/bin/env python3
"""TRL 1.16's GRPOTrainer replaying posttrain's completions: the golden of TestGRPO_TRL1Parity
for TRL 1.x's loss types (cispo, sapo, luspo, vespo).

The method is trl_parity.py's GRPO half (its rows, its model trainers/grpo/testdata/trl_parity/model,
its reward functions, its options): posttrain samples each case's completions
(TestGRPO_TRL1Parity with POSTTRAIN_TRL_RECORD writes rollouts.json), then TRL 1.16 (transformers
5.24, torch 2.15 on the CPU, one thread; the pinned `.venv-reference/trl-1`) trains on exactly
those, its generation call replaced by a replay of them, and every logged step goes to
trainers/grpo/testdata/trl1_parity/golden.json.

Regenerate (from the repository root):

    .venv-reference/trl-1/bin/python scripts/reference/trl1_parity.py [--out TREE]

TRL 1.x's step_time (a step's wall time) is left out of the golden.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trl_parity as tp  # noqa: E402  (its rows, model, rewards, options and samplers)

import torch  # noqa: E402
import transformers  # noqa: E402
import trl  # noqa: E402

COMMAND = ".venv-reference/trl-1/bin/python scripts/reference/trl1_parity.py"
BASE = "trainers/grpo/testdata/trl1_parity"
ROLLOUTS = BASE + "/rollouts.json"
GO_RECORD = ["go", "test", "./trainers/grpo", "-run", "^TestGRPO_TRL1Parity$", "-count=1"]

# Each case is off-policy (num_iterations 2: a generation batch serves two updates), so the
# importance ratio moves away from 1 and each loss's weighting of it shows. dapo_kl_uncorrected is
# TRL 0.24's KL under TRL 1.16 (use_bias_correction_kl off). Two cases take trl_parity.py's
# off_policy_clip learning rate, 1e-3: at 3e-3 their fourth step's float32 results (a KL near 7,
# vespo's small weights) drift 2-3e-5 apart between the two implementations.
CASES = {
    "cispo": {"loss_type": "cispo", "epsilon_high": 1.05, "num_iterations": 2},
    "sapo": {"loss_type": "sapo", "num_iterations": 2, "beta": 0.05, "use_bias_correction_kl": True},
    "dapo_kl_uncorrected": {"loss_type": "dapo", "num_iterations": 2, "beta": 0.05, "use_bias_correction_kl": False,
                            "learning_rate": 1e-3},
    "dapo_steps_per_generation": {"steps_per_generation": 4, "dapo_normalizer": "per_step"},
    "luspo": {"loss_type": "luspo", "importance_sampling_level": "sequence", "num_iterations": 2,
              "epsilon": 3e-4, "epsilon_high": 4e-4},
    "vespo": {"loss_type": "vespo", "num_iterations": 2, "vespo_k_neg": 2.5, "learning_rate": 1e-3},
}


# posttrain's own options in a case (TRL 1.x has the behaviour without an option): the golden
# keeps them for posttrain's side, TRL's GRPOConfig does not get them.
POSTTRAIN_ONLY = {"dapo_normalizer"}


def replay(gens, rows):
    """GRPOTrainer whose generation returns the next batch posttrain sampled, after checking that
    TRL drew the same prompts and tokenized them to the same ids; the completion texts the reward
    functions get are checked against posttrain's. The shuffle of a generation batch before its
    split into micro-batches is off (posttrain keeps the rows in order)."""
    trl.trainer.grpo_trainer.shuffle_sequence_dict = lambda d: d

    class Replay(tp.parity(trl.GRPOTrainer)):
        def _get_train_sampler(self, dataset=None):
            inner = trl.GRPOTrainer._get_train_sampler(self, dataset)
            self.sampler = tp.RolloutSampler(gens, self.num_generations, inner.repeat_count, len(inner))
            return self.sampler

        def _generate(self, prompts):
            g = gens[self.gen_i]
            want = [rows[r]["prompt"] for r in g["rows"] for _ in range(self.num_generations)]
            assert prompts == want, (self.gen_i, prompts, want)
            return super()._generate(prompts)

        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
            assert self.model.training, "the parity cases do not evaluate"
            g = gens[self.gen_i]
            self.gen_i += 1
            assert [list(p) for p in prompt_ids] == g["prompt_ids"], (self.gen_i, prompt_ids, g["prompt_ids"])
            self.texts = g["texts"]
            return g["completion_ids"], None

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            assert completions == self.texts, (completions, self.texts)
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    Replay.__name__ = "GRPOTrainer"
    return Replay


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=tp.REPO, help="tree to write the golden into (default: the repository)")
    out = ap.parse_args().out
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    rows = tp.grpo_rows()
    golden = {
        "generator": COMMAND,
        "versions": {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__},
        "model": tp.GRPO_MODEL,
        "tokenizer": tp.TOKENIZER,
        "rows": "trainers/grpo/testdata/trl_parity/rows.jsonl",
        "rollouts": ROLLOUTS,
        "sampler": "rollouts",
        "common": tp.COMMON,
        "trl_only": tp.TRL_ONLY,
        "cases": {name: {"options": dict(tp.GRPO_COMMON, **opts), "rows": "trainers/grpo/testdata/trl_parity/rows.jsonl"}
                  for name, opts in CASES.items()},
    }
    os.makedirs(os.path.join(out, BASE), exist_ok=True)
    tp.write_json(os.path.join(out, BASE, "golden.json"), golden)
    env = {k: v for k, v in os.environ.items() if k != "POSTTRAIN_TEST_BACKEND"}
    env["POSTTRAIN_TRL_RECORD"] = os.path.abspath(out)
    print("trl1_parity: posttrain samples the completions (" + " ".join(GO_RECORD) + ")", file=sys.stderr)
    subprocess.run(GO_RECORD, cwd=tp.REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, ROLLOUTS)) as f:
        recorded = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        gdir = os.path.join(tmp, "grpo-model")
        shutil.copytree(os.path.join(out, tp.GRPO_MODEL), gdir)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tp.REPO, tp.TOKENIZER, name), gdir)
        for name, case in golden["cases"].items():
            print(f"trl1_parity: grpo {name}", file=sys.stderr)
            opts = {k: v for k, v in case["options"].items() if k not in POSTTRAIN_ONLY}
            tp.replay_grpo_case(replay(recorded[name], rows), recorded[name], rows, case, opts, gdir,
                                os.path.join(tmp, f"grpo-{name}"))
    for case in golden["cases"].values():  # TRL 1.x's step_time is a wall time: not a golden
        for e in case["steps"]:
            e.pop("step_time", None)
    tp.write_json(os.path.join(out, BASE, "golden.json"), golden)


if __name__ == "__main__":
    main()
