#!/usr/bin/env python3
"""The course's PyTorch extras (extras/dqn_cartpole.py, extras/ppo_cartpole.py), run on Gymnasium
itself (gymnasium 1.4.0 in `.venv-reference/trl-0.24`, torch 2.15.0 on the CPU), to measure what the
originals reach next to toy/gymrl's Go ports (`posttrain toy cartpole-dqn|cartpole-ppo|acrobot-ppo`).

The two main() functions below are the extras' code as the course's text gives it, verbatim
(`import gymnasium as gym`, `gym.make(...)`), except for these replacements and nothing else:

  * ppo_main's ENV_ID is a parameter (`ENV_ID`, default 'CartPole-v1') instead of the module
    constant, so that one file runs both CartPole-v1 and Acrobot-v1 ("ENV_ID만 바꿔 보자").
  * The `if __name__ == '__main__'` blocks are replaced by the command line below, which passes
    the seed (the extras' main(seed=0) parameter; the extras' own command line leaves it at 0)
    and prints the final value main() returns (mean return of the last 10 episodes) and the wall
    time. The extras' progress prints are kept.

Seeding is the extras' own: DQN seeds `random` and torch and the environment
(env.reset(seed=seed), env.action_space.seed(seed)); PPO seeds torch and env.reset(seed=seed).
Neither extra seeds numpy's global generator, and neither draws from it (numpy is only used for
np.array), so it is not seeded here either. torch.set_num_threads(1) (one summation order).

Usage (from the repository root):

    .venv-reference/trl-0.24/bin/python scripts/reference/extras_cartpole.py dqn  --seed 1 [--steps 30000]
    .venv-reference/trl-0.24/bin/python scripts/reference/extras_cartpole.py ppo  --seed 1 [--iterations 60] [--env Acrobot-v1]
"""
import argparse
import random
import time
from collections import deque

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical


# ---- extras/dqn_cartpole.py main(), verbatim ----
def dqn_main(total_steps=30_000, seed=0):
    random.seed(seed)
    torch.manual_seed(seed)
    env = gym.make('CartPole-v1')
    q_net = nn.Sequential(nn.Linear(4, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 2))
    target_net = nn.Sequential(nn.Linear(4, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 2))
    target_net.load_state_dict(q_net.state_dict())
    optimizer = torch.optim.Adam(q_net.parameters(), lr=2.5e-4)
    buffer = deque(maxlen=10_000)                                   # replay buffer
    gamma, batch_size, returns, ep_return = 0.99, 128, [], 0.0
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    for step in range(total_steps):
        epsilon = max(0.05, 1.0 - step / (0.5 * total_steps))       # ε를 선형으로 감소
        if random.random() < epsilon:
            action = env.action_space.sample()
        else:
            with torch.no_grad():
                action = int(q_net(torch.tensor(obs, dtype=torch.float32)).argmax())
        next_obs, reward, terminated, truncated, _ = env.step(action)
        buffer.append((obs, action, reward, next_obs, terminated))
        ep_return += reward
        obs = next_obs
        if terminated or truncated:
            returns.append(ep_return)
            ep_return, (obs, _) = 0.0, env.reset()
        if step > 1_000 and step % 10 == 0:
            s, a, r, s2, d = map(lambda x: torch.as_tensor(np.array(x), dtype=torch.float32),
                                 zip(*random.sample(buffer, batch_size)))
            with torch.no_grad():
                y = r + gamma * (1 - d) * target_net(s2).max(dim=1).values          # 식 (4.1)
            q = q_net(s).gather(1, a.long().unsqueeze(1)).squeeze(1)
            loss = nn.functional.mse_loss(q, y)                                      # 식 (4.2)
            optimizer.zero_grad()
            loss.backward()                                                          # 식 (4.3): autograd
            optimizer.step()
        if step % 500 == 0:
            target_net.load_state_dict(q_net.state_dict())                           # θ⁻ ← θ
        if step % 5_000 == 0 and returns:
            print(f'step {step:6d}  최근 10 에피소드 평균 return {sum(returns[-10:]) / len(returns[-10:]):6.1f}')
    return sum(returns[-10:]) / 10


# ---- extras/ppo_cartpole.py main(), verbatim but for ENV_ID as a parameter ----
def ppo_main(iterations=60, seed=0, ENV_ID='CartPole-v1'):
    torch.manual_seed(seed)
    env = gym.make(ENV_ID)
    n_obs, n_act = env.observation_space.shape[0], env.action_space.n
    actor = nn.Sequential(nn.Linear(n_obs, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, n_act))
    critic = nn.Sequential(nn.Linear(n_obs, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
    opt = torch.optim.Adam(list(actor.parameters()) + list(critic.parameters()), lr=2.5e-4)
    T, gamma, lam, eps, epochs, minibatch = 1024, 0.99, 0.95, 0.2, 4, 256
    obs, _ = env.reset(seed=seed)
    returns, ep_return = [], 0.0
    for it in range(iterations):
        # ① rollout: π_old로 T걸음 모으기
        buf = {k: [] for k in ('obs', 'act', 'logp', 'rew', 'done', 'val')}
        for _ in range(T):
            o = torch.tensor(obs, dtype=torch.float32)
            with torch.no_grad():
                dist = Categorical(logits=actor(o))
                a = dist.sample()
                v = critic(o).squeeze()
            obs, r, terminated, truncated, _ = env.step(int(a))
            for k, x in zip(buf, (o, a, dist.log_prob(a), r, float(terminated), v)):
                buf[k].append(x)
            ep_return += r
            if terminated or truncated:
                returns.append(ep_return)
                ep_return, (obs, _) = 0.0, env.reset()
        # ② GAE (식 6.1–6.2). truncated는 이 축약판에서 종료처럼 다룬다.
        with torch.no_grad():
            next_v = critic(torch.tensor(obs, dtype=torch.float32)).squeeze()
        adv, A = [0.0] * T, 0.0
        for t in reversed(range(T)):
            nv = next_v if t == T - 1 else buf['val'][t + 1]
            nonterminal = 1.0 - buf['done'][t]
            delta = buf['rew'][t] + gamma * nv * nonterminal - buf['val'][t]
            A = delta + gamma * lam * nonterminal * A
            adv[t] = A
        b_obs, b_act = torch.stack(buf['obs']), torch.stack(buf['act'])
        b_logp, b_val = torch.stack(buf['logp']), torch.stack(buf['val'])
        b_adv = torch.tensor(adv)
        b_ret = b_adv + b_val
        # ③ 같은 batch를 epochs번, minibatch로 나눠 재사용 (식 7.1–7.3)
        for _ in range(epochs):
            for idx in torch.randperm(T).split(minibatch):
                dist = Categorical(logits=actor(b_obs[idx]))
                ratio = (dist.log_prob(b_act[idx]) - b_logp[idx]).exp()
                a = b_adv[idx]
                a = (a - a.mean()) / (a.std() + 1e-8)                    # advantage 정규화
                pg_loss = -torch.min(ratio * a, ratio.clamp(1 - eps, 1 + eps) * a).mean()
                v_loss = 0.5 * (critic(b_obs[idx]).squeeze() - b_ret[idx]).pow(2).mean()
                loss = pg_loss + 0.5 * v_loss - 0.01 * dist.entropy().mean()
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(list(actor.parameters()) + list(critic.parameters()), 0.5)
                opt.step()
        if it % 10 == 0 and returns:
            print(f'iter {it:3d}  최근 10 에피소드 평균 return {sum(returns[-10:]) / len(returns[-10:]):6.1f}')
    return sum(returns[-10:]) / 10


def cli():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('algo', choices=('dqn', 'ppo'))
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--steps', type=int, default=30_000, help='dqn: total_steps')
    p.add_argument('--iterations', type=int, default=60, help='ppo: iterations')
    p.add_argument('--env', default='CartPole-v1', choices=('CartPole-v1', 'Acrobot-v1'),
                   help='ppo: ENV_ID (dqn_cartpole.py is CartPole-v1 only)')
    args = p.parse_args()
    if args.algo == 'dqn' and args.env != 'CartPole-v1':
        p.error('--env: dqn_cartpole.py runs CartPole-v1 only')
    torch.set_num_threads(1)
    t0 = time.time()
    if args.algo == 'dqn':
        final = dqn_main(args.steps, seed=args.seed)
        what = f'dqn CartPole-v1 steps={args.steps}'
    else:
        final = ppo_main(args.iterations, seed=args.seed, ENV_ID=args.env)
        what = f'ppo {args.env} iterations={args.iterations}'
    print(f'FINAL {what} seed={args.seed} final_mean_return_last10={final:.1f} '
          f'wall_s={time.time() - t0:.1f}', flush=True)


if __name__ == '__main__':
    cli()
