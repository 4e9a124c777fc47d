package main

// `posttrain toy lm-reinforce|rlhf|dpo|kto|grpo|variants`: the course's TinyLM phases 8-12, trained
// through the GoMLX trainer path (toy/tinylmgomlx: trainers/{dpo,kto,grpo} losses + trainers/step)
// and printed by the float64 oracle's print functions (toy/tinylm). --json prints one object with
// the golden's keys ({"phase", "args", results}); --check also runs the oracle and fails if the two
// differ by more than 1e-9 (or sample differently).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

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

// lmRun trains an experiment from its flags: through GoMLX on b, or with the float64 oracle when
// b is nil.
type lmRun func(cmd *cli.Command, b backends.Backend) (lmResult, error)

// lmToy is one `posttrain toy` TinyLM experiment.
type lmToy struct {
	phase, order int
	name, usage  string
	flags        []cli.Flag
	args         func(cmd *cli.Command) kvs // the golden's "args", snake_case, null where unset
	run          lmRun
	handCheck    func(io.Writer) error // the phase's hand_check lines before the results, or nil
}

// kv/kvs is an ordered JSON object.
type kv struct {
	Key   string
	Value any
}
type kvs []kv

// MarshalJSON writes the pairs in order.
func (o kvs) MarshalJSON() ([]byte, error) { return pyfmt.MarshalItems(o) }

// Optional settings are string flags whose empty default means "the course's value" (None in
// the golden's args). urfave/cli's IsSet is not used: it stays true across runs in one process.

func optionalFlag(name, usage string) cli.Flag {
	return &cli.StringFlag{Name: name, Usage: usage}
}

// optFloat is an optional number flag: nil when empty.
func optFloat(cmd *cli.Command, name string) (*float64, error) {
	s := strings.TrimSpace(cmd.String(name))
	if s == "" {
		return nil, nil
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, usageError{fmt.Errorf("toy %s: --%s %q is not a number", cmd.Name, name, s)}
	}
	return &x, nil
}

// optInt is an optional integer flag: nil when empty.
func optInt(cmd *cli.Command, name string) (*int, error) {
	s := strings.TrimSpace(cmd.String(name))
	if s == "" {
		return nil, nil
	}
	x, err := strconv.Atoi(s)
	if err != nil {
		return nil, usageError{fmt.Errorf("toy %s: --%s %q is not an integer", cmd.Name, name, s)}
	}
	return &x, nil
}

// optBool is an optional true/false flag: nil when empty.
func optBool(cmd *cli.Command, name string) (*bool, error) {
	s := strings.TrimSpace(cmd.String(name))
	if s == "" {
		return nil, nil
	}
	x, err := strconv.ParseBool(s)
	if err != nil {
		return nil, usageError{fmt.Errorf("toy %s: --%s %q: want true or false", cmd.Name, name, s)}
	}
	return &x, nil
}

// optString is an optional string flag: nil when empty.
func optString(cmd *cli.Command, name string) *string {
	if s := strings.TrimSpace(cmd.String(name)); s != "" {
		return &s
	}
	return nil
}

// orNull is p's value, or nil (JSON null) when p is nil.
func orNull[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// addLMToy registers t as `posttrain toy <name>` and its phase's lines for `toy course`.
func addLMToy(t lmToy) {
	flags := append([]cli.Flag{
		jsonFlag(),
		&cli.BoolFlag{Name: "check", Usage: "also run the float64 oracle (toy/tinylm) and fail if the results differ by more than 1e-9"},
		backendFlag(),
	}, t.flags...)
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
			// The defaults: a command parsed with no flags set.
			cmd := &cli.Command{Name: t.name, Flags: t.flags, Writer: io.Discard, ErrWriter: io.Discard,
				Action: func(context.Context, *cli.Command) error { return nil }}
			if err := cmd.Run(context.Background(), []string{t.name}); err != nil {
				return err
			}
			b, err := backend.New(backend.Resolve(""))
			if err != nil {
				return err
			}
			defer b.Finalize()
			return printLM(w, cmd, t, b)
		},
	})
}

func lmAction(cmd *cli.Command, t lmToy) error {
	if err := noToyArgs(cmd); err != nil {
		return err
	}
	b, err := backend.New(backend.Resolve(cmd.String("backend")))
	if err != nil {
		return usageError{fmt.Errorf("toy %s: --%w", cmd.Name, err)}
	}
	defer b.Finalize()
	w := cmd.Root().Writer
	if !cmd.Bool("json") && !cmd.Bool("check") {
		return printLM(w, cmd, t, b)
	}
	res, err := t.run(cmd, b)
	if err != nil {
		return err
	}
	if cmd.Bool("check") {
		oracle, err := t.run(cmd, nil)
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
	return writeLMJSON(w, cmd, t, res)
}

// printLM runs t through GoMLX on b and prints the course's lines.
func printLM(w io.Writer, cmd *cli.Command, t lmToy, b backends.Backend) error {
	res, err := t.run(cmd, b)
	if err != nil {
		return err
	}
	return writeLM(w, t, res)
}

func writeLM(w io.Writer, t lmToy, res lmResult) error {
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
func writeLMJSON(w io.Writer, cmd *cli.Command, t lmToy, res lmResult) error {
	head, err := json.Marshal(kvs{{"phase", t.phase}, {"args", append(kvs{{"json", true}}, t.args(cmd)...)}})
	if err != nil {
		return err
	}
	body, err := json.Marshal(res.value)
	if err != nil {
		return fmt.Errorf("toy %s: %w", t.name, err)
	}
	if len(body) < 2 || body[0] != '{' {
		return fmt.Errorf("toy %s: result is not a JSON object", t.name)
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

// traced truncates a samples_head to --trace entries (the oracle keeps tinylm.TraceLen).
func traced(cmd *cli.Command, head []tinylm.Sample) []tinylm.Sample {
	if n := cmd.Int("trace"); n < len(head) {
		return head[:max(n, 0)]
	}
	return head
}

func traceFlag() cli.Flag {
	return &cli.IntFlag{Name: "trace", Value: tinylm.TraceLen,
		Usage: fmt.Sprintf("sampled responses kept in --json's samples_head (0..%d)", tinylm.TraceLen),
		Validator: func(n int) error {
			if n < 0 || n > tinylm.TraceLen {
				return fmt.Errorf("--trace %d: want 0..%d", n, tinylm.TraceLen)
			}
			return nil
		}}
}
