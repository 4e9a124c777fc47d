package tinylm

import (
	"fmt"
	"math"

	"github.com/posttrain/posttrain/internal/pyrand"
)

// ReinforceKLConfig is phase 8's train_reinforce_kl: sequence REINFORCE on R − β·log π/π_ref.
type ReinforceKLConfig struct {
	Beta       float64 // KL coefficient β of 식 (8.4)
	Iterations int     // 150
	Group      int     // samples per prompt per iteration, 16
	LR         float64 // 0.5
	Seed       int64   // 0
}

// DefaultReinforceKL returns the course's defaults for a given β (the course runs β = 0 and 0.5).
func DefaultReinforceKL(beta float64) ReinforceKLConfig {
	return ReinforceKLConfig{Beta: beta, Iterations: 150, Group: 16, LR: 0.5, Seed: 0}
}

// Validate rejects non-positive sizes and learning rates and a negative β.
func (c ReinforceKLConfig) Validate() error {
	if c.Iterations <= 0 || c.Group <= 0 || c.LR <= 0 {
		return fmt.Errorf("reinforce-kl: %w", errPositive)
	}
	if c.Beta < 0 {
		return fmt.Errorf("reinforce-kl: beta %v must be >= 0", c.Beta)
	}
	return nil
}

// ReinforceKLResult is one β run of phase 8 (the golden's runs[i]).
type ReinforceKLResult struct {
	Beta        float64  `json:"beta"`
	PCorrect    Scores   `json:"p_correct"`
	KL          Scores   `json:"kl"`
	Logits      Logits   `json:"logits"`
	SamplesHead []Sample `json:"samples_head"`
}

// TrainReinforceKL maximises the sequence reward R(x,y) − β·log π(y|x)/π_ref(y|x) (식 (8.4)) by
// REINFORCE with the group mean as baseline:
//
//	grad += (score_i − mean(score)) / (group·|prompts|) · ∇ log π(y_i|x)    (식 (8.3))
//
// It returns the trained model, the frozen reference and the first TraceLen samples.
func TrainReinforceKL(cfg ReinforceKLConfig) (lm, ref *TinyLM, head []Sample) {
	rng := pyrand.New(cfg.Seed)
	lm = New()
	ref = lm.Copy()
	var tr tracer
	for range cfg.Iterations {
		grads := NewGrads()
		for _, x := range Prompts {
			samples := make([][]int, cfg.Group)
			scores := make([]float64, cfg.Group)
			for i := range samples {
				samples[i] = lm.Sample(x, rng)
				tr.record(x, samples[i])
			}
			for i, y := range samples {
				logRatio := sum(lm.TokenLogps(x, y)) - sum(ref.TokenLogps(x, y))
				scores[i] = Verify(x, y) - float64(cfg.Beta*logRatio)
			}
			baseline := sum(scores) / float64(len(scores))
			for i, y := range samples {
				grads.AddSeq(lm, x, y, (scores[i]-baseline)/float64(cfg.Group*len(Prompts)))
			}
		}
		lm.Apply(grads, cfg.LR)
	}
	return lm, ref, tr.head
}

// RunReinforceKL trains with cfg and scores the result.
func RunReinforceKL(cfg ReinforceKLConfig) ReinforceKLResult {
	lm, ref, head := TrainReinforceKL(cfg)
	return NewReinforceKLResult(cfg.Beta, lm, ref, head)
}

// NewReinforceKLResult scores a model trained with β: P(answer) for every prompt, then the KL,
// then every row of lm (the ones the scoring created last).
func NewReinforceKLResult(beta float64, lm, ref *TinyLM, head []Sample) ReinforceKLResult {
	res := ReinforceKLResult{Beta: beta, SamplesHead: head}
	for _, x := range Prompts {
		res.PCorrect = append(res.PCorrect, Score{x, PCorrect(lm, x)})
	}
	for _, x := range Prompts {
		res.KL = append(res.KL, Score{x, KL(lm, ref, x)})
	}
	res.Logits = lm.Logits()
	return res
}

// KLOptimalPCorrect is 식 (8.5): the maximiser of E[R] − β·KL is π*(y) ∝ π_ref(y)·exp(R(y)/β), so
// with a 0/1 reward P*(answer) = p_ref·e^(1/β) / (p_ref·e^(1/β) + 1 − p_ref).
func KLOptimalPCorrect(prompt string, beta float64) float64 {
	pRef := PCorrect(New(), prompt)
	w := pRef * math.Exp(1/beta)
	return w / (w + 1 - pRef)
}

// Phase8Result is everything phase 8 computes at the course's defaults (the golden's keys).
type Phase8Result struct {
	Runs            []ReinforceKLResult `json:"runs"`
	OptimumBeta     float64             `json:"-"`
	OptimumPCorrect Scores              `json:"optimum_p_correct"`
}

// Phase8Betas are the β values phase 8 trains with; Phase8OptimumBeta the one it compares to 식 (8.5).
var (
	Phase8Betas       = []float64{0.0, 0.5}
	Phase8OptimumBeta = 0.5
)

// RunPhase8 runs train_reinforce_kl for each of Phase8Betas and the β = 0.5 optimum.
func RunPhase8() Phase8Result {
	res := Phase8Result{OptimumBeta: Phase8OptimumBeta}
	for _, b := range Phase8Betas {
		res.Runs = append(res.Runs, RunReinforceKL(DefaultReinforceKL(b)))
	}
	res.OptimumPCorrect = KLOptimum(Phase8OptimumBeta)
	return res
}

// KLOptimum returns KLOptimalPCorrect for every prompt.
func KLOptimum(beta float64) Scores {
	var s Scores
	for _, x := range Prompts {
		s = append(s, Score{x, KLOptimalPCorrect(x, beta)})
	}
	return s
}
