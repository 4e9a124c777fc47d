package gymrl

import "testing"

// The extras learn at reduced budgets (a few seconds each), seeds fixed, so the numbers are
// deterministic: measured 148.2 (DQN), 51.7 (PPO CartPole), −271.5 (PPO Acrobot) on simplego.
// The thresholds are well above what the untrained or random policies get (CartPole: about 10
// greedy, 22 random; Acrobot: −500 at the time limit).

func TestDQN_LearnsCartPoleAtReducedBudget(t *testing.T) {
	c := DefaultDQN()
	c.Seed, c.TotalSteps, c.LearningRate, c.LearningStarts, c.TrainFrequency = 1, 8000, 3e-3, 500, 4
	c.TargetNetworkFrequency, c.Hidden, c.BatchSize, c.ExplorationFraction, c.PrintEvery = 100, []int{32}, 64, 0.25, 500
	r, err := RunDQN(testBackend(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("DQN CartPole: mean return of the last 10 episodes %.1f", r.Final)
	if r.Final < 100 || r.Progress[0].MeanReturn > 30 {
		t.Errorf("mean return of the last 10 episodes %.1f (first progress %.1f), want >= 100 after 8000 steps\n%v",
			r.Final, r.Progress[0].MeanReturn, r.Lines)
	}
}

func TestPPO_LearnsCartPoleAtReducedBudget(t *testing.T) {
	c := DefaultPPO()
	c.Seed, c.Iterations, c.LearningRate, c.NumSteps, c.MinibatchSize, c.PrintEvery = 1, 8, 2e-3, 512, 128, 1
	r, err := RunPPO(testBackend(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PPO CartPole: mean return of the last 10 episodes %.1f", r.Final)
	if r.Final < 45 || r.Progress[0].MeanReturn > 30 {
		t.Errorf("mean return of the last 10 episodes %.1f (iteration 0: %.1f), want >= 45 after 8 iterations\n%v",
			r.Final, r.Progress[0].MeanReturn, r.Lines)
	}
}

func TestPPO_LearnsAcrobotAtReducedBudget(t *testing.T) {
	c := DefaultPPO()
	c.Env, c.Seed, c.Iterations, c.LearningRate, c.NumSteps, c.MinibatchSize, c.PrintEvery = "Acrobot-v1", 1, 6, 2e-3, 512, 128, 1
	r, err := RunPPO(testBackend(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PPO Acrobot: mean return of the last 10 episodes %.1f", r.Final)
	if r.Final < -350 || r.Progress[0].MeanReturn > -400 {
		t.Errorf("mean return of the last 10 episodes %.1f (iteration 0: %.1f), want >= -350 after 6 iterations\n%v",
			r.Final, r.Progress[0].MeanReturn, r.Lines)
	}
}
