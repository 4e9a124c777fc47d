package bench

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// PrintSummary writes a report as text (summary.txt): stages, log-prob checks, throughput side by
// side, the sampler and parity checks, the trainers' last metrics and the verdict.
func PrintSummary(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "gpu-check %s", rep.Date)
	keys := make([]string, 0, len(rep.Info))
	for k := range rep.Info {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "\n  %s: %s", k, rep.Info[k])
	}
	fmt.Fprintln(w)
	printStages(w, rep)
	printBackend(w, rep.Stages)
	printLogProbs(w, rep)
	printThroughput(w, rep)
	printSample(w, rep.Stages)
	if c := rep.Parity; c != nil {
		verdict := "pass"
		if !c.Pass {
			verdict = "FAIL"
		}
		if c.Error != "" {
			verdict += " (" + c.Error + ")"
		}
		fmt.Fprintf(w, "training parity (tiny fixture, float32, %d AdamW steps, posttrain vs torch.optim.AdamW): max relative Δ loss %.3g, Δ grad norm %.3g, tolerance %.3g: %s\n",
			c.Steps, c.MaxRelLoss, c.MaxRelGradNorm, c.Tolerance, verdict)
	}
	printTrainers(w, rep.Stages, rep.Info)
	if rep.OK {
		fmt.Fprintln(w, "result: ok")
	} else {
		fmt.Fprintf(w, "result: NOT ok (failed: %s)\n", strings.Join(rep.Failed, ", "))
	}
}

func printStages(w io.Writer, rep *Report) {
	fmt.Fprintln(w, "stages (wall time; for posttrain stages also the part spent compiling graphs, and the rest):")
	for _, s := range rep.Stages {
		note := ""
		if s.Note != "" {
			note = " — " + s.Note
		}
		split := ""
		if s.CompileS != nil && s.Status != "skipped" {
			graphs := 0
			if s.Graphs != nil {
				graphs = *s.Graphs
			}
			split = fmt.Sprintf("  compile %6.1fs (%3d graphs), run %6.1fs", *s.CompileS, graphs, max(s.Seconds-*s.CompileS, 0))
		}
		fmt.Fprintf(w, "  %-18s %-8s %7.1fs%s%s\n", s.Name, s.Status, s.Seconds, split, note)
	}
	if rep.Stopped != "" {
		fmt.Fprintf(w, "stopped after the first stages, nothing else ran: %s\n", rep.Stopped)
	}
	printBudget(w, rep)
}

// printBudget totals the stages: the graphs the posttrain stages compiled and the time it took
// (the compile rate this machine showed), and the whole run's time against its budget.
func printBudget(w io.Writer, rep *Report) {
	var total, compile float64
	graphs, compiling := 0, 0
	for _, s := range rep.Stages {
		total += s.Seconds
		if s.CompileS != nil && s.Status != "skipped" {
			compile += *s.CompileS
			compiling++
			if s.Graphs != nil {
				graphs += *s.Graphs
			}
		}
	}
	if compiling > 0 {
		rate := ""
		if graphs > 0 {
			rate = fmt.Sprintf(", %.1fs per graph", compile/float64(graphs))
		}
		fmt.Fprintf(w, "compiling: %d graphs in %.1fs over %d posttrain stages%s; %.1fs of the stages' %.1fs\n", graphs, compile, compiling, rate, compile, total)
	}
	if b, err := strconv.ParseFloat(rep.Info["budget_s"], 64); err == nil && b > 0 {
		fmt.Fprintf(w, "budget: the stages took %.1fs of %.0fs (%.0f%%)\n", total, b, 100*total/b)
	}
}

func printLogProbs(w io.Writer, rep *Report) {
	if len(rep.LogProbs) == 0 {
		return
	}
	fmt.Fprintln(w, "log-probs (posttrain vs transformers AutoModelForCausalLM on the same checkpoint and device; probe: vs the fixture's float64 reference):")
	for _, dt := range []string{ProbeCheck, "float32", "bfloat16"} {
		c := rep.LogProbs[dt]
		if c == nil {
			continue
		}
		verdict := "pass"
		if !c.Pass {
			verdict = "FAIL"
		}
		errNote := ""
		if c.Error != "" {
			errNote = " (" + c.Error + ")"
		}
		fmt.Fprintf(w, "  %s: max |Δ| %.3g, mean |Δ| %.3g over %d tokens, loss %.6f vs %.6f, tolerance %.3g: %s%s\n",
			dt, c.MaxAbsDiff, c.MeanAbsDiff, c.Tokens, c.LossGo, c.LossRef, c.Tolerance, verdict, errNote)
	}
}

func printThroughput(w io.Writer, rep *Report) {
	if len(rep.Throughput) == 0 {
		return
	}
	fmt.Fprintln(w, "throughput (posttrain | pytorch+transformers | posttrain/pytorch speed):")
	for _, r := range rep.Throughput {
		format := "%.1f"
		if r.Metric == "seconds" {
			format = "%.3f"
		}
		mfu := ""
		if r.PosttrainMFU != nil || r.PyTorchMFU != nil {
			mfu = fmt.Sprintf("  MFU %s | %s", fmtNum(scale(r.PosttrainMFU, 100), "%.1f%%"), fmtNum(scale(r.PyTorchMFU, 100), "%.1f%%"))
		}
		fmt.Fprintf(w, "  %-34s %12s | %12s %-9s | %s%s\n", r.Workload, fmtNum(r.Posttrain, format), fmtNum(r.PyTorch, format),
			r.Metric, fmtNum(r.Ratio, "%.2f×"), mfu)
	}
}

func fmtNum(p *float64, format string) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf(format, *p)
}

func scale(p *float64, k float64) *float64 {
	if p == nil {
		return nil
	}
	x := *p * k
	return &x
}

// trainerKeys are the metrics shown for the trainer stages (their last metrics.jsonl line).
var trainerKeys = []string{"step", "loss", "grad_norm", "num_tokens", "timing_s/generation", "timing_s/update",
	"tokens_per_s/generation", "tokens_per_s/update", "reward"}

// printTrainers prints the last metrics line of each trainer_* stage that has them.
func printTrainers(w io.Writer, stages []Stage, info map[string]string) {
	header := false
	for i := range stages {
		s := &stages[i]
		if !strings.HasPrefix(s.Name, "trainer_") {
			continue
		}
		tm := decodeResult[trainerMetrics](s)
		if tm == nil || len(tm.Metrics) == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(w, "trainers (posttrain sft/grpo, last metrics line; stage time includes loading, compilation and saving):")
			header = true
		}
		last := tm.Metrics[len(tm.Metrics)-1]
		var parts []string
		for _, k := range trainerKeys {
			switch v := last[k].(type) {
			case float64:
				parts = append(parts, fmt.Sprintf("%s %.4g", k, v))
			case string:
				parts = append(parts, k+" "+v)
			}
		}
		speeds := trainerSpeeds(s, last)
		if _, logged := last["tokens_per_s/update"]; !logged {
			for _, sp := range speeds {
				parts = append(parts, fmt.Sprintf("%s %.4g", sp.name, sp.v))
			}
		}
		fmt.Fprintf(w, "  %-18s %6.1fs  %s\n", s.Name, s.Seconds, strings.Join(parts, ", "))
		if n := dataParallelDevices(info); strings.HasSuffix(s.Name, "_dp") && n > 1 && len(speeds) > 0 {
			per := make([]string, len(speeds))
			for i, sp := range speeds {
				per[i] = fmt.Sprintf("%s %.4g", sp.name, sp.v/float64(n))
			}
			fmt.Fprintf(w, "  %-18s         per device (%d devices): %s\n", "", n, strings.Join(per, ", "))
		}
	}
}

// speed is one throughput figure of a trainer stage.
type speed struct {
	name string
	v    float64
}

// trainerSpeeds are a trainer stage's speeds: GRPO's logged tokens_per_s, or, for SFT, which
// logs none, its tokens over the stage's time less compilation (loading and saving included).
func trainerSpeeds(s *Stage, last map[string]any) []speed {
	var out []speed
	for _, k := range []string{"tokens_per_s/generation", "tokens_per_s/update"} {
		if v, ok := last[k].(float64); ok {
			out = append(out, speed{k, v})
		}
	}
	if tok, ok := last["num_tokens"].(float64); ok && len(out) == 0 && s.CompileS != nil && s.Seconds > *s.CompileS {
		out = append(out, speed{"num_tokens / (stage − compile s)", tok / (s.Seconds - *s.CompileS)})
	}
	return out
}

// dataParallelDevices is the report's data_parallel_devices (the devices the *_dp trainer stages
// split their batches over), 0 when absent.
func dataParallelDevices(info map[string]string) int {
	n, err := strconv.Atoi(info["data_parallel_devices"])
	if err != nil {
		return 0
	}
	return n
}

// printBackend prints the backend stage's plugin, versions and the adaptations the plugin needed
// (backend.Adaptations).
func printBackend(w io.Writer, stages []Stage) {
	for i := range stages {
		if stages[i].Name != "backend" {
			continue
		}
		r := decodeResult[BackendResult](&stages[i])
		if r == nil || r.PluginPath == "" {
			continue
		}
		fmt.Fprintf(w, "backend: %s: plugin %s, PJRT C API %s (client %s), XLA %s, StableHLO %s (accepts from %s); devices %s\n",
			r.Backend, r.PluginPath, r.PluginAPI, r.ClientAPI, orDash(r.XLAVersion), orDash(r.StableHLO), orDash(r.StableHLOMin), strings.Join(r.Devices, ", "))
		for _, a := range r.Adaptations {
			fmt.Fprintf(w, "  adaptation: %s\n", a)
		}
	}
}

// printSample prints the sample stage's comparison of drawn tokens with the reference backend.
func printSample(w io.Writer, stages []Stage) {
	for i := range stages {
		if stages[i].Name != "sample" {
			continue
		}
		r := decodeResult[SampleResult](&stages[i])
		if r == nil {
			continue
		}
		fmt.Fprintf(w, "sampler (tiny fixture, every variant, vs %s): %d of %d tokens equal, max |Δ log-prob| %.3g\n",
			r.Reference, r.TokensEqual, r.Tokens, r.MaxLogProbDiff)
	}
}
