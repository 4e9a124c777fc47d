// Package loop is the training loop shared by posttrain's trainers (SFT, DPO, KTO, and GRPO's
// update phase): data order by seed with an epoch cursor, micro-batches padded to shape buckets,
// gradient accumulation normalised over the whole accumulated batch, AdamW with global-norm
// clipping and an HF learning-rate schedule set from the host, bf16 compute with float32 masters,
// metrics.jsonl with TRL's names, a progress bar, atomic checkpoints with exact resume, and a
// clean stop on Ctrl-C. It holds no loss math: a trainer plugs in through Method. Model holds the
// weights; the checkpoint's text side (tokenizer, chat template, EOS, encodings) is data/encode's.
package loop

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/config"
)

// Method is what a trainer plugs into the loop.
type Method interface {
	// NumExamples is the number of training examples (rows after tokenization).
	NumExamples() int
	// Units is example i's share of the loss normaliser: its number of loss tokens (SFT, TRL's
	// num_items_in_batch) or 1 (per-sequence losses: DPO, KTO). A step's norm is the sum over all
	// the examples of all its micro-batches.
	Units(i int) float64
	// Tokens is example i's number of input tokens (num_tokens / num_input_tokens_seen).
	Tokens(i int) int
	// Batch returns the graph inputs of a micro-batch of examples, padded to a shape bucket.
	Batch(examples []int) ([]any, error)
	// Loss builds the micro-batch loss divided by norm (so that the micro-batch losses of a step
	// sum to the loss of the whole accumulated batch) and its metrics, in MetricNames order.
	Loss(ctx *mlctx.Context, inputs []*graph.Node, norm *graph.Node) (loss *graph.Node, metrics []*graph.Node)
	// MetricNames names the metric scalars Loss returns.
	MetricNames() []string
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

// Options configure Run.
type Options struct {
	Config  config.Config // the method's resolved configuration (written to OUTPUT_DIR)
	Backend backends.Backend
	// Progress receives the progress bar (a terminal) or plain log lines; nil discards them.
	Progress io.Writer
	Logger   *slog.Logger
	// AfterStep, when set, is called after each optimizer step (tests use it to interrupt).
	AfterStep func(step int)
	// Eval is the method over the eval set (the trainer built on the eval rows; its reference
	// log-probs, if any, computed once like the training set's). It is evaluated as the config's
	// eval_strategy / eval_steps / eval_on_start say; nil or eval_strategy "no" without
	// eval_on_start: never. A Method made by WithEval sets it too.
	Eval Method
}

// Result is the outcome of a run.
type Result struct {
	Steps       int           // global optimizer steps done
	Last        runlog.Record // the last logged line
	Checkpoints []string      // checkpoint directories written
	Interrupted bool          // stopped by ctx (Ctrl-C) after saving a checkpoint
	OutputDir   string
}

// ErrInterrupted is returned (wrapped) when ctx was cancelled: a checkpoint was saved first.
var ErrInterrupted = checkpoint.ErrInterrupted

// Run trains m with method as configured and returns when max_steps / num_train_epochs are done,
// or when ctx is cancelled (then a checkpoint is saved and the error wraps ErrInterrupted).
func Run(ctx context.Context, m *Model, method Method, opts Options) (*Result, error) {
	if w, ok := method.(*withEval); ok {
		method = w.Method
		if opts.Eval == nil {
			opts.Eval = w.eval
		}
	}
	t, err := newTrainer(m, method, opts)
	if err != nil {
		return nil, err
	}
	defer t.close()
	return t.run(ctx)
}

func describe(c *config.Training, n, total int) string {
	return fmt.Sprintf("%d examples, %d steps, batch %d × %d accumulation", n, total, c.PerDeviceTrainBatchSize, c.GradientAccumulationSteps)
}
