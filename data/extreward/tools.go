package extreward

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// PyTools are Python functions a model may call in a multi-turn GRPO rollout (grpo --tools
// FILE.py:FUNC), held by one worker process (worker.py --tools) and called as TRL 1.x calls its
// tools: f(**arguments), the tool message str(result). Their schemas are transformers'
// get_json_schema of each function. A worker that stops answering within the timeout is killed,
// that call fails, and the next call starts a new worker (a module's state does not survive it).
type PyTools struct {
	python  string
	specs   []string
	stderr  io.Writer
	timeout time.Duration

	mu     sync.Mutex
	w      *Worker
	Names  []string
	Schema []json.RawMessage
}

// ExpandToolSpecs reads --tools entries: FILE.py:F1,F2 (the flag's comma split leaves F2 alone,
// taken as a function of the FILE.py before it), module.func, or one of the builtin names, into
// the built-in names and the Python specs, in order.
func ExpandToolSpecs(entries []string, builtin []string) (names, specs []string, err error) {
	file := ""
	for _, e := range entries {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
			continue
		case IsPythonSpec(e):
			specs = append(specs, e)
			file = ""
			if f, _, ok := strings.Cut(e, ":"); ok && strings.HasSuffix(f, ".py") {
				file = f
			}
		case slices.Contains(builtin, e):
			names = append(names, e)
		case file != "" && !strings.ContainsAny(e, ":./"):
			specs = append(specs, file+":"+e)
		default:
			return nil, nil, fmt.Errorf("no tool %q (built in: %s; or FILE.py:FUNC, a dotted module.func)", e, strings.Join(builtin, ", "))
		}
	}
	return names, specs, nil
}

// StartTools loads specs (FILE.py:FUNC or module.func) in a tool worker: python is the
// interpreter (python3 on PATH when empty), timeout bounds the loading and each call.
func StartTools(python string, specs []string, stderr io.Writer, timeout time.Duration) (*PyTools, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	t := &PyTools{python: python, specs: specs, stderr: stderr, timeout: timeout}
	w, rep, err := startWorker(python, []string{"--tools"}, specs, stderr, timeout, "tool")
	if err != nil {
		return nil, err
	}
	if len(rep.Schemas) != len(specs) {
		w.Close()
		return nil, fmt.Errorf("tool worker: %d schemas for %d tools", len(rep.Schemas), len(specs))
	}
	t.w, t.Names, t.Schema = w, rep.Funcs, rep.Schemas
	return t, nil
}

// Call runs tool i on args: its result's str(), or the tool's exception as an error (its str()).
func (t *PyTools) Call(i int, args map[string]any) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.w == nil || t.w.dead != nil {
		if t.w != nil {
			t.w.Close()
		}
		w, _, err := startWorker(t.python, []string{"--tools"}, t.specs, t.stderr, t.timeout, "tool")
		if err != nil {
			t.w = nil
			return "", err
		}
		t.w = w
	}
	return t.w.callTool(i, args)
}

// Close ends the worker.
func (t *PyTools) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.w == nil {
		return nil
	}
	return t.w.Close()
}

// callTool runs tool i of a tool worker.
func (w *Worker) callTool(i int, args map[string]any) (string, error) {
	req, err := json.Marshal(map[string]any{"tool": i, "args": args})
	if err != nil {
		return "", fmt.Errorf("encoding the call: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead != nil {
		return "", w.dead
	}
	if _, err := w.in.Write(append(req, '\n')); err != nil {
		return "", w.fail(fmt.Errorf("the Python worker is gone: %w", err))
	}
	var rep workerReply
	if err := w.receive(&rep, "the tool call"); err != nil {
		return "", err
	}
	switch {
	case rep.Raised != nil:
		return "", fmt.Errorf("%s", *rep.Raised)
	case rep.Result != nil:
		return *rep.Result, nil
	}
	return "", w.fail(fmt.Errorf("the tool worker answered neither a result nor an exception"))
}
