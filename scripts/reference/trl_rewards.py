#!/usr/bin/env python3
"""TRL 0.24.0's built-in reward functions (trl.rewards, under the names trl/scripts/grpo.py
registers them by) on a table of cases: the golden of data/extreward's TestTRLRewards_Golden.

Regenerate (from the repository root, in the pinned `.venv-reference/trl-0.24`):

    .venv-reference/trl-0.24/bin/python scripts/reference/trl_rewards.py

which writes data/extreward/testdata/trl_rewards.json.
"""
import argparse
import json
import os

import trl
from trl.scripts.grpo import reward_funcs_registry

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OUT = os.path.join(REPO, "data/extreward/testdata/trl_rewards.json")

THINK = [
    "<think>\nThis is my reasoning.\n</think>\nThis is my answer.",
    "<think>\nThis is my reasoning.\nThis is my answer.",
    "<think>a</think>b",
    "<think></think>",
    "<think>a<think>b</think>c",
    "<think>a</think>b<think>c",
    "x<think>a</think>",
    " <think>a</think>",
    "<think>a</think>\n\nline two\nline three",
    "<think>\n</think>\n",
    "</think><think>",
    "<think>a</think",
    "<THINK>a</THINK>",
    "<think>a</think></think>",
    "",
]
LENGTHS = [0, 1, 1023, 1024, 1025, 1100, 1279, 1280, 1281, 5000]


def main():
    global OUT
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=REPO, help="tree to write into (default: the repository)")
    OUT = os.path.join(ap.parse_args().out, "data/extreward/testdata/trl_rewards.json")
    think = reward_funcs_registry["think_format_reward"]
    overlong = reward_funcs_registry["get_soft_overlong_punishment"]
    golden = {
        "generator": "scripts/reference/trl_rewards.py",
        "versions": {"trl": trl.__version__},
        "think_format_reward": [
            {"completion": c, "reward": r}
            for c, r in zip(THINK, think([[{"role": "assistant", "content": c}] for c in THINK]))
        ],
        "get_soft_overlong_punishment": [
            {"length": n, "reward": r} for n, r in zip(LENGTHS, overlong([[7] * n for n in LENGTHS]))
        ],
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
