package grpo

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
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

// numCompletionsToPrint are the completions also logged with --log-completions (completions.jsonl
// gets every one).
const numCompletionsToPrint = 4

// tail is the last n runes of s.
func tail(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n:])
}

// runLog is GRPO's side of the run's logs: the logging window of its metrics (TRL averages its
// _metrics lists at log time: window metrics are averaged over the rounds/steps that produced
// them; num_tokens is the running total; learning_rate the last step's), completions.jsonl and
// eval_completions.jsonl, and the guard rails' streaks. The driver writes metrics.jsonl and the
// progress display.
type runLog struct {
	completions *runlog.Completions
	// evalCompletions is eval_completions.jsonl, when the run evaluates; evalLines the completions
	// of the evaluation whose line the driver writes next.
	evalCompletions *os.File
	evalLines       []runlog.Completion
	window          map[string][]float64
	streak          map[string]int
}

// Begin opens completions.jsonl (and eval_completions.jsonl) with metrics.jsonl's resume rule (a
// fresh run starts them afresh; a resumed one keeps the lines of steps ≤ start) and says what the
// run trains.
func (s source) Begin(start int, _ *runlog.Progress) error {
	t, l := s.Trainer, &s.logs
	var err error
	if l.completions, err = runlog.OpenCompletions(t.cfg.OutputDir, start); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	if t.eval != nil {
		if l.evalCompletions, err = openEvalCompletions(t.cfg.OutputDir, start); err != nil {
			return fmt.Errorf("grpo: %w", err)
		}
	}
	t.log.Info("grpo: start", "steps", t.totalSteps, "prompts", len(t.s.Prompts), "num_generations", t.cfg.NumGenerations,
		"generation_batch", t.genBatch, "step_batch", t.stepBatch, "off_policy", t.spec.OffPolicy, "beta", t.cfg.Beta,
		"loss_type", t.cfg.LossType, "advantage", t.cfg.Advantage)
	for _, w := range lossWarnings(t.cfg) {
		t.log.Warn("grpo: " + w)
	}
	return nil
}

// lossWarnings are TRL 1.16's warnings on a loss type and an importance sampling level that do
// not go together (GRPOTrainer.__init__): the run goes on, as there.
func lossWarnings(c *Config) []string {
	var out []string
	level := c.ImportanceSamplingLevel
	switch {
	case c.LossType == "luspo" && level != "sequence":
		out = append(out, "loss_type luspo: importance_sampling_level should be sequence, as in the paper's setup")
	case c.LossType == "vespo" && level != "token":
		out = append(out, "loss_type vespo computes sequence-level weights itself: importance_sampling_level should be token (the default)")
	case level == "sequence" && slices.Contains([]string{"bnpo", "dr_grpo", "dapo", "cispo"}, c.LossType):
		out = append(out, "importance_sampling_level sequence with loss_type "+c.LossType+" sums per-token contributions, weighting each sequence by its length: loss_type grpo is GSPO's setup")
	}
	return out
}

func (l *runLog) add(name string, v float64) { l.window[name] = append(l.window[name], v) }

// addRollout records the generation batch's metrics.
func (l *runLog) addRollout(r *Scored, rewards []Reward, tm timings, tokensSeen int64) {
	for k, v := range rewardMetrics(r, rewards) {
		l.add(k, v)
	}
	for k, v := range r.lengthStats() {
		l.add(k, v)
	}
	newTokens := 0
	for i := range r.Completions {
		newTokens += r.completionLen(i) // the model's tokens: a tool turn is read, not generated
	}
	for k, v := range r.toolMetrics() {
		l.add(k, v)
	}
	l.add("timing_s/generation", tm.generation.Seconds())
	l.add("timing_s/scoring", tm.scoring.Seconds())
	l.add("timing_s/rewards", tm.rewards.Seconds())
	if s := tm.generation.Seconds(); s > 0 {
		l.add("tokens_per_s/generation", float64(newTokens)/s)
	}
	l.window["num_tokens"] = []float64{float64(tokensSeen)}
}

// addStep records one optimizer step's metrics; tokens is the number of positions it ran.
func (l *runLog) addStep(info StepInfo, lr float64, took time.Duration, tokens int) {
	l.add("loss", info.Loss)
	l.add("grad_norm", info.GradNorm)
	l.add("learning_rate", lr)
	for k, v := range info.Metrics {
		l.add(k, v)
	}
	l.add("timing_s/update", took.Seconds())
	if s := took.Seconds(); s > 0 {
		l.add("tokens_per_s/update", float64(tokens)/s)
	}
}

// Log returns the window's averages (learning_rate: the last step's) and starts a new window.
func (s source) Log() map[string]float64 {
	l := &s.logs
	ms := map[string]float64{}
	for k, vs := range l.window {
		ms[k] = mean(vs)
	}
	if v, ok := l.window["learning_rate"]; ok {
		ms["learning_rate"] = v[len(v)-1]
	}
	l.window = map[string][]float64{}
	return ms
}

// Logged writes the completions that go with a metrics line: for a training line the last
// rollout's (completions.jsonl, a few also to the log with log_completions) and the guard rails'
// check; for an eval line the evaluation's (eval_completions.jsonl).
func (s source) Logged(rec runlog.Record) error {
	t, l := s.Trainer, &s.logs
	if rec.IsEval() {
		return t.loggedEval(rec)
	}
	r := t.batch
	if err := l.completions.Write(completionLines(rec.Step, r, t.s.Rewards)...); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	if t.cfg.LogCompletions { // TRL's num_completions_to_print, on the log
		for i := range min(r.Len(), numCompletionsToPrint) {
			t.log.Info("grpo: completion", "step", rec.Step, "prompt", tail(r.Prompts[i].Text, 80), "completion", r.Texts[i],
				"reward", r.Rewards[i], "advantage", r.Advantages[i])
		}
	}
	l.guard(t.log, rec.Step, rec)
	return nil
}

// guard warns loudly when a run is silently not learning (see GuardThreshold).
func (l *runLog) guard(log *slog.Logger, step int, rec runlog.Record) {
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
			log.Warn(fmt.Sprintf("grpo: !!! %s = %.2f for %d logging steps in a row: %s", c.metric, v, n, c.why),
				slog.Int("step", step))
		}
	}
}

// completionLines are the completions.jsonl lines of a rollout: every completion, with the text
// the reward functions received.
func completionLines(step int, r *Scored, rewards []Reward) []runlog.Completion {
	n := r.Len()
	out := make([]runlog.Completion, n)
	for i := range n {
		rw := map[string]float64{}
		for _, f := range rewards {
			rw[f.Name] = r.FuncRewards[f.Name][i]
		}
		out[i] = runlog.Completion{Step: step, Prompt: r.Prompts[i].Text, Completion: r.Texts[i], Rewards: rw, Advantage: r.Advantages[i], Conversation: r.conversation(i)}
	}
	return out
}

// Close closes the completions files.
func (s source) Close() {
	l := &s.logs
	if l.completions != nil {
		_ = l.completions.Close()
	}
	if l.evalCompletions != nil {
		_ = l.evalCompletions.Close()
	}
}
