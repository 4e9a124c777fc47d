package tinylm

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/posttrain/posttrain/internal/pyfmt"
	"github.com/posttrain/posttrain/trainers/engine/rl"
)

// The HandCheck functions run each phase's hand_check: they verify the course's asserts
// (returning an error naming the first that fails) and print its lines. The PhaseN functions
// print a whole phase as the course's script does: hand check, then the experiments.

func assert(ok bool, what string) error {
	if !ok {
		return errors.New("tinylm hand check failed: " + what)
	}
	return nil
}

func close12(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

// closeAll is the course's close(): every pair within 1e-3.
func closeAll(xs, ys []float64) bool {
	for i := range xs {
		if !(math.Abs(xs[i]-ys[i]) < 1e-3) {
			return false
		}
	}
	return len(xs) == len(ys)
}

// HandCheck8 is phase 8's hand_check: log π(12⏎ | 3×4=) term by term (식 (8.1)-(8.2)), then one
// sequence-REINFORCE step on the correct answer (식 (8.3)).
func HandCheck8(w io.Writer) error {
	lm := New()
	x, y := "3×4=", MustParse("12⏎")
	logps := lm.TokenLogps(x, y)
	err := errors.Join(
		assert(close12(logps[0], math.Log(0.4)) && close12(logps[1], math.Log(0.5)) &&
			close12(logps[2], math.Log(0.8)), "log π(12⏎) terms = log [0.4, 0.5, 0.8]"),
		assert(close12(math.Exp(sum(logps)), 0.16), "π(12⏎ | 3×4=) = 0.16"),
		assert(close12(PCorrect(lm, "3×4="), 0.16) && close12(PCorrect(lm, "2×3="), 0.24), "p_correct = 0.16, 0.24"))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "log π(12⏎ | 3×4=) = %s 합 %s\n", pyfmt.RoundList(logps, 4), pyfmt.RoundRepr(sum(logps), 4))
	grads := NewGrads()
	grads.AddSeq(lm, x, y, 1.0*Verify(x, y))
	lm.Apply(grads, 1.0)
	p0 := lm.Dist(x, nil)[tokenIndex("1")]
	fmt.Fprintf(w, "한 번 갱신 뒤: π(1|3×4=) 0.400 → %s, P(12⏎) 0.160 → %s\n",
		pyfmt.Fixed(p0, 4, false), pyfmt.Fixed(PCorrect(lm, x), 4, false))
	return assert(p0 > 0.4 && PCorrect(lm, x) > 0.16, "one step raises π(1) and P(12⏎)")
}

// Phase8 prints all of phase 8.
func Phase8(w io.Writer) error {
	if err := HandCheck8(w); err != nil {
		return err
	}
	PrintPhase8(w, RunPhase8())
	return nil
}

// HandCheck9 is phase 9's hand_check: one Bradley–Terry step from zero scores moves them ±0.5.
func HandCheck9(w io.Writer) error {
	e := TrainRewardModel(Preferences[:1], 1, 1.0).Entries()
	want := []RMScore{{"3×4=", "12⏎", 0.5}, {"3×4=", "7⏎", -0.5}}
	err := errors.Join(
		assert(len(e) == 2 && e[0] == want[0] && e[1] == want[1], "one step: r(12⏎) = 0.5, r(7⏎) = −0.5"),
		assert(close12(-math.Log(Sigmoid(0)), math.Log(2)), "first loss = log 2"))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "첫 비교 한 걸음: r(12⏎) = +0.5, r(7⏎) = −0.5, 선호 확률 σ(1) = %s\n",
		pyfmt.RoundRepr(Sigmoid(1.0), 4))
	return nil
}

// Phase9 prints all of phase 9.
func Phase9(w io.Writer) error {
	if err := HandCheck9(w); err != nil {
		return err
	}
	PrintRLHF(w, RunRLHF(DefaultRLHF()))
	return nil
}

// HandCheck10 is phase 10's hand_check: at π = π_ref the DPO margin is 0, the loss log 2 and the
// gradient coefficient β·σ(0) = 0.05.
func HandCheck10(w io.Writer) error {
	lm := New()
	ref := lm.Copy()
	loss, coef, m := DPOLossAndCoef(lm, ref, "3×4=", MustParse("12⏎"), MustParse("7⏎"), 0.1)
	if err := assert(m == 0.0 && close12(loss, math.Log(2)) && close12(coef, 0.05),
		"DPO at π_ref: m = 0, loss = log 2, coef = 0.05"); err != nil {
		return err
	}
	fmt.Fprintf(w, "처음: m = 0, DPO loss = log 2 = %s, gradient 계수 β·σ(0) = %s\n",
		pyfmt.Fixed(loss, 4, false), pyfmt.Repr(coef))
	return nil
}

// Phase10 prints all of phase 10: hand check, DPO, KTO.
func Phase10(w io.Writer) error {
	if err := HandCheck10(w); err != nil {
		return err
	}
	PrintDPO(w, RunDPO(DefaultDPO()))
	PrintKTO(w, RunKTO(DefaultKTO()))
	return nil
}

// HandCheck11 is phase 11's hand_check: group advantages (식 (11.1)) and the verifier's rewards.
func HandCheck11(w io.Writer) error {
	a1001 := rl.GroupAdvantagesStd([]float64{1, 0, 0, 1}, rl.AdvEps)
	a1111 := rl.GroupAdvantagesStd([]float64{1, 1, 1, 1}, rl.AdvEps)
	a1000 := rl.GroupAdvantagesStd([]float64{1, 0, 0, 0}, rl.AdvEps)
	err := errors.Join(
		assert(closeAll(a1001, []float64{1, -1, -1, 1}), "A([1,0,0,1]) ≈ [1,−1,−1,1]"),
		assert(a1111[0] == 0 && a1111[1] == 0 && a1111[2] == 0 && a1111[3] == 0, "A([1,1,1,1]) = 0"),
		assert(closeAll(a1000, []float64{1.732, -0.577, -0.577, -0.577}), "A([1,0,0,0])"))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "A([1,0,0,1]) = %s | A([1,0,0,0]) = %s\n", pyfmt.RoundList(a1001, 3), pyfmt.RoundList(a1000, 3))
	ys := [][]int{MustParse("12⏎"), MustParse("7⏎"), MustParse("1⏎"), MustParse("12⏎")}
	shown := make([]string, len(ys))
	rs := make([]float64, len(ys))
	for i, y := range ys {
		shown[i], rs[i] = Show(y), Verify("3×4=", y)
	}
	if err := assert(rs[0] == 1 && rs[1] == 0 && rs[2] == 0 && rs[3] == 1, "rewards [1,0,0,1]"); err != nil {
		return err
	}
	fmt.Fprintf(w, "그룹: %s 보상: %s\n", pyfmt.StrList(shown), pyfmt.List(rs))
	return nil
}

// Phase11 prints all of phase 11.
func Phase11(w io.Writer) error {
	if err := HandCheck11(w); err != nil {
		return err
	}
	PrintGRPO(w, RunGRPO(DefaultGRPO()))
	return nil
}

// HandCheck12 is phase 12's hand_check: per-token weights of each variant, DAPO's clip-higher and
// GSPO's sequence ratio.
func HandCheck12(w io.Writer) error {
	rewards, lengths := []float64{1, 0, 0, 1}, []int{3, 2, 2, 3} // 12⏎, 7⏎, 1⏎, 12⏎
	aStd := rl.GroupAdvantagesStd(rewards, rl.AdvEps)
	aMean := rl.GroupAdvantagesMean(rewards)
	aRLOO := rl.GroupAdvantagesRLOO(rewards)
	table := []struct {
		name string
		w    []float64
	}{
		{"GRPO (std, 응답별 평균)", TokenWeights(aStd, lengths, AggSeqMean)},
		{"DAPO (std, 전체 토큰 평균)", TokenWeights(aStd, lengths, AggTokenMean)},
		{"Dr. GRPO (평균만, 상수 분모)", TokenWeights(aMean, lengths, AggConst)},
		{"RLOO (나 뺀 평균, 응답별 평균)", TokenWeights(aRLOO, lengths, AggSeqMean)},
	}
	_, clipCoef := rl.PPOClipTerm(1.25, 1.0, 0.2)
	logr := []float64{0.10, -0.05, 0.02}
	s := math.Exp(sum(logr) / float64(len(logr)))
	err := errors.Join(
		assert(closeAll(aMean, []float64{0.5, -0.5, -0.5, 0.5}), "mean advantages"),
		assert(closeAll(aRLOO, []float64{0.667, -0.667, -0.667, 0.667}), "rloo advantages"),
		assert(closeAll(table[0].w, []float64{0.0833, -0.125, -0.125, 0.0833}), "GRPO weights"),
		assert(closeAll(table[1].w, []float64{0.1, -0.1, -0.1, 0.1}), "DAPO weights"),
		assert(closeAll(table[2].w, []float64{0.0417, -0.0417, -0.0417, 0.0417}), "Dr. GRPO weights"),
		assert(clipCoef == 0.0, "ratio 1.25 with ε = 0.2 is clipped"),
		assert(1.25 < 1+0.28, "ratio 1.25 under DAPO's 1.28 still learns"),
		assert(math.Abs(s-1.02360) < 1e-4, "GSPO ratio = 1.0236"))
	if err != nil {
		return err
	}
	for _, row := range table {
		fmt.Fprintf(w, "%-22s 토큰당 가중치 %s\n", row.name, pyfmt.RoundList(row.w, 4))
	}
	tok := make([]float64, len(logr))
	for i, l := range logr {
		tok[i] = math.Exp(l)
	}
	fmt.Fprintf(w, "GSPO 응답 ratio = %s | 토큰 ratio = %s\n", pyfmt.RoundRepr(s, 4), pyfmt.RoundList(tok, 4))
	return nil
}

// Phase12 prints all of phase 12.
func Phase12(w io.Writer) error {
	if err := HandCheck12(w); err != nil {
		return err
	}
	PrintVariants(w, RunPhase12())
	return nil
}
