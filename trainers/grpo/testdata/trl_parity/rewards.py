# The GRPO parity case's reward functions, one file for both sides: TRL's GRPOTrainer imports them
# (scripts/reference/trl_parity.py) and posttrain calls them through its Python worker
# (--reward-funcs rewards.py:vowels, TestGRPO_TRLParityPythonRewards), as well as its Go copies
# (trainers/grpo/trl_parity_test.go, parityRewards).


def vowels(prompts, completions, **kwargs):
    return [sum(ch in "aeiou" for ch in c) / 4 for c in completions]


def spaces(prompts, completions, kind, **kwargs):
    return [float(c.count(" ")) if k == "spaces" else None for c, k in zip(completions, kind)]
