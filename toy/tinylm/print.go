package tinylm

import (
	"fmt"
	"io"
	"strings"

	"github.com/posttrain/posttrain/internal/pyfmt"
)

// The Print functions write the course's lines for a result, byte for byte, so the GoMLX
// trainers print through the same code as this oracle. Numbers are formatted as CPython does
// (round then repr, or fixed point).

// pyDict is repr({k: round(v, n) ...}) in order.
func pyDict(s Scores, n int) string {
	parts := make([]string, len(s))
	for i, e := range s {
		parts[i] = pyfmt.Str(e.Key) + ": " + pyfmt.RoundRepr(e.Value, n)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func f3(x float64) string { return pyfmt.Fixed(x, 3, false) }

// PrintReinforceKL writes one β line of phase 8.
func PrintReinforceKL(w io.Writer, r ReinforceKLResult) {
	fmt.Fprintf(w, "β=%s: P(정답) = %s  KL(π‖π_ref) = %s\n", pyfmt.Repr(r.Beta), pyDict(r.PCorrect, 3), pyDict(r.KL, 3))
}

// PrintKLOptimum writes phase 8's line of the optimum P(answer) at β (식 (8.5)).
func PrintKLOptimum(w io.Writer, beta float64, optimum Scores) {
	fmt.Fprintf(w, "β=%s의 이론적 최적 P(정답) = %s\n", pyfmt.Repr(beta), pyDict(optimum, 3))
}

// PrintPhase8 writes phase 8's result lines (after the hand check).
func PrintPhase8(w io.Writer, res Phase8Result) {
	for _, r := range res.Runs {
		PrintReinforceKL(w, r)
	}
	PrintKLOptimum(w, res.OptimumBeta, res.OptimumPCorrect)
}

// PrintRewardModel writes phase 9's reward-model line (scores sorted as given, round 2).
func PrintRewardModel(w io.Writer, sorted Scores) {
	fmt.Fprintf(w, "보상 모델 점수: %s\n", pyDict(sorted, 2))
}

// PrintRLHF writes phase 9's result lines: the reward model, then one line per prompt.
func PrintRLHF(w io.Writer, res Phase9Result) {
	PrintRewardModel(w, res.RewardModel)
	for _, r := range res.Results {
		opt := 0.0
		if r.Optimum != nil {
			opt = *r.Optimum
		}
		fmt.Fprintf(w, "%s  P(정답): %s → %s  (이론적 최적 %s)   KL(π‖π_ref) = %s\n",
			r.Prompt, f3(r.PRef), f3(r.PCorrect), f3(opt), f3(r.KL))
	}
}

// printPrefResults writes phase 10's per-prompt lines.
func printPrefResults(w io.Writer, rs PromptResults) {
	for _, r := range rs {
		fmt.Fprintf(w, "  %s  P(정답) %s → %s   KL = %s\n", r.Prompt, f3(r.PRef), f3(r.PCorrect), f3(r.KL))
	}
}

// PrintDPO writes phase 10's DPO lines (what `toy dpo` prints).
func PrintDPO(w io.Writer, res DPOResult) {
	fmt.Fprintln(w, "DPO 뒤:")
	printPrefResults(w, res.Results)
	fmt.Fprintf(w, "  암묵적 보상 β·log π/π_ref: %s\n", pyDict(res.ImplicitReward, 3))
}

// PrintKTO writes phase 10's KTO lines (what `toy kto` prints).
func PrintKTO(w io.Writer, res KTOResult) {
	fmt.Fprintln(w, "KTO 뒤:")
	printPrefResults(w, res.Results)
}

// PrintGRPO writes phase 11's result lines, one per prompt.
func PrintGRPO(w io.Writer, res Phase11Result) {
	for _, r := range res.Results {
		fmt.Fprintf(w, "%s  P(정답) %s → %s   KL(π‖π_ref) = %s\n", r.Prompt, f3(r.PRef), f3(r.PCorrect), f3(r.KL))
	}
}

// PrintVariants writes phase 12's comparison: a header naming the iterations, one line per variant.
func PrintVariants(w io.Writer, res Phase12Result) {
	fmt.Fprintf(w, "같은 seed, %d회 반복 뒤 (장난감 문제라 순위는 의미가 없다):\n", res.Iterations)
	for _, v := range res.Variants {
		PrintVariant(w, v)
	}
}

// PrintVariant writes one variant's line of phase 12.
func PrintVariant(w io.Writer, v VariantResult) {
	fmt.Fprintf(w, "  %-8s 평균 P(정답) %s   평균 KL %s\n", v.Name, f3(v.MeanPCorrect), f3(v.MeanKL))
}
