#!/usr/bin/env python3
"""Golden trajectories of Gymnasium's CartPole-v1 and Acrobot-v1, for toy/gym's tests.

Gymnasium itself makes them: gymnasium.make("CartPole-v1") and gymnasium.make("Acrobot-v1")
(gymnasium 1.4.0, the pinned `.venv-reference/trl-0.24`; gym.make's wrappers included: TimeLimit
(max_episode_steps=500), OrderEnforcing, PassiveEnvChecker), reset(seed=s) then reset() (the
environment's np_random stream continues), action_space.seed(s) and action_space.sample(), fixed
action sequences and two feedback controllers. "state" is env.unwrapped.state (float64 after a
step; Acrobot's reset state is float32), "observation" the float32 observation step() returns.

Regenerate (from the repository root; `make reference` runs it, scripts/reference/run.sh):

    .venv-reference/trl-0.24/bin/python scripts/reference/gym_classic_control.py [--out TREE]

which writes TREE/toy/gym/testdata/trajectories.json (TREE defaults to the repository).
"""
import argparse
import json
import os
import sys

import gymnasium
import numpy as np

OUT = "toy/gym/testdata/trajectories.json"


def make(env_id):
    return gymnasium.make(env_id)


def cartpole_controller(obs):
    """A fixed feedback rule that keeps the pole up past 500 steps (to reach truncation)."""
    return 1 if obs[2] + 0.5 * obs[3] + 0.01 * obs[0] + 0.1 * obs[1] > 0 else 0


def acrobot_controller(obs):
    """Energy pumping: torque along the second joint's velocity; reaches the goal."""
    return 2 if obs[5] > 0 else 0


def floats(a):
    return [float(x) for x in a]


def run_case(name, env_id, seed, episodes, policy, action_seed=None, fixed=None, extra_after_end=0):
    """Episodes with reset(seed=seed) first, then reset() (the np_random stream continues).
    Actions: 'random' (action_space.seed(action_seed) then sample()), 'fixed' (the list, cycled),
    or a controller of the float32 observation. extra_after_end steps continue past the first
    episode's end (Gymnasium allows it; CartPole then rewards 0)."""
    env = make(env_id)
    if action_seed is not None:
        env.action_space.seed(action_seed)
    out = []
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed if ep == 0 else None)
        rec = {"reset": {"observation": floats(obs), "state": floats(env.unwrapped.state)}, "steps": []}
        i, left = 0, None
        while True:
            if policy == "random":
                a = int(env.action_space.sample())
            elif policy == "fixed":
                a = fixed[i % len(fixed)]
            elif policy == "cartpole_controller":
                a = cartpole_controller(obs)
            else:
                a = acrobot_controller(obs)
            obs, r, term, trunc, _ = env.step(a)
            rec["steps"].append({"action": a, "observation": floats(obs), "state": floats(env.unwrapped.state),
                                 "reward": float(r), "terminated": bool(term), "truncated": bool(trunc)})
            i += 1
            if left is not None:
                left -= 1
                if left == 0:
                    break
            elif term or trunc:
                if ep == 0 and extra_after_end:
                    left = extra_after_end
                else:
                    break
        out.append(rec)
    return {"name": name, "env": env_id, "seed": seed, "action_seed": action_seed, "policy": policy,
            "fixed": fixed, "extra_after_end": extra_after_end, "episodes": out}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=".", help="tree to write %s under (default: the repository)" % OUT)
    args = ap.parse_args()
    cases = [
        run_case("cartpole-random-seed0", "CartPole-v1", 0, 4, "random", action_seed=0),
        run_case("cartpole-random-seed42", "CartPole-v1", 42, 3, "random", action_seed=7),
        run_case("cartpole-random-bigseed", "CartPole-v1", 2**40 + 123, 2, "random", action_seed=2**33 + 5),
        run_case("cartpole-fixed-ones-past-end", "CartPole-v1", 3, 1, "fixed", fixed=[1], extra_after_end=3),
        run_case("cartpole-fixed-pattern", "CartPole-v1", 5, 2, "fixed", fixed=[0, 1, 1, 0, 1]),
        run_case("cartpole-controller-truncation", "CartPole-v1", 1, 1, "cartpole_controller"),
        run_case("acrobot-random-truncation", "Acrobot-v1", 0, 1, "random", action_seed=0),
        run_case("acrobot-controller-termination", "Acrobot-v1", 11, 2, "acrobot_controller"),
        run_case("acrobot-fixed-pattern", "Acrobot-v1", 2, 1, "fixed", fixed=[2, 2, 0, 1, 0, 0, 2]),
    ]
    for c in cases:
        eps = c["episodes"]
        last = eps[0]["steps"][-1]
        print(f'{c["name"]}: {[len(e["steps"]) for e in eps]} steps, first episode ends '
              f'terminated={last["terminated"]} truncated={last["truncated"]}', file=sys.stderr)
    path = os.path.join(args.out, OUT)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"generator": "scripts/reference/gym_classic_control.py",
                   "gymnasium": gymnasium.__version__,
                   "numpy": np.__version__,
                   "regenerate": ".venv-reference/trl-0.24/bin/python scripts/reference/gym_classic_control.py",
                   "cases": cases}, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
