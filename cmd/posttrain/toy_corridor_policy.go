package main

// Corridor phases 4-7 (`posttrain toy dqn|reinforce|a2c|ppo`); plumbing in toy_corridor.go.

import "github.com/posttrain/posttrain/toy/corridor"

func init() {
	addDQNToy()
	addReinforceToy()
	addA2CToy()
	addPPOToy()
}

func addDQNToy() {
	addCorridorToy(4, "dqn", "DQN: an MLP Q-network with hand-written backprop, replay buffer and target network (식 (4.1)-(4.3))",
		corridor.DefaultPhase4, func(c *corridor.Phase4Config) []toyParam {
			return []toyParam{seedVar(&c.Seed),
				intVar(&c.Steps, "steps", "environment steps"),
				intVar(&c.BatchSize, "batch-size", "transitions per SGD step (rng.sample from the buffer)"),
				floatVar(&c.LR, "lr", "SGD learning rate"),
				floatVar(&c.Gamma, "gamma", "discount γ (also of Q*)"),
				intVar(&c.BufferSize, "buffer-size", "replay buffer capacity (oldest entries fall off)"),
				intVar(&c.LearningStarts, "learning-starts", "first step that trains"),
				intVar(&c.TargetEvery, "target-every", "copy the online network to the target every N steps"),
				intVar(&c.Hidden, "hidden", "hidden units of the MLP")}
		}, corridor.RunPhase4)
}

func addReinforceToy() {
	addCorridorToy(5, "reinforce", "REINFORCE with and without a baseline (식 (5.2)-(5.4))",
		corridor.DefaultPhase5, func(c *corridor.Phase5Config) []toyParam {
			return []toyParam{seedVar(&c.Seed),
				intVar(&c.Episodes, "episodes", "REINFORCE training episodes"),
				floatVar(&c.Alpha, "alpha", "step size α"),
				intVar(&c.GradEpisodes, "grad-episodes", "episodes of the gradient-variance experiment"),
				intVar(&c.State, "state", "cell (1, 2 or 3) whose θ[→] gradient samples are collected")}
		}, corridor.RunPhase5)
}

func addA2CToy() {
	addCorridorToy(6, "a2c", "advantage actor-critic with GAE (식 (6.1)-(6.2))",
		corridor.DefaultPhase6, func(c *corridor.Phase6Config) []toyParam {
			return []toyParam{seedVar(&c.Seed),
				intVar(&c.Iterations, "iterations", "training iterations"),
				intVar(&c.EpisodesPerBatch, "episodes-per-batch", "episodes collected per iteration"),
				floatVar(&c.ActorLR, "actor-lr", "actor (policy) learning rate"),
				floatVar(&c.CriticLR, "critic-lr", "critic (V) learning rate"),
				floatVar(&c.Gamma, "gamma", "discount γ"),
				floatVar(&c.Lam, "lam", "GAE λ")}
		}, corridor.RunPhase6)
}

func addPPOToy() {
	addCorridorToy(7, "ppo", "PPO's clipped objective (식 (7.1)-(7.2)) with GAE",
		corridor.DefaultPhase7, func(c *corridor.Phase7Config) []toyParam {
			return []toyParam{seedVar(&c.Seed),
				intVar(&c.Iterations, "iterations", "training iterations"),
				intVar(&c.Episodes, "episodes", "episodes collected per iteration"),
				intVar(&c.Epochs, "epochs", "passes over each batch"),
				floatVar(&c.LR, "lr", "policy learning rate"),
				floatVar(&c.CriticLR, "critic-lr", "critic (V) learning rate"),
				floatVar(&c.Eps, "eps", "clip range ε"),
				floatVar(&c.Gamma, "gamma", "discount γ"),
				floatVar(&c.Lam, "lam", "GAE λ")}
		}, corridor.RunPhase7)
}
