package tinylm

import (
	"fmt"
	"math"
)

// PrefConfig is phase 10's train_dpo / train_kto settings.
type PrefConfig struct {
	Beta   float64 // β of 식 (10.3)/(10.4), 0.1
	Epochs int     // full-batch steps, 300
	LR     float64 // 1.0
}

// DefaultDPO returns the course's train_dpo defaults.
func DefaultDPO() PrefConfig { return PrefConfig{Beta: 0.1, Epochs: 300, LR: 1.0} }

// DefaultKTO returns the course's train_kto defaults.
func DefaultKTO() PrefConfig { return PrefConfig{Beta: 0.1, Epochs: 300, LR: 1.0} }

// Validate rejects non-positive values.
func (c PrefConfig) Validate() error {
	if c.Beta <= 0 || c.Epochs <= 0 || c.LR <= 0 {
		return fmt.Errorf("dpo/kto: beta, epochs and lr must be positive")
	}
	return nil
}

// logRatio is log π(y|x) − log π_ref(y|x).
func logRatio(lm, ref *TinyLM, x string, y []int) float64 {
	return SeqLogp(lm, x, y) - SeqLogp(ref, x, y)
}

// DPOLossAndCoef is 식 (10.3): L = −log σ(β·m) with the margin
//
//	m = [log π(y_w) − log π_ref(y_w)] − [log π(y_l) − log π_ref(y_l)],
//
// and coef = −∂L/∂m = β·σ(−β·m): the ascent direction is coef·(∇log π(y_w) − ∇log π(y_l)).
func DPOLossAndCoef(lm, ref *TinyLM, x string, yw, yl []int, beta float64) (loss, coef, m float64) {
	m = logRatio(lm, ref, x, yw) - logRatio(lm, ref, x, yl)
	return -math.Log(Sigmoid(beta * m)), beta * Sigmoid(-beta*m), m
}

// TrainDPO takes Epochs full-batch ascent steps on the mean DPO objective over prefs.
func TrainDPO(prefs []Preference, cfg PrefConfig) (lm, ref *TinyLM) {
	lm = New()
	ref = lm.Copy()
	n := float64(len(prefs))
	for range cfg.Epochs {
		grads := NewGrads()
		for _, p := range prefs {
			yw, yl := MustParse(p.Chosen), MustParse(p.Rejected)
			_, coef, _ := DPOLossAndCoef(lm, ref, p.Prompt, yw, yl, cfg.Beta)
			grads.AddSeq(lm, p.Prompt, yw, +coef/n) // the chosen response's probability ↑
			grads.AddSeq(lm, p.Prompt, yl, -coef/n) // the rejected one's ↓
		}
		lm.Apply(grads, cfg.LR)
	}
	return lm, ref
}

// KTOLabel is one unpaired judgement: Response is good (desirable) or bad for Prompt.
type KTOLabel struct {
	Prompt, Response string
	Good             bool
}

// KTOLabels is the course's KTO_LABELS.
var KTOLabels = []KTOLabel{
	{"3×4=", "12⏎", true}, {"3×4=", "7⏎", false}, {"3×4=", "1⏎", false},
	{"2×3=", "6⏎", true}, {"2×3=", "7⏎", false}, {"2×3=", "1⏎", false},
}

// KTOCoef is 식 (10.4)'s −∂L/∂r for one label, with r = log π(y)/π_ref(y) and the detached
// reference point z = max(0, KL(π‖π_ref)):
//
//	good: L = 1 − σ(β(r − z))    bad: L = 1 − σ(β(z − r))    −∂L/∂r = ±β·v(1 − v), v = σ(·).
func KTOCoef(r, z, beta float64, good bool) float64 {
	if good {
		v := Sigmoid(beta * (r - z))
		return beta * v * (1 - v)
	}
	v := Sigmoid(beta * (z - r))
	return -(beta * v * (1 - v))
}

// TrainKTO takes Epochs full-batch ascent steps on the mean KTO objective over labels; z is
// recomputed (exactly, over all responses) at the start of every step.
func TrainKTO(labels []KTOLabel, cfg PrefConfig) (lm, ref *TinyLM) {
	lm = New()
	ref = lm.Copy()
	n := float64(len(labels))
	for range cfg.Epochs {
		grads := NewGrads()
		z := map[string]float64{}
		for _, x := range Prompts {
			z[x] = math.Max(0.0, KL(lm, ref, x))
		}
		for _, l := range labels {
			y := MustParse(l.Response)
			coef := KTOCoef(logRatio(lm, ref, l.Prompt, y), z[l.Prompt], cfg.Beta, l.Good)
			grads.AddSeq(lm, l.Prompt, y, coef/n)
		}
		lm.Apply(grads, cfg.LR)
	}
	return lm, ref
}

// ImplicitRewardResponses are the responses of "3×4=" whose DPO implicit reward phase 10 prints.
var ImplicitRewardResponses = []string{"12⏎", "1⏎", "7⏎"}

// DPOResult is phase 10's DPO part (the golden's dpo, dpo_implicit_reward and dpo_logits).
type DPOResult struct {
	Results        PromptResults `json:"dpo"`
	ImplicitReward Scores        `json:"dpo_implicit_reward"` // β·log π/π_ref, keyed prompt+response
	Logits         Logits        `json:"dpo_logits"`
}

// KTOResult is phase 10's KTO part (the golden's kto and kto_logits).
type KTOResult struct {
	Results PromptResults `json:"kto"`
	Logits  Logits        `json:"kto_logits"`
}

// RunDPO trains DPO on Preferences and scores it, with the implicit rewards β·log π(y)/π_ref(y)
// of ImplicitRewardResponses for "3×4=".
func RunDPO(cfg PrefConfig) DPOResult {
	lm, ref := TrainDPO(Preferences, cfg)
	return NewDPOResult(cfg.Beta, lm, ref)
}

// NewDPOResult scores a DPO-trained model: Evaluate, then the implicit rewards
// β·log π(y)/π_ref(y) of ImplicitRewardResponses for "3×4=", then every row of lm.
func NewDPOResult(beta float64, lm, ref *TinyLM) DPOResult {
	res := DPOResult{Results: Evaluate(lm, ref)}
	x := Prompts[0]
	for _, y := range ImplicitRewardResponses {
		res.ImplicitReward = append(res.ImplicitReward,
			Score{x + y, beta * logRatio(lm, ref, x, MustParse(y))})
	}
	res.Logits = lm.Logits()
	return res
}

// RunKTO trains KTO on KTOLabels and scores it.
func RunKTO(cfg PrefConfig) KTOResult {
	lm, ref := TrainKTO(KTOLabels, cfg)
	return NewKTOResult(lm, ref)
}

// NewKTOResult scores a KTO-trained model.
func NewKTOResult(lm, ref *TinyLM) KTOResult {
	return KTOResult{Results: Evaluate(lm, ref), Logits: lm.Logits()}
}
