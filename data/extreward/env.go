package extreward

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// PyEnv is an environment class run in a worker (grpo --environment FILE.py:Class), as TRL 1.x's
// GRPOTrainer runs its environment_factory: one instance per rollout, made as needed and reused
// across generation batches (TRL pools them), reset with the rollout's dataset row before its
// generation (a string it returns is appended to the prompt's last user message), its public
// methods (but reset and get_reward) the rollout's tools, and, where the class defines
// get_reward, one more reward: each rollout's get_reward() after its generation, logged under the
// class's name. A reset or get_reward that raises stops the run (the caller's loop.Fault); a tool
// method that raises is a failed tool call, as TRL's.
type PyEnv struct {
	w *Worker
	// Name is the class's name; Methods its tool methods, Schemas their JSON schemas
	// (transformers' get_json_schema of the bound methods); HasReward whether it defines
	// get_reward.
	Name      string
	Methods   []string
	Schemas   []json.RawMessage
	HasReward bool
}

// StartEnv loads spec (FILE.py:Class or module.Class) in an environment worker and probes one
// instance; python and timeout as StartTools'.
func StartEnv(python, spec string, stderr io.Writer, timeout time.Duration) (*PyEnv, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	w, rep, err := startWorker(python, []string{"--env"}, []string{spec}, stderr, timeout, "environment")
	if err != nil {
		return nil, err
	}
	if len(rep.Schemas) != len(rep.Methods) {
		w.Close()
		return nil, fmt.Errorf("environment worker: %d schemas for %d methods", len(rep.Schemas), len(rep.Methods))
	}
	return &PyEnv{w: w, Name: rep.Funcs[0], Methods: rep.Methods, Schemas: rep.Schemas, HasReward: rep.HasReward}, nil
}

// Reset resets instance i with rows[i] (its columns as keyword arguments) and returns each one's
// observation (nil for None).
func (e *PyEnv) Reset(rows []map[string]any) ([]*string, error) {
	var rep workerReply
	if err := e.w.request(map[string]any{"op": "reset", "rows": rows}, &rep, "reset"); err != nil {
		return nil, err
	}
	if len(rep.Observations) != len(rows) {
		return nil, fmt.Errorf("%s.reset: %d observations for %d rollouts", e.Name, len(rep.Observations), len(rows))
	}
	return rep.Observations, nil
}

// Call runs method of instance i on args: str() of its result, or its exception's str() as the
// error.
func (e *PyEnv) Call(i int, method string, args map[string]any) (string, error) {
	var rep workerReply
	if err := e.w.request(map[string]any{"op": "call", "env": i, "method": method, "args": args}, &rep, method); err != nil {
		return "", err
	}
	switch {
	case rep.Raised != nil:
		return "", fmt.Errorf("%s", *rep.Raised)
	case rep.Result != nil:
		return *rep.Result, nil
	}
	return "", fmt.Errorf("%s.%s: the worker answered neither a result nor an exception", e.Name, method)
}

// Rewards are instances 0..n-1's get_reward() (NaN for None).
func (e *PyEnv) Rewards(n int) ([]float64, error) {
	var rep workerReply
	if err := e.w.request(map[string]any{"op": "reward", "n": n}, &rep, "get_reward"); err != nil {
		return nil, err
	}
	return rewards(rep.Rewards)
}

// Close ends the worker.
func (e *PyEnv) Close() error { return e.w.Close() }

// request sends req and reads the answer into rep; an error the worker reports (a reset or
// get_reward that raised) is returned naming what and where.
func (w *Worker) request(req map[string]any, rep *workerReply, what string) error {
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding the request: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead != nil {
		return w.dead
	}
	if _, err := w.in.Write(append(b, '\n')); err != nil {
		return w.fail(fmt.Errorf("the Python worker is gone: %w", err))
	}
	if err := w.receive(rep, what); err != nil {
		return err
	}
	if rep.Error != nil {
		return fmt.Errorf("%s raised %s%s", what, *rep.Error, at(rep.Where))
	}
	return nil
}
