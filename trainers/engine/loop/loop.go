// Package loop is posttrain's one training driver. It owns what every trainer's run has in common:
// the optimizer steps and the HF learning-rate schedule set from the host, AdamW with global-norm
// clipping on float32 masters (bf16 compute), the logging / evaluation / save cadence (logging_steps,
// eval_strategy / eval_steps / eval_on_start, save_steps, save_total_limit), metrics.jsonl with
// TRL's names and a progress bar, atomic checkpoints with trainer_state.json (log history, data
// position, RNG) and exact resume, the final model, and a clean stop with a checkpoint on Ctrl-C.
//
// A method plugs in as a Source: the work of each optimizer step (its micro-batches through the
// driver's Accumulator), its logged metrics, its position and extra checkpoint state, and, through
// optional interfaces, its evaluation, preflight and output files. SFT, DPO and KTO are the simple
// case, a Method over fixed examples (data order by seed with an epoch cursor, micro-batches padded
// to shape buckets, gradient accumulation normalised over the whole accumulated batch), which Run
// adapts into a Source; GRPO is a Source of its own (trainers/grpo: generate and reward a batch,
// then optimizer steps on it). The driver holds no loss math. Graph inputs and metrics travel by
// name (internal/named): a method's batch is a named.Feed of its input struct, its loss binds the
// same struct from named.Inputs, and its metrics are a map by TRL name, so the driver never pairs
// tensors or metric values with their meaning by position. The model it trains is
// trainers/engine/trainable's Model (weights, float32 masters and bf16 copies, LoRA, a value model,
// saving); the checkpoint's text side — tokenizer, chat template, EOS, encodings — is
// models/encode's.
package loop

import (
	"context"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"io"
	"log/slog"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/engine/config"
)

// Source is a training method as the driver sees it. Per optimizer step the driver calls
// Accumulate (the source runs its micro-batches through the Accumulator), applies the AdamW update
// with the schedule's learning rate, and calls Stepped; at logging steps it writes the metrics Log
// returns; at saves it adds Save's state to the checkpoint, and on a resume hands the checkpoint
// to Resume.
type Source interface {
	// Loss builds a micro-batch's loss divided by norm (so that the micro-batch losses of a step
	// sum to the loss of the whole accumulated batch) and its metric scalars by name (see
	// LossFunc); the driver's optimizer differentiates it.
	Loss(ctx *mlctx.Context, in named.Inputs, norm *graph.Node) (loss *graph.Node, metrics map[string]*graph.Node)
	// TotalSteps is the number of optimizer steps of the run.
	TotalSteps() int
	// Accumulate runs the micro-batches of the next optimizer step through acc (GRPO first
	// generates and rewards a batch when the previous one is used up).
	Accumulate(acc Accumulator) error
	// Stepped is called after the update of each step (the weights have changed).
	Stepped(u Update) error
	// Log returns the metrics of the logging window that ends at this step (TRL's names) and
	// starts a new window.
	Log() map[string]float64
	// Epoch is HF's fractional epoch after the last step, and whether that step ended a pass over
	// the data (eval_strategy epoch).
	Epoch() (epoch float64, ended bool)
	// Save adds the source's part to a checkpoint: its data position, token count, RNG and extra
	// state in cp.State, and its files in cp.Files.
	Save(cp *Checkpoint) error
	// Resume restores the source's position and state from a checkpoint's trainer_state.json (and
	// its files in dir) and returns AdamW's step count saved with them; the driver then restores
	// the weights and the optimizer state.
	Resume(dir string, st *checkpoint.State) (optimizerSteps int, err error)
}

// Accumulator runs one micro-batch of the current optimizer step: it adds the gradient of the
// source's Loss on the graph inputs in (and norm) to the step's accumulated gradients and returns
// the loss and the metrics by name (Optimizer.Micro).
type Accumulator interface {
	Micro(in named.Feed, norm float64) (loss float64, metrics map[string]float64, err error)
}

// Update is what the driver tells a source after an optimizer step.
type Update struct {
	Step     int     // global_step after the update (1 for the first step)
	LR       float64 // the learning rate of the update (what HF's Trainer logs as learning_rate)
	Loss     float64 // the sum of the micro-batch losses: the accumulated batch's loss
	GradNorm float64 // the global gradient norm before clipping
}

// Checkpoint is a checkpoint being saved: trainer_state.json with the driver's keys set (step,
// epoch, cadence, log history) and the files it writes (the model's and optimizer.safetensors).
type Checkpoint struct {
	State          *checkpoint.State
	Files          map[string]checkpoint.WriteFunc
	OptimizerSteps int // AdamW's step count, for the source's extra state
}

// Evaluator is a Source that evaluates (eval_dataset) on the driver's cadence.
type Evaluator interface {
	// Evaluates reports whether the source has an evaluation (an eval set, on a configuration
	// that evaluates).
	Evaluates() bool
	// Evaluate evaluates the current weights without changing what training reads and returns
	// the metrics of one eval line (HF's "eval_" names).
	Evaluate() (map[string]float64, error)
}

// Preflighter is a Source that checks before the first step that its largest micro-batch runs
// (through acc; the driver discards the gradients after).
type Preflighter interface {
	Preflight(acc Accumulator) error
}

// Hooks are a Source's own outputs around the driver's.
type Hooks interface {
	// Begin is called when the run starts at step start (0, or the step resumed from), after the
	// resume and with metrics.jsonl open: the source opens its own files (truncated after start on
	// a resume, like metrics.jsonl) and says what it trains.
	Begin(start int, progress *runlog.Progress) error
	// Logged is called after each metrics.jsonl line the driver writes (training or eval line).
	Logged(rec runlog.Record) error
	// Close releases what Begin opened and the source's compiled graphs.
	Close()
}

// Stopper is a Source that can only stop (Ctrl-C) and be checkpointed exactly at some steps
// (GRPO: between generation batches, which are not saved); the driver checks for Ctrl-C there.
type Stopper interface {
	CanStop() bool
}

// Itemizer is a Method whose training loss is divided by another count than Units: example i's
// share of TRL's num_items_in_batch as HF's Trainer counts it (SFT: the labels ≠ −100 before the
// shift, so a row's first token counts when it carries a label, although nothing predicts it).
// Evaluation keeps Units: HF's eval loss is each batch's own mean over the shifted labels.
type Itemizer interface {
	Items(i int) float64
}

// Method is what a trainer over fixed examples (SFT, DPO, KTO) plugs into the loop; Run adapts it
// into a Source.
type Method interface {
	// NumExamples is the number of training examples (rows after tokenization).
	NumExamples() int
	// Units is example i's share of the loss normaliser: its number of loss tokens (SFT; TRL's
	// num_items_in_batch unless the method is an Itemizer) or 1 (per-sequence losses: DPO, KTO).
	// A step's norm is the sum over all the examples of all its micro-batches.
	Units(i int) float64
	// Tokens is example i's number of input tokens (num_tokens / num_input_tokens_seen).
	Tokens(i int) int
	// Batch returns the graph inputs of a micro-batch of examples, padded to a shape bucket: the
	// Feed of the method's input struct (named.Of), which Loss binds (named.Bind).
	Batch(examples []int) (named.Feed, error)
	// Loss builds the micro-batch loss divided by norm (so that the micro-batch losses of a step
	// sum to the loss of the whole accumulated batch) from the inputs Batch names, and its metric
	// scalars by TRL name (the same names on every batch).
	Loss(ctx *mlctx.Context, in named.Inputs, norm *graph.Node) (loss *graph.Node, metrics map[string]*graph.Node)
}

// Finisher is implemented by methods whose logged metrics are not the plain mean over the
// window's micro-batches (KTO's sums and counts; SFT's num_tokens).
type Finisher interface {
	Finish(w Window) map[string]float64
}

// Window is what happened since the last logged line.
type Window struct {
	Sums         map[string]float64 // metric name → sum over the micro-batches
	MicroBatches int
	TokensSeen   int64 // input tokens since the start of training
}

// Mean returns Sums[name] / MicroBatches.
func (w Window) Mean(name string) float64 { return w.Sums[name] / float64(max(1, w.MicroBatches)) }

// Options configure Run and Train.
type Options struct {
	Config  config.Config // the method's resolved configuration (written to OUTPUT_DIR)
	Backend backends.Backend
	// Progress receives the progress bar (a terminal) or plain log lines; nil discards them.
	Progress io.Writer
	Logger   *slog.Logger
	// AfterStep, when set, is called after each optimizer step (tests use it to interrupt).
	AfterStep func(step int)
	// Eval is the method over the eval set (the trainer built on the eval rows; its reference
	// log-probs, if any, computed once like the training set's). Run evaluates it as the config's
	// eval_strategy / eval_steps / eval_on_start say; nil or eval_strategy "no" without
	// eval_on_start: never. A Method made by WithEval sets it too.
	Eval Method
	// NoFinalCheckpoint saves checkpoints only every save_steps (GRPO); otherwise the last step is
	// saved too, as HF's Trainer does.
	NoFinalCheckpoint bool
}

// Result is the outcome of a run.
type Result struct {
	Steps       int           // global optimizer steps done
	Start       int           // the global step the run began at: 0, or the step resumed from
	Last        runlog.Record // the last logged training line
	Checkpoints []string      // checkpoint directories written
	Interrupted bool          // stopped by ctx (Ctrl-C) after saving a checkpoint
	OutputDir   string
	Elapsed     time.Duration // since the run started (after a resume)
}

// ErrInterrupted is returned (wrapped) when ctx was cancelled: a checkpoint was saved first.
var ErrInterrupted = checkpoint.ErrInterrupted

// A Fault is a failure outside the model met before a step changed anything (a reward function
// that raised, hung or answered wrongly): the source has left its state as it was after the last
// step, so the driver saves a checkpoint of that step and stops, and the run continues with
// --resume once the cause is fixed. A source returns it (wrapped or not) from Accumulate, or from
// an evaluation.
type Fault struct{ Err error }

func (f *Fault) Error() string { return f.Err.Error() }
func (f *Fault) Unwrap() error { return f.Err }

// Run trains m with method as configured and returns when max_steps / num_train_epochs are done,
// or when ctx is cancelled (then a checkpoint is saved and the error wraps ErrInterrupted).
func Run(ctx context.Context, m *trainable.Model, method Method, opts Options) (*Result, error) {
	if w, ok := method.(*withEval); ok {
		method = w.Method
		if opts.Eval == nil {
			opts.Eval = w.eval
		}
	}
	src, err := newMethodSource(m, method, opts)
	if err != nil {
		return nil, err
	}
	return Train(ctx, m, src, opts)
}

// Train runs src on m with the driver: resume if the configuration asks, then the optimizer steps
// with logging, evaluation and checkpoints, then the final model in OUTPUT_DIR. When ctx is
// cancelled (at a step where the source can stop) it saves a checkpoint of the last step and
// returns an error wrapping ErrInterrupted.
func Train(ctx context.Context, m *trainable.Model, src Source, opts Options) (*Result, error) {
	d, err := newDriver(m, src, opts)
	if err != nil {
		if h, ok := src.(Hooks); ok {
			h.Close()
		}
		return nil, err
	}
	defer d.close()
	if err := d.prepareOutput(); err != nil {
		return nil, err
	}
	return d.run(ctx)
}
