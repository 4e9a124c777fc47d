package main

// Corridor phases 4-7 (`posttrain toy dqn|reinforce|a2c|ppo`); plumbing in toy_corridor.go.

import (
	"github.com/posttrain/posttrain/toy/corridor"
	"github.com/urfave/cli/v3"
)

func init() {
	addDQNToy()
	addReinforceToy()
	addA2CToy()
	addPPOToy()
}

func addDQNToy() {
	d4 := corridor.DefaultPhase4()
	addCorridorToy(4, "dqn", "DQN: an MLP Q-network with hand-written backprop, replay buffer and target network (식 (4.1)-(4.3))", []cli.Flag{
		intFlag("steps", d4.Steps, "environment steps"),
		intFlag("batch-size", d4.BatchSize, "transitions per SGD step (rng.sample from the buffer)"),
		floatFlag("lr", d4.LR, "SGD learning rate"),
		floatFlag("gamma", d4.Gamma, "discount γ (also of Q*)"),
		intFlag("buffer-size", d4.BufferSize, "replay buffer capacity (oldest entries fall off)"),
		intFlag("learning-starts", d4.LearningStarts, "first step that trains"),
		intFlag("target-every", d4.TargetEvery, "copy the online network to the target every N steps"),
		intFlag("hidden", d4.Hidden, "hidden units of the MLP"),
	}, func(cmd *cli.Command) (corridor.Result, corridor.Object, error) {
		return runCorridor(cmd, corridor.Phase4Config{Seed: cmd.Int64("seed"), Steps: cmd.Int("steps"),
			BatchSize: cmd.Int("batch-size"), LR: cmd.Float("lr"), Gamma: cmd.Float("gamma"),
			BufferSize: cmd.Int("buffer-size"), LearningStarts: cmd.Int("learning-starts"),
			TargetEvery: cmd.Int("target-every"), Hidden: cmd.Int("hidden")}, corridor.RunPhase4)
	}, func() (corridor.Result, error) { return corridor.RunPhase4(d4) })
}

func addReinforceToy() {
	d5 := corridor.DefaultPhase5()
	addCorridorToy(5, "reinforce", "REINFORCE with and without a baseline (식 (5.2)-(5.4))", []cli.Flag{
		intFlag("episodes", d5.Episodes, "REINFORCE training episodes"),
		floatFlag("alpha", d5.Alpha, "step size α"),
		intFlag("grad-episodes", d5.GradEpisodes, "episodes of the gradient-variance experiment"),
		intFlag("state", d5.State, "cell (1, 2 or 3) whose θ[→] gradient samples are collected"),
	}, func(cmd *cli.Command) (corridor.Result, corridor.Object, error) {
		return runCorridor(cmd, corridor.Phase5Config{Seed: cmd.Int64("seed"), Episodes: cmd.Int("episodes"),
			Alpha: cmd.Float("alpha"), GradEpisodes: cmd.Int("grad-episodes"), State: cmd.Int("state")},
			corridor.RunPhase5)
	}, func() (corridor.Result, error) { return corridor.RunPhase5(d5) })
}

func addA2CToy() {
	d6 := corridor.DefaultPhase6()
	addCorridorToy(6, "a2c", "advantage actor-critic with GAE (식 (6.1)-(6.2))", []cli.Flag{
		intFlag("iterations", d6.Iterations, "training iterations"),
		intFlag("episodes-per-batch", d6.EpisodesPerBatch, "episodes collected per iteration"),
		floatFlag("actor-lr", d6.ActorLR, "actor (policy) learning rate"),
		floatFlag("critic-lr", d6.CriticLR, "critic (V) learning rate"),
		floatFlag("gamma", d6.Gamma, "discount γ"),
		floatFlag("lam", d6.Lam, "GAE λ"),
	}, func(cmd *cli.Command) (corridor.Result, corridor.Object, error) {
		return runCorridor(cmd, corridor.Phase6Config{Seed: cmd.Int64("seed"), Iterations: cmd.Int("iterations"),
			EpisodesPerBatch: cmd.Int("episodes-per-batch"), ActorLR: cmd.Float("actor-lr"),
			CriticLR: cmd.Float("critic-lr"), Gamma: cmd.Float("gamma"), Lam: cmd.Float("lam")}, corridor.RunPhase6)
	}, func() (corridor.Result, error) { return corridor.RunPhase6(d6) })
}

func addPPOToy() {
	d7 := corridor.DefaultPhase7()
	addCorridorToy(7, "ppo", "PPO's clipped objective (식 (7.1)-(7.2)) with GAE", []cli.Flag{
		intFlag("iterations", d7.Iterations, "training iterations"),
		intFlag("episodes", d7.Episodes, "episodes collected per iteration"),
		intFlag("epochs", d7.Epochs, "passes over each batch"),
		floatFlag("lr", d7.LR, "policy learning rate"),
		floatFlag("critic-lr", d7.CriticLR, "critic (V) learning rate"),
		floatFlag("eps", d7.Eps, "clip range ε"),
		floatFlag("gamma", d7.Gamma, "discount γ"),
		floatFlag("lam", d7.Lam, "GAE λ"),
	}, func(cmd *cli.Command) (corridor.Result, corridor.Object, error) {
		return runCorridor(cmd, corridor.Phase7Config{Seed: cmd.Int64("seed"), Iterations: cmd.Int("iterations"),
			Episodes: cmd.Int("episodes"), Epochs: cmd.Int("epochs"), LR: cmd.Float("lr"),
			CriticLR: cmd.Float("critic-lr"), Eps: cmd.Float("eps"), Gamma: cmd.Float("gamma"), Lam: cmd.Float("lam")},
			corridor.RunPhase7)
	}, func() (corridor.Result, error) { return corridor.RunPhase7(d7) })
}
