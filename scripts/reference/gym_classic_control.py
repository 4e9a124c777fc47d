#!/usr/bin/python3
"""Golden trajectories of Gymnasium's CartPole-v1 and Acrobot-v1, for toy/gym's tests.

This re-implements the two environments line for line, so that the goldens need only numpy,
from Gymnasium 1.4.0's source (gymnasium/envs/classic_control/cartpole.py and acrobot.py,
commit 3f0476a8cc224dcce2167cc4b6971ae0f04d5cfc), with the wrappers gym.make adds that change
numbers (TimeLimit(max_episode_steps=500)) and with Gymnasium's seeding: reset(seed=s) and
action_space.seed(s) use seeding.np_random(s) = Generator(PCG64(SeedSequence(s))), and
Discrete.sample() is np_random.integers(n, dtype=np.int64). Only numpy (Debian's python3-numpy)
is needed; the random numbers come from numpy itself.

Regenerate (from the repository root):

    /usr/bin/python3 scripts/reference/gym_classic_control.py > toy/gym/testdata/trajectories.json
"""
import json
import math
import sys

import numpy as np
from numpy import cos, pi, sin


def np_random(seed):
    """gymnasium.utils.seeding.np_random for a non-negative int seed."""
    assert isinstance(seed, int) and seed >= 0
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))


class Discrete:
    """gymnasium.spaces.Discrete(n), start 0, dtype int64: seed() and unmasked sample()."""

    def __init__(self, n):
        self.n = n
        self.np_random = None

    def seed(self, seed):
        self.np_random = np_random(seed)

    def sample(self):
        return 0 + self.np_random.integers(self.n, dtype=np.int64)


class CartPole:
    """gymnasium/envs/classic_control/cartpole.py CartPoleEnv (sutton_barto_reward=False)."""

    def __init__(self):
        self.gravity = 9.8
        self.masscart = 1.0
        self.masspole = 0.1
        self.total_mass = self.masspole + self.masscart
        self.length = 0.5
        self.polemass_length = self.masspole * self.length
        self.force_mag = 10.0
        self.tau = 0.02
        self.kinematics_integrator = "euler"
        self.theta_threshold_radians = 12 * 2 * math.pi / 360
        self.x_threshold = 2.4
        self.action_space = Discrete(2)
        self.np_random = None
        self.state = None
        self.steps_beyond_terminated = None

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        costheta = np.cos(theta)
        sintheta = np.sin(theta)
        temp = (force + self.polemass_length * np.square(theta_dot) * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * np.square(costheta) / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        self.state = np.array((x, x_dot, theta, theta_dot), dtype=np.float64)
        terminated = bool(x < -self.x_threshold or x > self.x_threshold
                          or theta < -self.theta_threshold_radians or theta > self.theta_threshold_radians)
        if not terminated:
            reward = 1.0
        elif self.steps_beyond_terminated is None:
            self.steps_beyond_terminated = 0
            reward = 1.0
        else:
            self.steps_beyond_terminated += 1
            reward = 0.0
        return np.array(self.state, dtype=np.float32), reward, terminated, False

    def reset(self, seed=None):
        if seed is not None:  # gymnasium.Env.reset
            self.np_random = np_random(seed)
        self.state = self.np_random.uniform(low=-0.05, high=0.05, size=(4,))
        self.steps_beyond_terminated = None
        return np.array(self.state, dtype=np.float32)


def wrap(x, m, M):
    diff = M - m
    while x > M:
        x = x - diff
    while x < m:
        x = x + diff
    return x


def bound(x, m, M):
    return min(max(x, m), M)


def rk4(derivs, y0, t):
    Ny = len(y0)
    yout = np.zeros((len(t), Ny), np.float64)
    yout[0] = y0
    for i in np.arange(len(t) - 1):
        this = t[i]
        dt = t[i + 1] - this
        dt2 = dt / 2.0
        y0 = yout[i]
        k1 = np.asarray(derivs(y0))
        k2 = np.asarray(derivs(y0 + dt2 * k1))
        k3 = np.asarray(derivs(y0 + dt2 * k2))
        k4 = np.asarray(derivs(y0 + dt * k3))
        yout[i + 1] = y0 + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
    return yout[-1][:4]


class Acrobot:
    """gymnasium/envs/classic_control/acrobot.py AcrobotEnv (book dynamics, no torque noise)."""

    dt = 0.2
    LINK_LENGTH_1 = 1.0
    LINK_LENGTH_2 = 1.0
    LINK_MASS_1 = 1.0
    LINK_MASS_2 = 1.0
    LINK_COM_POS_1 = 0.5
    LINK_COM_POS_2 = 0.5
    LINK_MOI = 1.0
    MAX_VEL_1 = 4 * pi
    MAX_VEL_2 = 9 * pi
    AVAIL_TORQUE = [-1.0, 0.0, +1]
    torque_noise_max = 0.0
    book_or_nips = "book"

    def __init__(self):
        self.action_space = Discrete(3)
        self.np_random = None
        self.state = None

    def reset(self, seed=None):
        if seed is not None:
            self.np_random = np_random(seed)
        self.state = self.np_random.uniform(low=-0.1, high=0.1, size=(4,)).astype(np.float32)
        return self._get_ob()

    def step(self, a):
        s = self.state
        torque = self.AVAIL_TORQUE[a]
        s_augmented = np.append(s, torque)
        ns = rk4(self._dsdt, s_augmented, [0, self.dt])
        ns[0] = wrap(ns[0], -pi, pi)
        ns[1] = wrap(ns[1], -pi, pi)
        ns[2] = bound(ns[2], -self.MAX_VEL_1, self.MAX_VEL_1)
        ns[3] = bound(ns[3], -self.MAX_VEL_2, self.MAX_VEL_2)
        self.state = ns
        terminated = self._terminal()
        reward = -1.0 if not terminated else 0.0
        return self._get_ob(), reward, terminated, False

    def _get_ob(self):
        s = self.state
        return np.array([cos(s[0]), sin(s[0]), cos(s[1]), sin(s[1]), s[2], s[3]], dtype=np.float32)

    def _terminal(self):
        s = self.state
        return bool(-cos(s[0]) - cos(s[1] + s[0]) > 1.0)

    def _dsdt(self, s_augmented):
        m1 = self.LINK_MASS_1
        m2 = self.LINK_MASS_2
        l1 = self.LINK_LENGTH_1
        lc1 = self.LINK_COM_POS_1
        lc2 = self.LINK_COM_POS_2
        I1 = self.LINK_MOI
        I2 = self.LINK_MOI
        g = 9.8
        a = s_augmented[-1]
        s = s_augmented[:-1]
        theta1 = s[0]
        theta2 = s[1]
        dtheta1 = s[2]
        dtheta2 = s[3]
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos(theta2)) + I1 + I2
        d2 = m2 * (lc2**2 + l1 * lc2 * cos(theta2)) + I2
        phi2 = m2 * lc2 * g * cos(theta1 + theta2 - pi / 2.0)
        phi1 = (-m2 * l1 * lc2 * dtheta2**2 * sin(theta2)
                - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin(theta2)
                + (m1 * lc1 + m2 * l1) * g * cos(theta1 - pi / 2)
                + phi2)
        ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * sin(theta2) - phi2) / (
            m2 * lc2**2 + I2 - d2**2 / d1)
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return dtheta1, dtheta2, ddtheta1, ddtheta2, 0.0


class TimeLimit:
    """gymnasium.wrappers.TimeLimit (gym.make's max_episode_steps=500 for both ids)."""

    def __init__(self, env, max_episode_steps=500):
        self.env, self.max_episode_steps, self.elapsed = env, max_episode_steps, None
        self.action_space = env.action_space

    def reset(self, seed=None):
        self.elapsed = 0
        return self.env.reset(seed=seed)

    def step(self, action):
        obs, reward, terminated, truncated = self.env.step(action)
        self.elapsed += 1
        if self.elapsed >= self.max_episode_steps:
            truncated = True
        return obs, reward, terminated, truncated


def make(env_id):
    return TimeLimit({"CartPole-v1": CartPole, "Acrobot-v1": Acrobot}[env_id]())


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
        obs = env.reset(seed=seed if ep == 0 else None)
        rec = {"reset": {"observation": floats(obs), "state": floats(env.env.state)}, "steps": []}
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
            obs, r, term, trunc = env.step(a)
            rec["steps"].append({"action": a, "observation": floats(obs), "state": floats(env.env.state),
                                 "reward": r, "terminated": term, "truncated": trunc})
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
    json.dump({"generator": "scripts/reference/gym_classic_control.py",
               "gymnasium_source": "Gymnasium 1.4.0 @ 3f0476a8cc224dcce2167cc4b6971ae0f04d5cfc",
               "numpy": np.__version__,
               "regenerate": "/usr/bin/python3 scripts/reference/gym_classic_control.py > toy/gym/testdata/trajectories.json",
               "cases": cases}, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
