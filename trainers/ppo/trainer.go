// Package ppo is posttrain's PPO trainer with TRL v0.24's PPOTrainer / PPOConfig semantics
// (trl/trainer/ppo_trainer.py; ../shared/notes/trl-semantics.md): a policy, its frozen
// reference, a frozen reward model and a value model initialised from the reward model. Each
// update generates a rollout batch, scores it (log-probs of policy and reference, values, the
// reward model's scores), folds the per-token KL penalty into the rewards with the score at the
// last token, computes GAE advantages and returns (trainers/engine/rl, the course's phase 6 and 9
// functions), and trains policy and value model together, num_ppo_epochs × num_mini_batches
// optimizer steps, on the clipped policy loss plus vf_coef × the clipped value loss (loss.go).
// It is a loop.Source: one driver step is one update (TRL's global_step), the optimizer steps
// within it go through loop.Updater, and the driver gives it the schedule, logging, checkpoints
// (the value model in checkpoint-N/value_model/), exact resume and Ctrl-C.
package ppo

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/internal/shard"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/models/generate"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/rollout"
	"github.com/posttrain/posttrain/trainers/engine/step"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// Prompt is one prompt of the training set (models/encode renders and tokenizes it).
type Prompt = encode.Prompt

// Setup is what a PPO run needs besides its configuration.
type Setup struct {
	Config  *Config // resolved and validated
	Backend backends.Backend
	// Model is the policy with its value model attached (trainable.Model.AttachValue): the two-model
	// trainable set the driver's AdamW updates.
	Model *trainable.Model
	// Reward is the frozen reward model (trainable.LoadScorer); it must share the policy's vocabulary.
	Reward  *trainable.Scorer
	Decoder generate.TextDecoder
	// Pad and EOS are the policy tokenizer's pad_token_id and eos_token_id (TRL's
	// processing_class): pads mark a response's end, EOS is what missing_eos_penalty looks for.
	Pad, EOS    int
	Prompts     []*Prompt
	EvalPrompts []*Prompt // the eval_dataset's, when the configuration evaluates
	Logger      *slog.Logger
	Progress    io.Writer
	// OnUpdate, when set, is called after every update with its metrics (tests, the demo).
	OnUpdate func(UpdateInfo)
}

// UpdateInfo is what one update reports to Setup.OnUpdate.
type UpdateInfo struct {
	Update  int
	Metrics map[string]float64 // TRL's names, as logged
	Scored  *Scored
	// First is the statistics of the first micro-batch of the first PPO epoch (before any
	// optimizer step of the update): its ratio is 1 on-policy.
	First map[string]float64
	// Micro is every micro-batch's statistics, in training order (num_ppo_epochs × mini-batches ×
	// micro-batches).
	Micro []map[string]float64
	// Perms is each PPO epoch's permutation of the rollout's rows (TRL's np.random.permutation).
	Perms [][]int
}

// Trainer runs PPO.
type Trainer struct {
	s         Setup
	cfg       *Config
	log       *slog.Logger
	spec      *spec
	gen       *generate.Generator
	oldEval   *step.ContextEval // the policy's log-probs of a rollout
	refEval   *step.ContextEval // the reference's (a frozen clone of the starting weights)
	valueEval *step.ContextEval // the value model's values
	eval      *evaluator
	promptLen int
	pad, eos  int
	stopID    int // -1: none
	batch     int // rollout batch (TRL's local_batch_size)
	updates   int

	cursor     *rollout.Cursor // the prompts' seeded order
	round      int             // updates done (seeds the sampler and the PPO epochs' permutations)
	episode    int
	tokensSeen int64
	began      time.Time

	rollout *Scored
	stats   *updateStats
	first   map[string]float64
	micro   []map[string]float64
	perms   [][]int
	window  map[string][]float64
}

// New checks the setup and compiles the forward-only graphs (the driver compiles the training
// ones).
func New(s Setup) (*Trainer, error) {
	cfg := s.Config
	switch {
	case cfg == nil || s.Backend == nil || s.Model == nil || s.Reward == nil || s.Decoder == nil:
		return nil, errors.New("ppo: config, backend, model, reward model and decoder are required")
	case s.Model.Value == nil:
		return nil, errors.New("ppo: the model has no value model attached")
	case len(s.Prompts) < cfg.RolloutBatch():
		return nil, fmt.Errorf("ppo: %d prompts, fewer than one rollout batch (per_device_train_batch_size × gradient_accumulation_steps = %d; TRL's dataloader drops the last incomplete batch)",
			len(s.Prompts), cfg.RolloutBatch())
	}
	t := &Trainer{s: s, cfg: cfg, log: s.Logger, pad: s.Pad, eos: s.EOS, stopID: cfg.StopTokenID, batch: cfg.RolloutBatch(),
		window: map[string][]float64{}, cursor: rollout.NewCursor(len(s.Prompts), cfg.Seed)}
	if t.log == nil {
		t.log = slog.Default()
	}
	if cfg.StopToken == "eos" {
		t.stopID = s.EOS
	}
	t.updates = cfg.Updates(len(s.Prompts))
	if t.updates < 1 {
		return nil, fmt.Errorf("ppo: total_episodes %d gives no rollout batch of %d prompts", cfg.TotalEpisodes, t.batch)
	}
	for _, p := range append(s.Prompts[:len(s.Prompts):len(s.Prompts)], s.EvalPrompts...) {
		if len(p.IDs) == 0 {
			return nil, fmt.Errorf("ppo: prompt %q has no tokens", p.Text)
		}
		t.promptLen = max(t.promptLen, len(p.IDs))
	}
	// Refused here, before the graphs (sized by it) are compiled.
	if m := s.Model.Config.MaxPositionEmbeddings; m > 0 && cfg.ResponseLength > m-t.promptLen {
		return nil, fmt.Errorf("ppo: response_length (--response-length) %d + the longest prompt's %d tokens exceed the model's max_position_embeddings %d",
			cfg.ResponseLength, t.promptLen, m)
	}
	t.promptLen = (t.promptLen + 7) / 8 * 8 // one graph shape for the run
	if _, err := cfg.Schedule(t.updates); err != nil {
		return nil, fmt.Errorf("ppo: %w", err)
	}
	m := s.Model
	t.spec = &spec{Policy: m.Config, Value: m.Value.Config, ResponseLen: cfg.ResponseLength, Temperature: cfg.Temperature + 1e-7,
		Params: LossParams{Cliprange: cfg.Cliprange, CliprangeValue: cfg.CliprangeValue, VFCoef: cfg.VFCoef}}
	if err := t.compile(); err != nil {
		return nil, err
	}
	if cfg.Evaluates() {
		var err error
		if t.eval, err = t.newEvaluator(s.EvalPrompts); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *Trainer) compile() error {
	m := t.s.Model
	t.gen = generate.NewGenerator(t.s.Backend, m.Ctx, decoder.Arch{Config: m.Config})
	ref, err := trainable.CloneWeights(m.Ctx) // the frozen reference: the starting policy
	if err != nil {
		return fmt.Errorf("ppo: %w", err)
	}
	if t.oldEval, err = step.NewContextEval(t.s.Backend, m.Ctx, t.spec.logProbGraph); err != nil {
		return fmt.Errorf("ppo: policy log-probs: %w", err)
	}
	if t.refEval, err = step.NewContextEval(t.s.Backend, ref, t.spec.logProbGraph); err != nil {
		return fmt.Errorf("ppo: reference log-probs: %w", err)
	}
	if t.valueEval, err = step.NewContextEval(t.s.Backend, m.Ctx, t.spec.valueGraph); err != nil {
		return fmt.Errorf("ppo: values: %w", err)
	}
	return t.splitRows()
}

// splitRows, with --devices N > 1, splits the rollout's generation and its policy, reference,
// value and reward-model passes over the devices the driver splits the update over
// (internal/shard): each row on one device, local_rollout_forward_batch_size rows of a pass on
// each, the weights replicated.
func (t *Trainer) splitRows() error {
	err := shard.SplitAll(t.s.Backend, t.cfg.DeviceCount(), t.gen, t.oldEval, t.refEval, t.valueEval, t.s.Reward)
	if err != nil {
		return fmt.Errorf("ppo: %w", err)
	}
	return nil
}

// Train runs the configured updates with the training driver (trainers/engine/loop): resuming when
// asked, metrics.jsonl, checkpoints every save_steps updates, the final policy (and its value
// model in value_model/) in OUTPUT_DIR; Ctrl-C saves a checkpoint of the last update.
func (t *Trainer) Train(ctx stdctx.Context) (*loop.Result, error) {
	// TRL's PPOTrainer saves a checkpoint on save_steps only (on_train_end sets no save), so
	// does posttrain (NoFinalCheckpoint); the final policy goes to OUTPUT_DIR either way.
	return loop.Train(ctx, t.s.Model, source{t}, loop.Options{Config: t.cfg, Backend: t.s.Backend,
		Progress: t.s.Progress, Logger: t.log, NoFinalCheckpoint: true})
}

// source is the Trainer as the driver's step source.
type source struct{ *Trainer }

// Loss is the PPO loss of a micro-batch (spec.lossGraph).
func (s source) Loss(ctx *context.Context, in named.Inputs, norm *graph.Node) (*graph.Node, map[string]*graph.Node) {
	return s.spec.lossGraph(ctx, in, norm)
}

// TotalSteps is the number of updates (TRL's num_total_batches).
func (s source) TotalSteps() int { return s.updates }

// nextPrompts is TRL's DataLoader(shuffle=True, drop_last=True) cycled forever: batches of the
// seeded per-epoch order, a new epoch when fewer than a batch remain.
func (t *Trainer) nextPrompts() []*Prompt {
	out := make([]*Prompt, 0, t.batch)
	for _, i := range t.cursor.Next(t.batch, true) {
		out = append(out, t.s.Prompts[i])
	}
	return out
}

// Accumulate is one update: a rollout batch, then num_ppo_epochs passes of num_mini_batches
// mini-batches, each one optimizer step over its micro-batches (the last step's update is the
// driver's).
func (s source) Accumulate(acc loop.Accumulator) error {
	t := s.Trainer
	if t.began.IsZero() {
		t.began = time.Now()
	}
	c := t.cfg
	up, ok := acc.(loop.Updater)
	if !ok {
		return errors.New("ppo: the driver's accumulator cannot make several optimizer steps per update")
	}
	r, err := t.newRollout(t.nextPrompts(), c.Temperature, t.rolloutSeed(t.round))
	if err != nil {
		return err
	}
	if err := t.scoreRollout(r); err != nil {
		return fmt.Errorf("ppo: update %d: %w", t.round+1, err)
	}
	t.rollout, t.first, t.micro, t.perms = r, nil, nil, nil
	mini := t.batch / c.NumMiniBatches
	rows := c.MicroBatch() // per_device_train_batch_size × devices
	micros := mini / rows
	t.stats = newUpdateStats(c.NumPPOEpochs, c.NumMiniBatches, c.GradientAccumulationSteps)
	for e := range c.NumPPOEpochs {
		perm := loop.Order(t.batch, c.Seed, permEpoch(t.round, e, c.NumPPOEpochs))
		t.perms = append(t.perms, perm)
		for mb := range c.NumMiniBatches {
			for k := range micros {
				lo := mb*mini + k*rows
				feed, err := t.microBatch(r, perm[lo:lo+rows])
				if err != nil {
					return fmt.Errorf("ppo: update %d: %w", t.round+1, err)
				}
				_, ms, err := acc.Micro(feed, float64(micros))
				if err != nil {
					return fmt.Errorf("ppo: update %d: %w", t.round+1, err)
				}
				t.stats.add(e, mb, k, ms)
				t.micro = append(t.micro, ms)
				if t.first == nil {
					t.first = ms
				}
			}
			if e < c.NumPPOEpochs-1 || mb < c.NumMiniBatches-1 {
				if _, err := up.Update(); err != nil {
					return err
				}
			}
		}
	}
	for i, resp := range r.Responses {
		t.tokensSeen += int64(len(r.Prompts[i].IDs) + len(resp[:r.Width]))
	}
	return nil
}

// permEpoch is the pass number of PPO epoch e of update round in loop.Order's stream (TRL's
// np.random.permutation; posttrain draws it from the seed, the update and the epoch, so a resumed
// run draws the same), far from the data order's passes.
func permEpoch(round, e, epochs int) int { return 1<<30 + round*epochs + e }

// Stepped records the update's metrics (TRL's names).
func (s source) Stepped(u loop.Update) error {
	t := s.Trainer
	t.round = u.Step
	t.episode += t.batch
	ms := t.updateMetrics(u)
	for k, v := range ms {
		t.window[k] = append(t.window[k], v)
	}
	if t.s.OnUpdate != nil {
		t.s.OnUpdate(UpdateInfo{Update: u.Step, Metrics: ms, Scored: t.rollout, First: t.first, Micro: t.micro, Perms: t.perms})
	}
	return nil
}

// Epoch is TRL's state.epoch = episode / dataset size.
func (s source) Epoch() (float64, bool) {
	n := len(s.s.Prompts)
	return float64(s.episode) / float64(n), s.episode/n > (s.episode-s.batch)/n
}

// Log returns the window's metrics: each the mean over its updates (TRL logs every update; with
// logging_steps 1 the lines are TRL's), episode and lr the last update's.
func (s source) Log() map[string]float64 {
	out := map[string]float64{}
	for k, vs := range s.window {
		switch k {
		case "episode", "lr", "eps":
			out[k] = vs[len(vs)-1]
		default:
			sum := 0.0
			for _, v := range vs {
				sum += v
			}
			out[k] = sum / float64(len(vs))
		}
	}
	s.window = map[string][]float64{}
	return out
}

// Begin implements loop.Hooks.
func (s source) Begin(start int, _ *runlog.Progress) error {
	t := s.Trainer
	t.log.Info("ppo: start", "updates", t.updates, "from", start, "prompts", len(t.s.Prompts), "rollout_batch", t.batch,
		"num_ppo_epochs", t.cfg.NumPPOEpochs, "num_mini_batches", t.cfg.NumMiniBatches, "response_length", t.cfg.ResponseLength)
	return nil
}

// Logged implements loop.Hooks.
func (s source) Logged(runlog.Record) error { return nil }

// Close implements loop.Hooks: it frees the compiled graphs.
func (s source) Close() {
	t := s.Trainer
	t.gen.Finalize()
	if t.eval != nil {
		t.eval.close()
	}
}
