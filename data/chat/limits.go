package chat

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nikolalohinski/gonja/v2/builtins"
	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
)

// Bounds on one Render. gonja has none of its own: a macro that calls itself without a base case
// overflows the goroutine stack (a fatal error, not a panic), and range(10**12) renders for ever.
// Each limit is far above what a real chat template needs (a conversation is rendered by a few
// loops over its messages and tools) and far below what takes the process down.
const (
	// MaxMacroDepth bounds nested macro calls. Python's Jinja stops near a few hundred (each macro
	// call costs several Python frames against the default recursion limit of 1000); a template
	// rendering a nested JSON schema recurses once per nesting level.
	MaxMacroDepth = 256
	// MaxRenderSteps bounds the work of one render: macro calls plus the elements every range()
	// produces. A chat template does a few per message and tool; 1e5 steps take about a second
	// (1e6 empty loop iterations took 7.7 s, 1e6 macro calls 11 s, on a busy 2-core machine).
	MaxRenderSteps = 100_000
	// MaxRenderOutput bounds the rendered text, and the text of any one macro call, in bytes
	// (a long-context conversation is a few MiB).
	MaxRenderOutput = 64 << 20
	// MaxRenderTime bounds the wall-clock time of one render, for the work the bounds above do not
	// count (for example a long loop over a huge list). Not bounded without patching gonja: string
	// repetition, "x" * 10000000000, which gonja's evaluator hands to strings.Repeat with no hook
	// (it allocates the whole string before the output limit can see it).
	MaxRenderTime = 30 * time.Second
)

// renderLimits are the bounds of one render; tests lower them through the limits variable.
type renderLimits struct {
	depth  int
	steps  int
	output int
	time   time.Duration
}

var limits = renderLimits{depth: MaxMacroDepth, steps: MaxRenderSteps, output: MaxRenderOutput, time: MaxRenderTime}

// budgetKey is the template variable that holds a render's *budget. It is not a Jinja
// identifier, so no template can read or replace it.
const budgetKey = "posttrain render budget"

// budget is what one render has spent against its limits. Macro calls and range() run on the
// render's goroutine, so the counters need no lock; stop is set by Render when the deadline
// passes, so the abandoned render fails at its next macro call or range().
type budget struct {
	lim   renderLimits
	depth int
	steps int
	err   error // the first limit exceeded
	stop  atomic.Bool
}

// fail records the first exceeded limit and returns it.
func (b *budget) fail(err error) error {
	if b.err == nil {
		b.err = err
	}
	return b.err
}

// charge spends n steps.
func (b *budget) charge(n int, what string) error {
	if b.stop.Load() {
		return b.fail(fmt.Errorf("render chat template: took longer than %v", b.lim.time))
	}
	if n > b.lim.steps-b.steps {
		return b.fail(fmt.Errorf("render chat template: %s: more than %d macro calls and range() elements in all (an endless or huge loop, or recursion that fans out?)", what, b.lim.steps))
	}
	b.steps += n
	return nil
}

func budgetOf(ctx *exec.Context) *budget {
	v, _ := ctx.Get(budgetKey)
	b, _ := v.(*budget)
	return b
}

// limitWriter is the render's output, failing past the output limit.
type limitWriter struct {
	out strings.Builder // not embedded: its WriteString would bypass the limit
	b   *budget
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if w.out.Len()+len(p) > w.b.lim.output {
		return 0, w.b.fail(fmt.Errorf("render chat template: output longer than %d bytes (an endless or huge loop?)", w.b.lim.output))
	}
	return w.out.Write(p)
}

// macroParser is gonja's {% macro %} whose macro counts its calls and nesting against the
// render's budget.
func macroParser(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	builtin, _ := builtins.ControlStructures.Get("macro")
	cs, err := builtin(p, args)
	if err != nil {
		return nil, err
	}
	m, ok := cs.(*controlStructures.MacroControlStructure)
	if !ok {
		return nil, fmt.Errorf("internal error: gonja's macro control structure is a %T", cs)
	}
	return &boundedMacro{m}, nil
}

// boundedMacro is a {% macro %} definition: executing it defines the macro in the context,
// wrapped so that each call is charged to the render's budget.
type boundedMacro struct {
	*controlStructures.MacroControlStructure
}

func (m *boundedMacro) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	if err := m.MacroControlStructure.Execute(r, tag); err != nil {
		return err
	}
	ctx := r.Environment.Context
	v, _ := ctx.Get(m.Name)
	fn, ok := v.(exec.Macro)
	b := budgetOf(ctx)
	if !ok || b == nil {
		return nil
	}
	name := m.Name
	ctx.Set(name, exec.Macro(func(params *exec.VarArgs) *exec.Value {
		if err := b.charge(1, fmt.Sprintf("macro %q", name)); err != nil {
			return exec.AsValue(err)
		}
		if b.depth >= b.lim.depth {
			return exec.AsValue(b.fail(fmt.Errorf("render chat template: macro %q nested deeper than %d calls (recursion without a base case?)", name, b.lim.depth)))
		}
		b.depth++
		out := fn(params)
		b.depth--
		if !out.IsError() && out.Len() > b.lim.output {
			return exec.AsValue(b.fail(fmt.Errorf("render chat template: macro %q returned more than %d bytes (recursion that fans out?)", name, b.lim.output)))
		}
		return out
	}))
	return nil
}

// rangeFunction is gonja's range() charging the elements it will produce to the render's budget
// up front (gonja's {% for %} materialises them all before the first iteration).
func rangeFunction(e *exec.Evaluator, params *exec.VarArgs) (<-chan int, error) {
	if b := budgetOf(e.Environment.Context); b != nil && len(params.Args) > 0 && len(params.Args) <= 3 {
		ints := make([]int, len(params.Args))
		for i, a := range params.Args {
			if !a.IsInteger() {
				return builtinRange(e, params) // gonja's own error
			}
			ints[i] = a.Integer()
		}
		start, stop, step := 0, ints[0], 1
		if len(ints) > 1 {
			start, stop = ints[0], ints[1]
		}
		if len(ints) == 3 {
			step = ints[2]
		}
		if step != 0 {
			if err := b.charge(rangeLen(start, stop, step), fmt.Sprintf("range(%s)", joinInts(ints))); err != nil {
				return nil, err
			}
		}
	}
	return builtinRange(e, params)
}

func builtinRange(e *exec.Evaluator, params *exec.VarArgs) (<-chan int, error) {
	v, _ := builtins.GlobalFunctions.Get("range")
	return v.(func(*exec.Evaluator, *exec.VarArgs) (<-chan int, error))(e, params)
}

// rangeLen is len(range(start, stop, step)) for step != 0, saturating instead of overflowing.
func rangeLen(start, stop, step int) int {
	var span, by uint64 // in uint64, exact for every pair of ints
	switch {
	case step > 0 && stop > start:
		span, by = uint64(stop)-uint64(start), uint64(step)
	case step < 0 && start > stop:
		span, by = uint64(start)-uint64(stop), -uint64(step)
	default:
		return 0
	}
	if n := (span-1)/by + 1; n <= 1<<62 {
		return int(n)
	}
	return 1 << 62
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
