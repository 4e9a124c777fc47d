# Reward functions for data/extreward's tests, written as for TRL's GRPOTrainer.
import math
import os
import time

calls = []


def reward_len(completions, **kwargs):
    """TRL's quick-start reward: the closer to 20 characters, the better."""
    print("reward_len printing to stdout must not break the protocol")
    return [-abs(20 - len(c)) for c in completions]


def echo_kwargs(prompts, completions, completion_ids, trainer_state, **kwargs):
    calls.append(1)
    out = []
    for i, c in enumerate(completions):
        text = c if isinstance(c, str) else c[0]["content"]
        p = prompts[i] if isinstance(prompts[i], str) else prompts[i][-1]["content"]
        out.append(len(text) + 100 * len(completion_ids[i]) + 10000 * kwargs["answer"][i]
                   + 1e6 * trainer_state.global_step + 1e7 * len(calls) + (0.5 if p.startswith("Q") else 0))
    return out


def state_fields(completions, trainer_state, **kwargs):
    return [trainer_state.epoch + trainer_state.max_steps for _ in completions]


def not_scored(completions, **kwargs):
    return [None if i % 2 else 1.0 for i in range(len(completions))]


def boom(completions, **kwargs):
    return [1 / 0 for _ in completions]


def wrong_count(completions, **kwargs):
    return [1.0]


def nan(completions, **kwargs):
    return [math.nan for _ in completions]


def text(completions, **kwargs):
    return ["1.0" for _ in completions]


def slow(completions, **kwargs):
    time.sleep(30)
    return [0.0 for _ in completions]


def crash(completions, **kwargs):
    print("about to exit", flush=True)
    os._exit(3)


not_a_function = 3
