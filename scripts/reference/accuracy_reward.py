#!/usr/bin/env python3
"""TRL 0.24.0's trl.rewards.accuracy_reward (math_verify 0.8.0) on a table of solution/completion
pairs: the golden of data/extreward's TestAccuracyReward_WorkerAsTRL, which runs the same function
through posttrain's Python worker. The table shows math_verify's decisions as they are, quirks
included (a solution "2\\sqrt{2}" parses as 2, "\\sqrt{2}" not at all, so it is compared as text;
two boxed answers in one completion score 0 against either).

Regenerate (from the repository root, in the pinned `.venv-reference/trl-0.24`):

    .venv-reference/trl-0.24/bin/python scripts/reference/accuracy_reward.py

which writes data/extreward/testdata/accuracy_reward.json.
"""
import argparse
import json
import logging
import os

from importlib.metadata import version

import trl
from trl.rewards import accuracy_reward

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# (solution, completion)
CASES = [
    ('42', 'The answer is \\boxed{42}.'),
    ('42', '\\boxed{42.0}'),
    ('42', '\\boxed{042}'),
    ('42', '\\boxed{41}'),
    ('42', '42'),
    ('42', 'The answer is 42.'),
    ('42', 'The answer is $42$.'),
    ('42', 'Final answer: $42$'),
    ('42', 'The final answer is $42$. I hope it is correct.'),
    ('\\frac{1}{3}', '\\boxed{\\frac{1}{3}}'),
    ('\\frac{1}{3}', '\\boxed{0.333333}'),
    ('\\frac{1}{3}', '\\boxed{0.3333}'),
    ('\\frac{1}{3}', '\\boxed{1/3}'),
    ('\\frac{1}{3}', '\\boxed{\\dfrac{2}{6}}'),
    ('1/3', '\\boxed{\\frac{1}{3}}'),
    ('0.5', '\\boxed{\\frac{1}{2}}'),
    ('0.5', '\\boxed{50\\%}'),
    ('50\\%', '\\boxed{0.5}'),
    ('50\\%', '\\boxed{50}'),
    ('50', '\\boxed{50\\%}'),
    ('-3', '\\boxed{-3}'),
    ('-3', '\\boxed{- 3}'),
    ('1,000', '\\boxed{1000}'),
    ('1000', '\\boxed{1,000}'),
    ('1000', '\\boxed{1{,}000}'),
    ('5', '\\boxed{x = 5}'),
    ('5', '\\boxed{5 \\text{ cm}}'),
    ('5', '\\boxed{5\\text{cm}}'),
    ('5', '\\boxed{\\$5}'),
    ('5', '\\boxed{5^\\circ}'),
    ('2', '\\boxed{\\sqrt{4}}'),
    ('\\sqrt{2}', '\\boxed{1.414214}'),
    ('\\sqrt{2}', '\\boxed{\\sqrt{2}}'),
    ('2\\sqrt{2}', '\\boxed{\\sqrt{8}}'),
    ('\\pi', '\\boxed{3.14159}'),
    ('\\pi', '\\boxed{3.141593}'),
    ('7', '\\boxed{3} then \\boxed{7}'),
    ('3', '\\boxed{3} then \\boxed{7}'),
    ('7', '$\\boxed{3}$ and $\\boxed{7}$'),
    ('7', '\\boxed{7'),
    ('7', 'no box here 7'),
    ('Paris', 'paris'),
    ('Paris', '\\boxed{Paris}'),
    ('x^2', '\\boxed{x^2}'),
    ('6', '\\boxed{2 \\cdot 3}'),
    ('6', '\\boxed{2 \\times 3}'),
    ('6', '\\boxed{2+4}'),
    ('8', '\\boxed{2^3}'),
    ('\\frac{3}{4}', '\\boxed{\\frac34}'),
    ('0.75', '\\boxed{.75}'),
    ('3', 'The answer is \\boxed{3}. Final answer: $5$'),
    ('5', 'The answer is \\boxed{3}. Final answer: $5$'),
    ('12', 'answer is 12'),
    ('The answer is 12 apples', '\\boxed{12}'),
    ('12 apples', '\\boxed{12}'),
    ('$12$', '\\boxed{12}'),
    ('\\boxed{12}', '\\boxed{12}'),
    ('1.5', '\\boxed{\\frac{3}{2}}'),
    ('1.5', '\\boxed{1.50}'),
    ('2', '\\boxed{\\left(2\\right)}'),
    ('10', '\\boxed{10.0000001}'),
    ('10', '\\boxed{10.000001}'),
    ('0.1', '\\boxed{0.1000004}'),
    ('0.1', '\\boxed{0.1000006}')
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=REPO, help="tree to write into (default: the repository)")
    out = os.path.join(ap.parse_args().out, "data/extreward/testdata/accuracy_reward.json")
    logging.disable(logging.CRITICAL)  # math_verify logs each expression it cannot parse
    rewards = accuracy_reward([[{"role": "assistant", "content": c}] for _, c in CASES], [s for s, _ in CASES])
    golden = {
        "generator": "scripts/reference/accuracy_reward.py",
        "versions": {"trl": trl.__version__, "math-verify": version("math-verify"),
                     "latex2sympy2_extended": version("latex2sympy2_extended")},
        "cases": [{"solution": s, "completion": c, "reward": r} for (s, c), r in zip(CASES, rewards)],
    }
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {out}: {len(CASES)} cases")


if __name__ == "__main__":
    main()
