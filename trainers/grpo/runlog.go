package grpo

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"time"

	"github.com/posttrain/posttrain/internal/runlog"
)

// GuardThreshold and GuardLogs define the silent-zero-gradient guard rail: a warning when
// frac_reward_zero_std or completions/clipped_ratio is ≥ GuardThreshold for GuardLogs logging
// steps in a row (TRL #5697: 97-99% of completions truncated, reward = loss = gradient = 0;
// TRL #3857: frac_reward_zero_std 1.0 and loss 0).
const (
	GuardThreshold = 0.9
	GuardLogs      = 3
)

// maxLoggedCompletions bounds the completions written to completions.jsonl per logging step;
// numCompletionsToPrint those also logged with --log-completions.
const (
	maxLoggedCompletions  = 64
	numCompletionsToPrint = 4
)

// tail is the last n runes of s.
func tail(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n:])
}

// Summary is what a run reports at its end.
type Summary struct {
	Steps   int
	Last    runlog.Record // the last logged metrics
	Elapsed time.Duration
}

// runLog gathers the metrics of a logging window and writes metrics.jsonl, completions.jsonl and
// the progress display. Window metrics are averaged over the rounds/steps that produced them (TRL
// averages its _metrics lists at log time); num_tokens is the running total.
type runLog struct {
	t           *Trainer
	metrics     *runlog.Metrics
	completions *runlog.Completions
	// evalCompletions is eval_completions.jsonl, when the run evaluates.
	evalCompletions *os.File
	progress        *runlog.Progress
	window          map[string][]float64
	streak          map[string]int
	summary         *Summary
	start           time.Time
}

func newRunLog(t *Trainer, startStep int) (*runLog, error) {
	l := &runLog{t: t, window: map[string][]float64{}, streak: map[string]int{}, summary: &Summary{}, start: time.Now()}
	if dir := t.cfg.OutputDir; dir != "" {
		var err error
		if l.metrics, err = runlog.OpenMetrics(dir, startStep); err != nil {
			return nil, fmt.Errorf("grpo: %w", err)
		}
		if l.completions, err = runlog.OpenCompletions(dir, startStep); err != nil {
			l.close()
			return nil, fmt.Errorf("grpo: %w", err)
		}
		if t.eval != nil {
			if l.evalCompletions, err = openEvalCompletions(dir, startStep); err != nil {
				l.close()
				return nil, fmt.Errorf("grpo: %w", err)
			}
		}
	}
	if t.s.Progress != nil {
		l.progress = runlog.NewProgress(t.s.Progress, t.totalSteps, startStep)
	}
	return l, nil
}

func (l *runLog) add(name string, v float64) { l.window[name] = append(l.window[name], v) }

// addRollout records the generation batch's metrics.
func (l *runLog) addRollout(r *Rollout, rewards []Reward, tm timings, tokensSeen int64) {
	for k, v := range rewardMetrics(r, rewards) {
		l.add(k, v)
	}
	for k, v := range r.lengthStats() {
		l.add(k, v)
	}
	newTokens := 0
	for _, c := range r.Completions {
		newTokens += len(c)
	}
	l.add("timing_s/generation", tm.generation.Seconds())
	l.add("timing_s/scoring", tm.scoring.Seconds())
	if s := tm.generation.Seconds(); s > 0 {
		l.add("tokens_per_s/generation", float64(newTokens)/s)
	}
	l.window["num_tokens"] = []float64{float64(tokensSeen)}
}

// addStep records one optimizer step's metrics.
func (l *runLog) addStep(info StepInfo, lr float64, took time.Duration, rows int) {
	l.add("loss", info.Loss)
	l.add("grad_norm", info.GradNorm)
	l.add("learning_rate", lr)
	for k, v := range info.Metrics {
		l.add(k, v)
	}
	l.add("timing_s/update", took.Seconds())
	if s := took.Seconds(); s > 0 {
		l.add("tokens_per_s/update", float64(rows*(l.t.promptLen+l.t.cfg.MaxCompletionLength))/s)
	}
	if l.progress != nil {
		l.progress.Step(info.Step)
	}
}

// flush writes the window's averages as one metrics line, the last rollout's completions, and
// checks the guard rails. It returns the metrics line.
func (l *runLog) flush(step int, epoch float64, r *Rollout) (json.RawMessage, error) {
	rec := runlog.Record{Step: step, Epoch: epoch, Metrics: map[string]float64{}}
	for k, vs := range l.window {
		rec.Metrics[k] = mean(vs)
	}
	if v, ok := l.window["learning_rate"]; ok {
		rec.Metrics["learning_rate"] = v[len(v)-1]
	}
	l.window = map[string][]float64{}
	l.summary.Steps, l.summary.Last, l.summary.Elapsed = step, rec, time.Since(l.start)
	line, _ := rec.MarshalJSON()
	if l.metrics != nil {
		if _, err := l.metrics.Write(rec); err != nil {
			return nil, fmt.Errorf("grpo: %w", err)
		}
	}
	if l.completions != nil {
		if err := l.completions.Write(completionLines(step, r, l.t.s.Rewards)...); err != nil {
			return nil, fmt.Errorf("grpo: %w", err)
		}
	}
	if l.progress != nil {
		l.progress.Log(rec)
	}
	if l.t.cfg.LogCompletions { // TRL's num_completions_to_print, on the log
		for i := range min(r.Len(), numCompletionsToPrint) {
			l.t.log.Info("grpo: completion", "step", step, "prompt", tail(r.Prompts[i].Text, 80), "completion", r.Texts[i],
				"reward", r.Rewards[i], "advantage", r.Advantages[i])
		}
	}
	l.guard(step, rec)
	return line, nil
}

// guard warns loudly when a run is silently not learning (see GuardThreshold).
func (l *runLog) guard(step int, rec runlog.Record) {
	checks := []struct{ metric, why string }{
		{"frac_reward_zero_std", "every completion of a prompt gets the same reward, so every advantage is 0 and the gradient vanishes (TRL #3857): make the task easier or harder, raise num_generations or temperature, or use a graded reward"},
		{"completions/clipped_ratio", "completions hit max_completion_length before an end-of-sequence token, so rewards on cut answers are ~0 and the gradient vanishes (TRL #5697): raise max_completion_length, check the EOS ids / chat template, or set mask_truncated_completions"},
	}
	for _, c := range checks {
		v, ok := rec.Metrics[c.metric]
		if !ok || math.IsNaN(v) || v < GuardThreshold {
			l.streak[c.metric] = 0
			continue
		}
		l.streak[c.metric]++
		if n := l.streak[c.metric]; n == GuardLogs || n > GuardLogs && n%(4*GuardLogs) == 0 {
			l.t.log.Warn(fmt.Sprintf("grpo: !!! %s = %.2f for %d logging steps in a row: %s", c.metric, v, n, c.why),
				slog.Int("step", step))
		}
	}
}

// completionLines are the completions.jsonl lines of a rollout (at most maxLoggedCompletions).
func completionLines(step int, r *Rollout, rewards []Reward) []runlog.Completion {
	n := min(r.Len(), maxLoggedCompletions)
	out := make([]runlog.Completion, n)
	for i := range n {
		rw := map[string]float64{}
		for _, f := range rewards {
			rw[f.Name] = r.FuncRewards[f.Name][i]
		}
		out[i] = runlog.Completion{Step: step, Prompt: r.Prompts[i].Text, Completion: r.Texts[i], Rewards: rw, Advantage: r.Advantages[i]}
	}
	return out
}

func (l *runLog) done() {
	if l.progress != nil {
		l.progress.Done()
	}
}

func (l *runLog) close() {
	if l.metrics != nil {
		_ = l.metrics.Close()
	}
	if l.completions != nil {
		_ = l.completions.Close()
	}
	if l.evalCompletions != nil {
		_ = l.evalCompletions.Close()
	}
}
