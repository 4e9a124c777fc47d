package main

// `posttrain toy lm-reinforce|rlhf|dpo|kto|grpo|variants`: the course's TinyLM phases 8-12, trained
// through the GoMLX trainer path (toy/tinylmgomlx: trainers/{dpo,kto,grpo} losses + trainers/engine/step)
// and printed by the float64 oracle's print functions (toy/tinylm). --json prints one object with
// the golden's keys ({"phase", "args", results}); --check also runs the oracle and fails if the two
// differ by more than 1e-9 (or sample differently).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gomlx/gomlx/backends"
	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/internal/pyfmt"
	"github.com/posttrain/posttrain/toy/tinylm"
	"github.com/posttrain/posttrain/toy/tinylmgomlx"
)

// checkTol is --check's tolerance between the GoMLX path and the float64 oracle.
const checkTol = 1e-9

// lmResult is one TinyLM experiment's outcome: value marshals to the golden's result keys (a JSON
// object), print writes the course's result lines.
type lmResult struct {
	value any
	print func(io.Writer)
}

// lmToy is one `posttrain toy` TinyLM experiment; S holds its settings.
type lmToy[S any] struct {
	phase, order int
	name, usage  string
	defaults     func() S
	// params are the settings, bound to the fields of s, in the golden's "args" order: the flags
	// (defaults from defaults()), how a run reads them, and the "args" of --json.
	params func(s *S) []toyParam
	// run trains the experiment with settings s through GoMLX on b, or with the float64 oracle
	// when b is nil.
	run       func(name string, s S, b backends.Backend) (lmResult, error)
	handCheck func(io.Writer) error // the phase's hand_check lines before the results, or nil
}

// kv/kvs is an ordered JSON object.
type kv struct {
	Key   string
	Value any
}
type kvs []kv

// MarshalJSON writes the pairs in order.
func (o kvs) MarshalJSON() ([]byte, error) { return pyfmt.MarshalItems(o) }

// orZero is *p, or 0 when p is nil.
func orZero(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// set assigns *p to *dst when p is not nil.
func set[T any](dst *T, p *T) {
	if p != nil {
		*dst = *p
	}
}

// addLMToy registers t as `posttrain toy <name>` and its phase's lines for `toy course` (run at
// t.defaults()).
func addLMToy[S any](t lmToy[S]) {
	d := t.defaults()
	flags := append([]cli.Flag{
		jsonFlag(),
		&cli.BoolFlag{Name: "check", Usage: "also run the float64 oracle (toy/tinylm) and fail if the results differ by more than 1e-9"},
		backendFlag(),
	}, toyFlags(t.params(&d))...)
	addToy(toyExperiment{
		Phase: t.phase,
		Order: t.order,
		Command: &cli.Command{
			Name:         t.name,
			Usage:        fmt.Sprintf("course phase %d: %s (GoMLX trainer path)", t.phase, t.usage),
			Flags:        flags,
			Action:       func(ctx context.Context, cmd *cli.Command) error { return lmAction(cmd, t) },
			OnUsageError: toyUsageError,
		},
		Course: func(w io.Writer) error {
			b, err := backend.New(backend.Resolve(""))
			if err != nil {
				return err
			}
			defer b.Finalize()
			return printLM(w, t, t.defaults(), b)
		},
	})
}

func lmAction[S any](cmd *cli.Command, t lmToy[S]) error {
	if err := noToyArgs(cmd); err != nil {
		return err
	}
	b, err := newBackend(cmd.Root().ErrWriter, cmd.String("backend"))
	if err != nil {
		return usageError{fmt.Errorf("toy %s: --%w", cmd.Name, err)}
	}
	defer b.Finalize()
	s := t.defaults()
	params := t.params(&s)
	if err := readToyParams(cmd, params); err != nil {
		return err
	}
	w := cmd.Root().Writer
	if !cmd.Bool("json") && !cmd.Bool("check") {
		return printLM(w, t, s, b)
	}
	res, err := t.run(t.name, s, b)
	if err != nil {
		return err
	}
	if cmd.Bool("check") {
		oracle, err := t.run(t.name, s, nil)
		if err != nil {
			return err
		}
		d, err := tinylmgomlx.Compare(res.value, oracle.value, checkTol)
		if err != nil {
			return fmt.Errorf("toy %s --check: the GoMLX path and the float64 oracle differ: %w", cmd.Name, err)
		}
		fmt.Fprintf(cmd.Root().ErrWriter, "toy %s --check: GoMLX path = float64 oracle (max |difference| %.3g ≤ %g, same samples)\n",
			cmd.Name, d, checkTol)
	}
	if !cmd.Bool("json") {
		return writeLM(w, t, res)
	}
	args := kvs{{"json", true}}
	for _, p := range params {
		args = append(args, kv{p.key, p.arg()})
	}
	return writeLMJSON(w, t.phase, t.name, args, res)
}

// printLM runs t with settings s through GoMLX on b and prints the course's lines.
func printLM[S any](w io.Writer, t lmToy[S], s S, b backends.Backend) error {
	res, err := t.run(t.name, s, b)
	if err != nil {
		return err
	}
	return writeLM(w, t, res)
}

// writeLM prints the phase's hand-check lines (when it has some), then the result's.
func writeLM[S any](w io.Writer, t lmToy[S], res lmResult) error {
	var buf bytes.Buffer
	if t.handCheck != nil {
		if err := t.handCheck(&buf); err != nil {
			return fmt.Errorf("toy %s: %w", t.name, err)
		}
	}
	res.print(&buf)
	_, err := w.Write(buf.Bytes())
	return err
}

// writeLMJSON prints {"phase": N, "args": {...}, <the result's keys>} on one line.
func writeLMJSON(w io.Writer, phase int, name string, args kvs, res lmResult) error {
	head, err := json.Marshal(kvs{{"phase", phase}, {"args", args}})
	if err != nil {
		return err
	}
	body, err := json.Marshal(res.value)
	if err != nil {
		return fmt.Errorf("toy %s: %w", name, err)
	}
	if len(body) < 2 || body[0] != '{' {
		return fmt.Errorf("toy %s: result is not a JSON object", name)
	}
	out := append(head[:len(head)-1], ',')
	if len(body) == 2 { // {}
		out = append(head[:len(head)-1], '}')
	} else {
		out = append(out, body[1:]...)
	}
	_, err = fmt.Fprintf(w, "%s\n", out)
	return err
}

// traced truncates a samples_head to n (--trace) entries (the oracle keeps tinylm.TraceLen).
func traced(n int, head []tinylm.Sample) []tinylm.Sample {
	if n < len(head) {
		return head[:max(n, 0)]
	}
	return head
}

// traceVar is --trace, the sampled responses kept in --json's samples_head (default and at most
// tinylm.TraceLen).
func traceVar(p *int) toyParam {
	return newToyParam(&cli.IntFlag{Name: "trace", Value: *p,
		Usage: fmt.Sprintf("sampled responses kept in --json's samples_head (0..%d)", tinylm.TraceLen),
		Validator: func(n int) error {
			if n < 0 || n > tinylm.TraceLen {
				return fmt.Errorf("--trace %d: want 0..%d", n, tinylm.TraceLen)
			}
			return nil
		}}, func(cmd *cli.Command) error { *p = cmd.Int("trace"); return nil }, func() any { return *p })
}
