package extreward

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

//go:embed worker.py
var workerPy string

// Worker is one Python process that holds every Python reward function of a run, loaded once and
// called once per reward call (TRL calls them in-process; a long-lived worker keeps the imports
// and any state a module keeps between calls, as there). Calls are serialised. Not safe to use
// after Close.
type Worker struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	lines   chan []byte // the protocol stream's lines; closed when the worker's stdout ends
	tail    *tailWriter
	timeout time.Duration
	mu      sync.Mutex
	dead    error // set once the worker has failed: every later call returns it
}

type workerReply struct {
	Funcs   []string          `json:"funcs"`
	Schemas []json.RawMessage `json:"schemas"`
	Rewards []*float64        `json:"rewards"`
	Result  *string           `json:"result"`
	// An environment worker's (env.go).
	Methods      []string  `json:"methods"`
	HasReward    bool      `json:"reward"`
	Observations []*string `json:"observations"`
	Raised       *string   `json:"raised"`
	Error        *string   `json:"error"`
	Where        string    `json:"where"`
}

// Start starts python (the python3 on PATH when empty) with the worker and loads specs (FILE.py:FUNC
// or module.func) in it, relative paths and modules from the current directory. The functions'
// prints and warnings go to stderr. timeout bounds the loading and each call (0: DefaultTimeout).
func Start(python string, specs []string, stderr io.Writer, timeout time.Duration) (*Worker, []*Func, error) {
	w, rep, err := startWorker(python, nil, specs, stderr, timeout, "reward")
	if err != nil {
		return nil, nil, err
	}
	funcs := make([]*Func, len(specs))
	for i, spec := range specs {
		funcs[i] = &Func{Name: rep.Funcs[i], Spec: spec, score: func(c Call) ([]float64, error) { return w.call(i, c) }}
	}
	return w, funcs, nil
}

// startWorker starts python (the python3 on PATH when empty) with the worker, its arguments mode then
// specs, and reads its first answer: the functions loaded. kind ("reward", "tool") names the
// worker in errors.
func startWorker(python string, mode, specs []string, stderr io.Writer, timeout time.Duration, kind string) (*Worker, *workerReply, error) {
	if python == "" {
		p, err := exec.LookPath("python3")
		if err != nil {
			what := "reward function"
			if kind == "tool" {
				what = "tool"
			}
			return nil, nil, fmt.Errorf("%s %s is Python: no python3 on PATH (install Python 3, or give its path with --reward-python)", what, specs[0])
		}
		python = p
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if stderr == nil {
		stderr = os.Stderr
	}
	w := &Worker{timeout: timeout, tail: &tailWriter{w: stderr}, lines: make(chan []byte, 1)}
	w.cmd = exec.Command(python, append(append([]string{"-u", "-c", workerPy}, mode...), specs...)...)
	// Its own process group: a Ctrl-C at the terminal reaches posttrain, which stops between steps
	// and then closes the worker, not the worker in the middle of a call.
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w.cmd.Stderr = w.tail
	var err error
	if w.in, err = w.cmd.StdinPipe(); err != nil {
		return nil, nil, err
	}
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := w.cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("reward worker: starting %s: %w", python, err)
	}
	go func() {
		r := bufio.NewReaderSize(out, 1<<16)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 && err == nil {
				w.lines <- line
			}
			if err != nil {
				close(w.lines)
				return
			}
		}
	}()
	var rep workerReply
	if err := w.receive(&rep, "loading "+strings.Join(specs, ", ")); err != nil {
		w.Close()
		return nil, nil, err
	}
	if rep.Error != nil {
		w.Close()
		return nil, nil, fmt.Errorf("%s worker: loading %s: %s%s", kind, strings.Join(specs, ", "), *rep.Error, at(rep.Where))
	}
	if len(rep.Funcs) != len(specs) {
		w.Close()
		return nil, nil, fmt.Errorf("%s worker: loaded %d functions for %d specs", kind, len(rep.Funcs), len(specs))
	}
	return w, &rep, nil
}

func at(where string) string {
	if where == "" {
		return ""
	}
	return " (" + where + ")"
}

// call runs function i of the worker on c.
func (w *Worker) call(i int, c Call) ([]float64, error) {
	kw, err := c.kwargs()
	if err != nil {
		return nil, err
	}
	req, err := json.Marshal(map[string]any{"func": i, "kwargs": kw, "state": c.State})
	if err != nil {
		return nil, fmt.Errorf("encoding the call: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead != nil {
		return nil, w.dead
	}
	if _, err := w.in.Write(append(req, '\n')); err != nil {
		return nil, w.fail(fmt.Errorf("the Python worker is gone: %w", err))
	}
	var rep workerReply
	if err := w.receive(&rep, "the call"); err != nil {
		return nil, err
	}
	if rep.Error != nil {
		return nil, fmt.Errorf("raised %s%s", *rep.Error, at(rep.Where))
	}
	return rewards(rep.Rewards)
}

// receive reads the worker's next line into rep, within the timeout; a worker that exits or does
// not answer is killed and the error says which, with the last line it wrote to stderr.
func (w *Worker) receive(rep *workerReply, what string) error {
	t := time.NewTimer(w.timeout)
	defer t.Stop()
	select {
	case line, ok := <-w.lines:
		if !ok {
			err := w.cmd.Wait()
			w.cmd = nil
			msg := "the Python worker exited"
			if err != nil {
				msg += " (" + err.Error() + ")"
			}
			return w.fail(fmt.Errorf("%s during %s%s", msg, what, w.tail.last()))
		}
		if err := json.Unmarshal(line, rep); err != nil {
			return w.fail(fmt.Errorf("the Python worker answered %q: %w", strings.TrimSpace(string(line)), err))
		}
		return nil
	case <-t.C:
		return w.fail(fmt.Errorf("no answer in %s during %s (--reward-timeout): the Python worker was stopped", w.timeout, what))
	}
}

// fail records err as the worker's end and kills it.
func (w *Worker) fail(err error) error {
	w.dead = err
	w.kill()
	return err
}

func (w *Worker) kill() {
	if w.cmd != nil && w.cmd.Process != nil {
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		_ = w.cmd.Wait()
		w.cmd = nil
	}
}

// Close ends the worker: its stdin closes, so it returns from its loop; one that has not exited
// after a few seconds is killed.
func (w *Worker) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead == nil {
		w.dead = errors.New("the reward worker is closed")
	}
	if w.cmd == nil {
		return nil
	}
	_ = w.in.Close()
	done := make(chan struct{})
	go func() {
		for range w.lines {
		}
		close(done)
	}()
	select {
	case <-done:
		_ = w.cmd.Wait()
		w.cmd = nil
	case <-time.After(5 * time.Second):
		w.kill()
	}
	return nil
}

// tailWriter passes the worker's stderr on and keeps its last non-empty line for error messages.
type tailWriter struct {
	w    io.Writer
	mu   sync.Mutex
	buf  []byte
	line string
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.buf = append(t.buf, p...)
	for {
		i := strings.IndexByte(string(t.buf), '\n')
		if i < 0 {
			break
		}
		if s := strings.TrimSpace(string(t.buf[:i])); s != "" {
			t.line = s
		}
		t.buf = t.buf[i+1:]
	}
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	t.mu.Unlock()
	return t.w.Write(p)
}

func (t *tailWriter) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.line
	if r := strings.TrimSpace(string(t.buf)); r != "" {
		s = r
	}
	if s == "" {
		return ""
	}
	return ": " + s
}
